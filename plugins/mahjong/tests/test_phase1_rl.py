"""`python train.py +experiment=phase1_rl debug=tiny`: PPO against three rule bots from phase 1's
gate, with the public network, a per-tile discard head that starts at zero and trains at 10x the
cloned body's constant rate, and the KL anchor held (docs/rl_diagnostics.md, issue 40's goal 1)."""

import pytest

from meeple.checkpoint.callback import load_gate
from meeple.checkpoint.io import load_verified


def test_ppo_after_cloning_starts_as_the_clone_and_trains_its_new_head_fast(mahjong_runs, tiny_train, tmp_path):
    source = mahjong_runs["phase2"]  # its gates/phase1.pt is the clone
    tiny_train(tmp_path, "+experiment=phase1_rl", f"pipeline.source={source}")
    (run,) = (tmp_path / "outputs" / "runs").iterdir()
    clone = load_gate(source / "gates" / "phase1.pt")["model_state_dict"]
    gate = load_gate(run / "gates" / "rl.pt")
    state = gate["model_state_dict"]
    (stem,) = [k for k in state if k.startswith("actor.") and k.endswith("stem.0.weight")]
    assert state[stem].shape[1] == 84 and not any("oracle" in k for k in state)  # public planes only
    assert not (state[stem] == clone[stem]).all()  # PPO moved the cloned body
    head = {k: v for k, v in state.items() if ".addend." in k and k.startswith("actor.")}
    assert head and all(v.abs().sum() > 0 for v in head.values())  # the tile head left its zero start
    assert "eval/avg_rank" in gate["metrics"]  # the duplicate against three rule bots
    latest = load_verified(run / "phase1" / "checkpoints" / "latest.pt")
    assert latest["config"]["env"]["opponents"] == "rule" and latest["config"]["env"]["oracle"] is False
    assert latest["config"]["model"]["tile_head"] and latest["config"]["model"]["detach_critic"]
    phase = latest["config"]["phase"]
    assert phase["anneal_lr"] is False and phase["reference_kl"] == {"coef": 0.2, "anneal_fraction": None}
    body, new = latest["optimizer_state_dict"]["param_groups"]  # constant rates
    assert body["lr"] == pytest.approx(1e-4) and new["lr"] == pytest.approx(1e-3)
    # the tile head's weight and bias, the lookahead logits' weight and bias, the lookahead stem
    assert len(new["params"]) == 5
    looked = [k for k in state if "lookahead_stem" in k and k.startswith("actor.")]
    assert latest["config"]["model"]["lookahead"] and looked and all(state[k].abs().sum() > 0 for k in looked)
    assert latest["global_step"] == gate["global_step"]  # the gate is the last checkpoint
