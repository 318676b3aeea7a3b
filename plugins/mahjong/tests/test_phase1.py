"""`python train.py +experiment=phase1 debug=tiny`: the corpus is built from rule-bot self-play,
the network is cloned from it and evaluated in duplicate, and gates/phase1.pt records what
transition=from_phase1 checks before phase 2."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir

from meeple.checkpoint.callback import load_gate
from meeple.config.compose import conf_dir
from meeple.config.schema import Transition, check_transition, checked, gate_conditions
from meeple.errors import GateFailed
from meeple.pipeline.transition import check_gate

TRAIN = str(Path(__file__).resolve().parents[3] / "train.py")


@pytest.fixture(scope="module")
def phase1_run(tmp_path_factory):
    cwd = tmp_path_factory.mktemp("phase1")
    done = subprocess.run([sys.executable, TRAIN, "+experiment=phase1", "debug=tiny", "tracking=none"],
                          cwd=cwd, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    (run,) = (cwd / "outputs" / "runs").iterdir()
    return cwd, run


def test_phase1_builds_its_corpus_clones_and_writes_the_gate(phase1_run):
    cwd, run = phase1_run
    (corpus,) = (cwd / "outputs" / "corpora").iterdir()
    request = json.loads((corpus / "corpus.json").read_text())
    assert request["selfplay"]["games"] == 4 and request["selfplay"]["policy"] == "rule"
    assert (corpus / "manifest.sqlite").is_file() and (corpus / "shards" / "index.json").is_file()
    metrics = load_gate(run / "gates" / "phase1.pt")["metrics"]
    # held-out accuracies by decision kind, the duplicate against rule bots, and its untrained baseline
    for key in ("val/policy_ce", "val/accuracy_discard", "val/accuracy_top3", "val/aux_danger",
                "eval/avg_rank", "eval/avg_rank_ci_low", "eval/untrained_avg_rank", "eval/rank_points"):
        assert key in metrics, key
    assert 0 <= metrics["val/accuracy_discard"] <= 1 and 1 <= metrics["eval/avg_rank"] <= 4
    assert metrics["eval/avg_rank_ci_low"] <= metrics["eval/avg_rank"] <= metrics["eval/avg_rank_ci_high"]
    assert metrics["val/accuracy"] <= metrics["val/accuracy_top3"]


def _from_phase1(**gate_overrides) -> Transition:
    with initialize_config_dir(config_dir=str(conf_dir()), version_base="1.3"):
        cfg = compose("transition/from_phase1")
    for i, threshold in gate_overrides.items():
        cfg.transition.gate[int(i[1:])].threshold = threshold
    tr = checked(cfg, "transition", Transition)
    check_transition(tr)
    return tr


def test_the_phase2_transition_checks_both_conditions_on_the_gate_file(phase1_run, tmp_path):
    _, run = phase1_run
    gate = run / "gates" / "phase1.pt"
    metrics = load_gate(gate)["metrics"]
    tr = _from_phase1()
    assert [g.metric for g in gate_conditions(tr)] == ["val/accuracy_discard", "eval/avg_rank"]
    # four tiny games of training clone nothing: the default bar stops phase 2 and says why
    with pytest.raises(GateFailed, match=r"gate failed: phase 0 \(phase1\) .*needs"):
        check_gate(gate_conditions(tr), metrics, gate, tmp_path / "gate.json", previous_label="phase 0 (phase1)",
                   label="phase 1 (phase2)")
    lowered = _from_phase1(g0=0.0, g1=4.0)
    check_gate(gate_conditions(lowered), metrics, gate, tmp_path / "gate.json", previous_label="phase 0 (phase1)",
               label="phase 1 (phase2)")
    assert json.loads((tmp_path / "gate.json").read_text())["passed"] is True
