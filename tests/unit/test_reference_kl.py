"""phase.reference_kl: the anchor's weight per rollout, annealed or constant, and its config check."""

from types import SimpleNamespace

import pytest

from meeple.cli.train import build_run
from meeple.errors import ConfigError
from meeple.phases.ppo.module import PPOModule


def weight(anneal_fraction, epoch, epochs=100, coef=0.2):
    module = SimpleNamespace(
        reference_kl_coef=coef,
        reference_kl_anneal_fraction=anneal_fraction,
        current_epoch=epoch,
        trainer=SimpleNamespace(max_epochs=epochs),
    )
    return PPOModule.reference_kl_weight(module)


def test_annealed_anchor_falls_to_zero_over_its_fraction():
    assert weight(0.5, 0) == pytest.approx(0.2)
    assert weight(0.5, 25) == pytest.approx(0.1)
    assert weight(0.5, 50) == 0.0 and weight(0.5, 99) == 0.0


def test_null_fraction_keeps_the_anchor_at_its_coefficient():
    assert [weight(None, e) for e in (0, 50, 99)] == [0.2, 0.2, 0.2]


@pytest.mark.parametrize("value, ok", [("null", True), ("1.0", True), ("0", False), ("1.5", False)])
def test_anneal_fraction_is_checked(compose, value, ok):
    cfg = compose([f"phase.reference_kl.anneal_fraction={value}"])
    if ok:
        build_run(cfg, check_hardware=False)
        return
    with pytest.raises(
        ConfigError,
        match=r"phase.reference_kl.anneal_fraction=.*accepted: a float in \(0, 1\], or null",
    ):
        build_run(cfg, check_hardware=False)
