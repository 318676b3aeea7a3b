"""Samplers and pruners by name: each one gets only its own options, and a wrong one is named."""

from __future__ import annotations

import optuna
import pytest

from meeple.errors import ConfigError
from meeple.sweep.factories import make_pruner, make_sampler
from meeple.sweep.space import parse_search_space

SPACE = parse_search_space({"phase.lr": "interval(0.1, 0.3)"}, [])
# What the gym plugin's conf/hparams_search/ppo_cartpole.yaml holds: options for several pruners at once.
PRUNER_OPTIONS = {
    "median": {"n_startup_trials": 3, "n_warmup_steps": 20_000},
    "percentile": {"percentile": 25.0, "n_startup_trials": 3},
    "halving": {"min_resource": 20_000},
}


@pytest.mark.parametrize("name, cls", [
    ("median", optuna.pruners.MedianPruner),
    ("percentile", optuna.pruners.PercentilePruner),
    ("halving", optuna.pruners.SuccessiveHalvingPruner),
    ("hyperband", optuna.pruners.HyperbandPruner),
    ("none", optuna.pruners.NopPruner),
])
def test_each_pruner_gets_only_its_own_options(name, cls):
    assert type(make_pruner(name, PRUNER_OPTIONS)) is cls


def test_chosen_pruner_options_reach_optuna():
    pruner = make_pruner("median", PRUNER_OPTIONS)
    assert pruner._n_startup_trials == 3 and pruner._n_warmup_steps == 20_000


def test_an_option_of_another_pruner_is_refused_with_the_accepted_ones():
    with pytest.raises(ConfigError, match=r"pruner\.kwargs\.halving\.n_startup_trials is not an option of "
                                          r"SuccessiveHalvingPruner; accepted: min_resource, reduction_factor"):
        make_pruner("halving", {"halving": {"n_startup_trials": 3}})


def test_flat_options_are_refused_with_the_keyed_form():
    with pytest.raises(ConfigError, match=r"pruner\.kwargs is keyed by pruner name .*got n_startup_trials; "
                                          r"e\.g\. hydra\.sweeper\.pruner\.kwargs\.median\.n_startup_trials"):
        make_pruner("median", {"n_startup_trials": 3})


def test_a_missing_required_option_is_one_config_error():
    with pytest.raises(ConfigError, match=r"pruner\.kwargs\.threshold: .*lower"):
        make_pruner("threshold", {})


def test_sampler_options_belong_to_their_sampler():
    options = {"tpe": {"n_startup_trials": 4}, "gp": {"n_startup_trials": 2}}
    assert make_sampler("tpe", seed=0, kwargs=options, space=SPACE)._n_startup_trials == 4
    assert isinstance(make_sampler("random", seed=0, kwargs=options, space=SPACE), optuna.samplers.RandomSampler)
    with pytest.raises(ConfigError, match=r"sampler\.kwargs\.random\.n_startup_trials is not an option of "
                                          r"RandomSampler; accepted: none"):
        make_sampler("random", seed=0, kwargs={"random": {"n_startup_trials": 4}}, space=SPACE)
    with pytest.raises(ConfigError, match=r"sampler\.name=bogus is unknown; accepted: tpe, cmaes"):
        make_sampler("bogus", seed=0, kwargs=None, space=SPACE)
