"""The MCTS benchmark runs end to end and writes every number it prints (tiny sizes)."""

import json

from meeple.bench.__main__ import main


def test_mcts_bench_writes_results(tmp_path):
    out = tmp_path / "mcts.json"
    code = main(["mcts", "--out", str(out), "--positions", "2", "--simulations", "50", "--tree-simulations", "200",
                 "--games", "4", "model.channels=8", "model.blocks=1", "phase.selfplay.num_simulations=8",
                 "phase.selfplay.games_per_worker=2", "phase.selfplay.batch_size=8"])
    assert code == 0
    result = json.loads(out.read_text())
    assert result["tree"]["simulations"] == 2 * 200
    assert result["rollouts"]["meeple"]["simulations"] == 2 * 50
    assert result["rollouts"]["openspiel"]["simulations"] == 2 * 50
    assert result["rollout_ratio_meeple_over_openspiel"] > 0
    assert result["selfplay"]["games"] == 4 and result["selfplay"]["positions_per_s"] > 0
    assert 0 < result["selfplay"]["mean_fill_ratio"] <= 1
    assert set(result["goals"]) == {"rollout_sims_vs_openspiel_>=10x", "tree_sims_per_s_>=1M", "fill_ratio_>=0.9",
                                    "evaluator_idle_<10%"}
