"""Actor and critic as TorchRL modules, built from env specs and ``conf/model``."""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from tensordict.nn import TensorDictModule
from torch import nn
from torch.distributions import Categorical
from torchrl.data import Composite, TensorSpec
from torchrl.modules import ActorValueOperator, MaskedCategorical, ProbabilisticActor, ValueOperator

from meeple.errors import ConfigError
from meeple.nets.mlp import mlp, mlp_trunk, orthogonal_linear

OBS_KEY = "observation"
MASK_KEY = "action_mask"


def observation_shape(observation_spec: Composite) -> tuple[int, ...]:
    """Shape of one ``observation`` (without the env's batch dims)."""
    if OBS_KEY not in observation_spec.keys():
        raise ConfigError(
            f"the model reads the {OBS_KEY!r} observation; the env provides {list(observation_spec.keys())}"
        )
    return tuple(observation_spec[OBS_KEY].shape[len(observation_spec.shape) :])


def num_actions(action_spec: TensorSpec) -> int:
    n = getattr(getattr(action_spec, "space", None), "n", None)
    if n is None:
        raise ConfigError(
            f"the actor needs a discrete action spec; the env has {type(action_spec).__name__}"
        )
    return int(n)


class Flatten(nn.Module):
    """Flattens the last ``ndim`` dims (one observation) whatever the batch dims in front."""

    def __init__(self, ndim: int) -> None:
        super().__init__()
        self.ndim = ndim

    def forward(self, x):
        return x.flatten(-self.ndim) if self.ndim > 1 else x


def _sizes(observation_spec: Composite, action_spec: TensorSpec) -> tuple[int, int, int]:
    shape = observation_shape(observation_spec)
    return math.prod(shape), len(shape), num_actions(action_spec)


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
    n_obs, obs_dims, n_actions = _sizes(observation_spec, action_spec)
    hidden = list(hidden)
    flat = Flatten(obs_dims)
    if not shared:
        policy_net = TensorDictModule(
            nn.Sequential(flat, *mlp(n_obs, n_actions, hidden, activation, 0.01)),
            [OBS_KEY],
            ["logits"],
        )
        critic = ValueOperator(
            nn.Sequential(flat, *mlp(n_obs, 1, hidden, activation, 1.0)), in_keys=[OBS_KEY]
        )
        return categorical_actor(policy_net, observation_spec, action_spec), critic

    if not hidden:
        raise ConfigError("model.shared=true needs at least one hidden layer (model.hidden)")
    trunk = TensorDictModule(
        nn.Sequential(flat, *mlp_trunk(n_obs, hidden, activation)), [OBS_KEY], ["hidden"]
    )
    return shared_heads(trunk, hidden[-1], observation_spec, action_spec)


class TransformedLinear(nn.Linear):
    """A linear layer whose output gets ``addend(*inputs)`` added (a network's own extra logits,
    e.g. per-tile ones from a feature map), is divided by a fixed ``temperature`` and then goes
    through a parameter-free ``transform(out, *extra)`` (a game's fixed rule). The linear part's
    state dict is the plain layer's, so checkpoints of the plain layer load the same with a
    transform or a temperature; an addend adds its own keys under ``addend.``.

    The temperature is a setting of the model, not state: a checkpoint's config carries it. Below
    1 it sharpens the policy without moving its argmax (a cloned policy sampled at 1 plays far worse
    than greedily, docs/rl_diagnostics.md section p)."""

    def __init__(self, linear: nn.Linear, transform: nn.Module | None = None,
                 addend: nn.Module | None = None, addend_inputs: int = 0, temperature: float = 1.0) -> None:
        if not temperature > 0:
            raise ConfigError(f"model.policy_temperature={temperature}; accepted: a float > 0")
        super().__init__(linear.in_features, linear.out_features, bias=linear.bias is not None)
        self.load_state_dict(linear.state_dict())
        if transform is not None and (any(True for _ in transform.parameters()) or transform.state_dict()):
            raise ValueError("a logits transform must have no parameters and no persistent buffers")
        self.transform = transform
        self.addend = addend
        self.addend_inputs = addend_inputs if addend is not None else 0
        self.temperature = float(temperature)
        self.enabled = True  # False: no transform (see without_logits_transforms)

    def forward(self, x: torch.Tensor, *extra: torch.Tensor) -> torch.Tensor:
        out = super().forward(x)
        if self.addend is not None:
            out = out + self.addend(*extra[: self.addend_inputs])
        if self.temperature != 1.0:
            out = out / self.temperature
        extra = extra[self.addend_inputs :]
        return self.transform(out, *extra) if self.enabled and self.transform is not None else out


