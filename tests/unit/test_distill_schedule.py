"""The oracle-stage clock of phase=distill: stages end on max_rollouts, or on a plateau of the
metric but never before min_rollouts; the final stretch starts once; its state round-trips."""

import pytest

from meeple.errors import ConfigError
from meeple.phases.distill.schedule import OracleClock
from meeple.phases.distill.schema import Advance, Distill, OracleStage
from meeple.phases.registry import validate


def _distill(**advance) -> Distill:
    return Distill(groups={"opponents": [0, 27], "wall": [27, 205]},
                   schedule=[OracleStage(keep={"opponents": 1.0}, kl_coef=1.0),
                             OracleStage(keep={"opponents": 0.0, "wall": 0.5}, kl_coef=0.3)],
                   advance=Advance(**advance))


def _run(clock: OracleClock, values: list[float]) -> list[tuple[int, bool]]:
    """(stage, final) after each rollout with these metric values."""
    out = []
    for v in values:
        clock.after_rollout({"loss/teacher_kl": v})
        out.append((clock.stage, clock.final))
    return out


def test_a_stage_ends_after_max_rollouts_when_the_metric_keeps_improving():
    clock = OracleClock(_distill(max_rollouts=3, patience=2))
    stages = _run(clock, [1.0, 0.9, 0.8, 0.7, 0.6, 0.5, 0.4])
    assert [s for s, _ in stages] == [0, 0, 1, 1, 1, 2, 2]
    assert stages[-1][1] and stages[4] == (1, False)


def test_a_plateau_ends_a_stage_early_but_not_before_min_rollouts():
    flat = [1.0] * 12
    early = OracleClock(_distill(max_rollouts=10, patience=2))
    assert [s for s, _ in _run(early, flat[:6])] == [0, 0, 1, 1, 1, 2]  # stale twice after the first
    held = OracleClock(_distill(max_rollouts=10, patience=2, min_rollouts=5))
    assert [s for s, _ in _run(held, flat[:10])] == [0, 0, 0, 0, 1, 1, 1, 1, 1, 2]


def test_the_final_stretch_starts_once_and_keeps_the_last_stage_settings():
    clock = OracleClock(_distill(max_rollouts=1))
    assert clock.keep_probabilities() == {"opponents": 1.0, "wall": 1.0} and clock.kl_coef() == 1.0
    assert clock.after_rollout({}) is False  # into stage 1
    assert clock.keep_probabilities() == {"opponents": 0.0, "wall": 0.5} and clock.kl_coef() == 0.3
    assert clock.after_rollout({}) is True  # the final stretch starts now
    assert clock.after_rollout({}) is False and clock.final and clock.stage == 2
    assert clock.kl_coef() == 0.3


def test_the_state_round_trips_mid_stage():
    clock = OracleClock(_distill(max_rollouts=10, patience=3, min_rollouts=4))
    _run(clock, [1.0, 0.5, 0.6])
    again = OracleClock(clock.distill)
    again.load_state_dict(clock.state_dict())
    assert again.state_dict() == clock.state_dict() == dict(stage=0, stage_rollouts=3, best=0.5, stale=1, final=False)
    assert _run(again, [0.7, 0.7]) == _run(clock, [0.7, 0.7])  # same decisions from here on


@pytest.mark.parametrize("overrides, accepted", [
    (["phase.distill.advance.max_rollouts=5", "phase.distill.advance.min_rollouts=6"], r"\[0, max_rollouts=5\]"),
    (["phase.distill.advance.min_rollouts=-1"], r"\[0, max_rollouts=50\]"),
])
def test_min_rollouts_outside_its_range_is_a_config_error(compose, overrides, accepted):
    with pytest.raises(ConfigError, match=r"phase\.distill\.advance\.min_rollouts=-?\d+ is not allowed; accepted: "
                                          r"an integer in " + accepted):
        validate(compose(["phase=distill", *overrides]))


def test_drop_planes_keeps_each_group_with_its_probability_per_sample_and_plane():
    import torch

    from meeple.phases.distill.module import drop_planes

    groups = {"opponents": [0, 27], "wall": [27, 205]}
    planes = torch.ones(400, 205, 3)
    same = drop_planes(planes, {"opponents": 1.0, "wall": 1.0}, groups, torch.Generator().manual_seed(0))
    assert same is planes  # all kept: the teacher reads its input untouched
    out = drop_planes(planes, {"opponents": 0.0, "wall": 0.5}, groups, torch.Generator().manual_seed(0))
    assert out[:, :27].eq(0).all()  # opponents' hands all dropped
    kept = out[:, 27:, 0]
    assert kept.eq(out[:, 27:, 2]).all()  # a plane is kept or dropped whole
    assert 0.45 < kept.mean() < 0.55  # 71,200 draws at p 0.5
    assert not kept.eq(kept[0]).all()  # one draw per sample, not one per batch
    again = drop_planes(planes, {"opponents": 0.0, "wall": 0.5}, groups, torch.Generator().manual_seed(0))
    assert torch.equal(out, again)  # seeded
