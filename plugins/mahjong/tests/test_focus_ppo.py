"""PPO whose surrogate sees only the decisions with a riichi, call or win option
(meeple_mahjong.focus_ppo): which rows are in focus, what their advantages become, and the module
through `python train.py +experiment=phase1_rl debug=tiny`."""

import pytest
import torch

from meeple.checkpoint.io import load_verified
from meeple.errors import ConfigError
from meeple_mahjong.focus_ppo import FocusPPOModule, focus_advantages
from meeple_mahjong.specs import rows_offering
from meeple_native import mahjong as mj


def _mask(*legal):
    m = torch.zeros(mj.NUM_ACTIONS, dtype=torch.bool)
    m[list(legal)] = True
    return m


def test_rows_offering_are_the_decisions_that_offer_one_of_the_kinds():
    masks = torch.stack([
        _mask(0, 5, 20),          # discards only
        _mask(3, 40, 41),         # discards and riichi discards
        _mask(80, 153),           # pon or pass
        _mask(152, 153),          # ron or pass
        _mask(153),               # an inactive slot: pass only
        _mask(4, 117 + 4),        # a kakan on the own turn
    ])  # fmt: skip
    assert rows_offering(masks, ("riichi", "call")).tolist() == [False, True, True, False, False, True]
    assert rows_offering(masks, ("win",)).tolist() == [False, False, False, True, False, False]
    assert rows_offering(masks.view(2, 3, -1), ("riichi",)).tolist() == [[False, True, False], [False, False, False]]


def test_focus_rows_keep_normalised_advantages_and_the_rest_are_scaled():
    adv = torch.tensor([[1.0], [3.0], [-5.0], [7.0]])
    rows = torch.tensor([[True], [True], [False], [False]])
    out = focus_advantages(adv, rows, other_weight=0.0)
    assert out[rows].tolist() == pytest.approx([-2 ** -0.5, 2 ** -0.5])  # mean 2, spread sqrt(2)
    assert out[~rows].tolist() == [0.0, 0.0]
    half = focus_advantages(adv, rows, other_weight=0.5, normalize=False)
    assert half.squeeze(-1).tolist() == [1.0, 3.0, -2.5, 3.5]


def test_bad_focus_options_are_refused():
    for bad in ({"focus": []}, {"focus": ["discard"]}, {"other_weight": 2.0}):
        with pytest.raises(ConfigError, match="phase.module"):
            FocusPPOModule(None, None, **bad)


def test_the_module_trains_phase1_rl_on_its_focus_decisions(mahjong_runs, tiny_train, tmp_path):
    tiny_train(tmp_path, "+experiment=phase1_rl", f"pipeline.source={mahjong_runs['phase2']}",
               "pipeline.stages.rl.phase.module._target_=meeple_mahjong.focus_ppo.FocusPPOModule")
    (run,) = (tmp_path / "outputs" / "runs").iterdir()
    latest = load_verified(run / "phase1" / "checkpoints" / "latest.pt")
    assert latest["config"]["phase"]["module"]["_target_"].endswith("FocusPPOModule")
    metrics = latest["metrics"]
    assert 0 < metrics["focus/fraction"] < 1
    assert 0 <= metrics["focus/riichi_taken"] <= 1 and 0 <= metrics["focus/call_taken"] <= 1