def without_logits_transforms(actor: nn.Module) -> int:
    """Turn off every :class:`TransformedLinear` of ``actor`` in place (the network alone, e.g. to
    play the policy a rule-wrapped stage started from); returns how many."""
    layers = [m for m in actor.modules() if isinstance(m, TransformedLinear)]
    for layer in layers:
        layer.enabled = False
    return len(layers)


class ValueLinear(nn.Linear):
    """The value layer: ``linear(hidden)``, plus ``addend(*extra)`` when given (a critic that also
    reads inputs the actor does not, e.g. privileged planes a trained policy never sees). With
    ``detach`` the layer trains on ``hidden`` without sending gradient back into the trunk. The
    linear part's state dict is the plain layer's, so a plain value head's checkpoint loads into
    it; an addend adds its own keys under ``addend.``."""

    def __init__(self, linear: nn.Linear, *, detach: bool = False, addend: nn.Module | None = None) -> None:
        super().__init__(linear.in_features, linear.out_features, bias=linear.bias is not None)
        self.load_state_dict(linear.state_dict())  # before the addend: its keys are its own
        self.detach = detach
        self.addend = addend

    def forward(self, x: torch.Tensor, *extra: torch.Tensor) -> torch.Tensor:
        out = super().forward(x.detach() if self.detach else x)
        return out + self.addend(*extra) if self.addend is not None else out


def shared_heads(
    trunk: TensorDictModule, width: int, observation_spec: Composite, action_spec: TensorSpec,
    logits_transform: nn.Module | None = None, transform_keys: Sequence[str] = (),
    logits_addend: nn.Module | None = None, addend_keys: Sequence[str] = (),
    detach_critic: bool = False, value_addend: nn.Module | None = None, value_keys: Sequence[str] = (),
    temperature: float = 1.0,
) -> tuple[ProbabilisticActor, TensorDictModule]:
    """Policy and value heads on one trunk that writes ``hidden`` (TorchRL's ActorValueOperator).

    ``logits_addend(*addend_keys' values)`` is added to the policy layer's logits (more logits
    the network computes from other trunk outputs); ``logits_transform(logits, *transform_keys'
    values)`` runs after that, before the distribution: a game's fixed rule over the logits
    (e.g. a mask that privileged planes decide), seen by every consumer of the actor (rollouts, losses,
    policy fns, a distillation teacher). ``detach_critic``: the value head learns on the trunk's
    features but its loss does not move the trunk (only the policy's terms do).
    ``value_addend(*value_keys' values)`` is added to the value (:class:`ValueLinear`): the critic
    reads those keys, the actor does not. ``temperature``: the policy is softmax(logits / T)
    (:class:`TransformedLinear`)."""
    linear = orthogonal_linear(width, num_actions(action_spec), 0.01)
    if logits_transform is not None or logits_addend is not None or temperature != 1.0:
        linear = TransformedLinear(linear, logits_transform, logits_addend, len(addend_keys), temperature)
    policy_head = TensorDictModule(linear, ["hidden", *addend_keys, *transform_keys], ["logits"])
    value = orthogonal_linear(width, 1, 1.0)
    if detach_critic or value_addend is not None:
        value = ValueLinear(value, detach=detach_critic, addend=value_addend)
    value_head = ValueOperator(value, in_keys=["hidden", *value_keys])
    operator = ActorValueOperator(
        trunk, categorical_actor(policy_head, observation_spec, action_spec), value_head
    )
    return operator.get_policy_operator(), operator.get_value_operator()


def categorical_actor(
    logits_module: TensorDictModule, observation_spec: Composite, action_spec: TensorSpec
) -> ProbabilisticActor:
    """A categorical policy over ``logits``; masked by ``action_mask`` when the env provides one,
    so illegal actions are never sampled and take no probability in the loss."""
    if MASK_KEY in observation_spec.keys():
        in_keys, dist = {"logits": "logits", "mask": MASK_KEY}, MaskedCategorical
    else:
        in_keys, dist = ["logits"], Categorical
    return ProbabilisticActor(
        logits_module,
        in_keys=in_keys,
        distribution_class=dist,
        spec=action_spec,
        return_log_prob=True,
    )
