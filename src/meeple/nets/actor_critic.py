"""Actor and critic as TorchRL modules, built from env specs and ``conf/model``."""

from __future__ import annotations

from collections.abc import Sequence

from tensordict.nn import TensorDictModule
from torch.distributions import Categorical
from torchrl.data import Composite, TensorSpec
from torchrl.modules import ActorValueOperator, ProbabilisticActor, ValueOperator

from meeple.errors import ConfigError
from meeple.nets.mlp import mlp, mlp_trunk, orthogonal_linear

OBS_KEY = "observation"


def _sizes(observation_spec: Composite, action_spec: TensorSpec) -> tuple[int, int]:
    if OBS_KEY not in observation_spec.keys():
        raise ConfigError(
            f"the MLP model reads the {OBS_KEY!r} observation; the env provides {list(observation_spec.keys())}"
        )
    obs_shape = observation_spec[OBS_KEY].shape
    n_actions = getattr(getattr(action_spec, "space", None), "n", None)
    if n_actions is None:
        raise ConfigError(f"the MLP actor needs a discrete action spec; the env has {type(action_spec).__name__}")
    return int(obs_shape[-1]), int(n_actions)


def build_actor_critic(
    observation_spec: Composite,
    action_spec: TensorSpec,
    *,
    shared: bool,
    hidden: Sequence[int],
    activation: str,
) -> tuple[ProbabilisticActor, TensorDictModule]:
    """A categorical policy over ``logits`` and a state-value critic.

    ``shared=True`` puts one trunk under both heads (TorchRL's ActorValueOperator);
    otherwise actor and critic are separate networks.
    """
    n_obs, n_actions = _sizes(observation_spec, action_spec)
    hidden = list(hidden)
    if not shared:
        policy_net = TensorDictModule(mlp(n_obs, n_actions, hidden, activation, 0.01), [OBS_KEY], ["logits"])
        critic = ValueOperator(mlp(n_obs, 1, hidden, activation, 1.0), in_keys=[OBS_KEY])
        return _categorical_actor(policy_net, action_spec), critic

    if not hidden:
        raise ConfigError("model.shared=true needs at least one hidden layer (model.hidden)")
    trunk = TensorDictModule(mlp_trunk(n_obs, hidden, activation), [OBS_KEY], ["hidden"])
    policy_head = TensorDictModule(orthogonal_linear(hidden[-1], n_actions, 0.01), ["hidden"], ["logits"])
    value_head = ValueOperator(orthogonal_linear(hidden[-1], 1, 1.0), in_keys=["hidden"])
    operator = ActorValueOperator(trunk, _categorical_actor(policy_head, action_spec), value_head)
    return operator.get_policy_operator(), operator.get_value_operator()


def _categorical_actor(logits_module: TensorDictModule, action_spec: TensorSpec) -> ProbabilisticActor:
    return ProbabilisticActor(
        logits_module,
        in_keys=["logits"],
        distribution_class=Categorical,
        spec=action_spec,
        return_log_prob=True,
    )
