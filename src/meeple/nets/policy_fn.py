"""A trained actor as a *policy fn*: ``fn(obs [N, ...], mask [N, A] bool) -> actions [N] int64``.

Frozen networks that sit at a table (duplicate evaluation, opponent seats, the league's pool)
are called in batches of pending decisions, without TensorDicts or the global RNG. An actor
that also reads privileged planes (an in_key besides ``observation`` and ``action_mask``, e.g.
phase 2's oracle teacher) becomes a fn with ``fn.oracle = True``, called ``fn(obs, mask, planes)``.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from tensordict import TensorDict
from torchrl.envs.utils import ExplorationType, set_exploration_type

from meeple.nets.actor_critic import MASK_KEY, OBS_KEY

PolicyFn = Callable[..., torch.Tensor]


def _device(actor: torch.nn.Module, device: str | torch.device | None) -> torch.device:
    if device is not None:
        return torch.device(device)
    param = next(iter(actor.parameters()), None)
    return param.device if param is not None else torch.device("cpu")


def _privileged_key(actor: torch.nn.Module) -> str | None:
    extra = [k for k in getattr(actor, "in_keys", ()) if k not in (OBS_KEY, MASK_KEY)]
    if len(extra) > 1:
        raise ValueError(f"a policy fn reads at most one input besides {OBS_KEY!r} and {MASK_KEY!r}; "
                         f"this actor reads {list(getattr(actor, 'in_keys', ()))}")
    return extra[0] if extra else None


def _as_policy_fn(actor: torch.nn.Module, device: torch.device, choose: Callable, *, eval_mode: bool = True) -> PolicyFn:
    """``choose(masked_logits [N, A] on the CPU) -> actions``, around the actor's forward
    (``eval_mode``: a frozen network is put in eval mode; a learner's is left as it is)."""
    if eval_mode:
        actor.eval()
    key = _privileged_key(actor)

    @torch.no_grad()
    def forward(obs: torch.Tensor, mask: torch.Tensor, planes: torch.Tensor | None) -> torch.Tensor:
        inputs = {OBS_KEY: obs.to(device), MASK_KEY: mask.to(device)}
        if key is not None:
            inputs[key] = planes.to(device)
        with set_exploration_type(ExplorationType.DETERMINISTIC):  # no draw from the global RNG
            td = actor(TensorDict(inputs, batch_size=[len(obs)]))
        if "logits" not in td.keys():
            return td["action"].cpu()
        return choose(td["logits"].float().cpu().masked_fill(~mask.cpu(), float("-inf")))

    if key is not None:
        def act_privileged(obs: torch.Tensor, mask: torch.Tensor, planes: torch.Tensor) -> torch.Tensor:
            return forward(obs, mask, planes)

        act_privileged.oracle = True  # type: ignore[attr-defined]
        return act_privileged

    def act(obs: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return forward(obs, mask, None)

    return act


def greedy_policy(actor: torch.nn.Module, *, device: str | torch.device | None = None) -> PolicyFn:
    """The legal action with the highest logit."""
    return _as_policy_fn(actor, _device(actor, device), lambda logits: logits.argmax(-1))


def sampled_policy(actor: torch.nn.Module, *, seed: int = 0, temperature: float = 1.0,
                   device: str | torch.device | None = None) -> PolicyFn:
    """A draw from softmax(masked logits / temperature), from the fn's own CPU generator seeded
    by ``seed``: reproducible, and the global RNG (the learner's sampling) is left alone."""
    if not temperature > 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    gen = torch.Generator().manual_seed(seed)
    return _as_policy_fn(actor, _device(actor, device), lambda logits: torch.multinomial(
        (logits / temperature).softmax(-1), 1, generator=gen).squeeze(-1))


def logits_fn(actor: torch.nn.Module, *, device: str | torch.device | None = None) -> PolicyFn:
    """``fn(obs, mask) -> masked logits [N, A]`` (illegal actions at -inf, on the CPU), without
    gradients and without changing the actor's train/eval mode: the learner's own actor, read
    by an env that plays ahead with it (e.g. branched rollouts)."""
    return _as_policy_fn(actor, _device(actor, device), lambda logits: logits, eval_mode=False)


def random_policy(seed: int = 0) -> PolicyFn:
    """A uniformly random legal action (a baseline; its own generator, seeded)."""
    gen = torch.Generator().manual_seed(seed)

    def act(obs: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return torch.multinomial(mask.float(), 1, generator=gen).squeeze(-1)

    return act
