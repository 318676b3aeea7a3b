"""Search spaces: each Hydra override form becomes the Optuna distribution it names."""

import pytest
from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

from meeple.errors import ConfigError
from meeple.sweep.space import (
    distribution_from_override,
    format_value,
    grid_of,
    parse_override,
    parse_search_space,
)


def dist(text):
    return distribution_from_override(parse_override(f"x={text}"))


@pytest.mark.parametrize(
    "text, expected",
    [
        ("interval(0.1, 0.3)", FloatDistribution(0.1, 0.3)),
        ("interval(1, 4)", FloatDistribution(1.0, 4.0)),  # Hydra's interval is always float
        ("tag(log, interval(1e-4, 1e-2))", FloatDistribution(1e-4, 1e-2, log=True)),
        ("int(interval(1, 8))", IntDistribution(1, 8)),
        ("tag(int, interval(1, 8))", IntDistribution(1, 8)),
        ("tag(log, int(interval(1, 64)))", IntDistribution(1, 64, log=True)),
        ("choice(64, 128, 256)", CategoricalDistribution([64, 128, 256])),
        ("choice(relu, tanh, true, 0.5)", CategoricalDistribution(["relu", "tanh", True, 0.5])),
        ("range(16, 65, step=16)", IntDistribution(16, 64, step=16)),  # stop excluded, like Python
        ("range(1, 5)", IntDistribution(1, 4)),
        ("range(0.1, 0.5, 0.1)", FloatDistribution(0.1, 0.4, step=0.1)),
    ],
)
def test_each_override_form_maps_to_its_distribution(text, expected):
    assert dist(text) == expected


def test_nested_params_are_flattened_to_dotted_keys():
    space = parse_search_space({"phase": {"lr": "interval(0.1, 0.2)"}, "phase.loss.clip_epsilon": "0.2"})
    assert space.distributions == {"phase.lr": FloatDistribution(0.1, 0.2)}
    assert space.fixed == ["phase.loss.clip_epsilon=0.2"]


def test_plain_values_are_fixed():
    assert dist("0.2") == "0.2"
    space = parse_search_space({"phase.lr": "1e-3", "phase.loss.clip_epsilon": "interval(0.1, 0.3)"})
    assert space.fixed == ["phase.lr=1e-3"]
    assert list(space.distributions) == ["phase.loss.clip_epsilon"]


def test_command_line_overrides_replace_config_entries_and_pass_through():
    params = {"phase.lr": "tag(log, interval(1e-4, 1e-2))", "phase.minibatch_size": "choice(128, 256)",
              "phase.ppo_epochs": None}
    arguments = ["hparams_search=ppo_cartpole", "debug=tiny", "phase.lr=1e-3", "phase.minibatch_size=choice(8,16)",
                 "+extra.key=interval(0, 1)"]
    space = parse_search_space(params, arguments)
    assert space.fixed == ["phase.lr=1e-3", "hparams_search=ppo_cartpole", "debug=tiny"]
    assert space.distributions == {
        "phase.minibatch_size": CategoricalDistribution([8, 16]),
        "extra.key": FloatDistribution(0.0, 1.0),
    }
    overrides = space.overrides({"phase.minibatch_size": 16, "extra.key": 0.25})
    assert overrides == ["phase.lr=1e-3", "hparams_search=ppo_cartpole", "debug=tiny",
                         "phase.minibatch_size=16", "+extra.key=0.25"]


@pytest.mark.parametrize("value", [0.000123, 3, True, False, None, "relu", "a b", "it's", "x=y", "1.0"])
def test_sampled_values_round_trip_through_hydra(value):
    override = parse_override(f"k={format_value(value)}")
    assert override.value() == value and type(override.value()) is type(value)


@pytest.mark.parametrize(
    "text, message",
    [
        ("tag(log, interval(0, 1))", "needs start > 0"),
        ("tag(fast, interval(0, 1))", "unknown tag"),
        ("interval(2, 1)", "start < end"),
        ("choice([1, 2], [3])", "choice values must be"),
        ("range(5, 1)", "is empty"),
    ],
)
def test_bad_entries_name_the_key_and_the_problem(text, message):
    with pytest.raises(ConfigError, match=message):
        parse_search_space({"phase.lr": text})


def test_grid_needs_discrete_parameters():
    space = parse_search_space({"a": "choice(1, 2)", "b": "range(0, 3)"})
    assert grid_of(space) == {"a": [1, 2], "b": [0, 1, 2]}
    with pytest.raises(ConfigError, match="sampler=grid"):
        grid_of(parse_search_space({"c": "interval(0, 1)"}))
