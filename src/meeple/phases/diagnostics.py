"""Cheap checks of an on-policy update, measured on the data it trains on (docs/rl_diagnostics.md).

- :func:`explained_variance` of the critic on a rollout it has not trained on yet (the value
  targets GAE just computed): near 0 or negative means its advantages are mostly noise.
- :func:`gradient_split`: the norm of each loss term's gradient on each named group of
  parameters (e.g. the shared trunk, the policy head, the critic head, one slice of a stem), so
  one can see whether the term that must move a weight reaches it, and which term dominates
  the update that Adam normalises per parameter.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import torch

# A parameter and the part of its gradient that belongs to a group (None: all of it).
Member = tuple[torch.nn.Parameter, Callable[[torch.Tensor], torch.Tensor] | None]


def explained_variance(value: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """1 - Var(target - value) / Var(target): 1 is a perfect critic, 0 one that predicts the mean."""
    value, target = value.flatten().float(), target.flatten().float()
    return 1.0 - (target - value).var() / target.var().clamp_min(1e-12)


def split_actor_critic(actor: torch.nn.Module, critic: torch.nn.Module) -> dict[str, list[Member]]:
    """Groups ``shared`` (in both networks: a common trunk), ``policy_head`` and ``critic_head``."""
    a = {id(p): p for p in actor.parameters() if p.requires_grad}
    c = {id(p): p for p in critic.parameters() if p.requires_grad}
    return {
        "shared": [(p, None) for k, p in a.items() if k in c],
        "policy_head": [(p, None) for k, p in a.items() if k not in c],
        "critic_head": [(p, None) for k, p in c.items() if k not in a],
    }


def group_norms(groups: Mapping[str, Sequence[Member]], of: Callable[[torch.nn.Parameter], torch.Tensor | None]
                ) -> dict[str, torch.Tensor]:
    """The L2 norm of ``of(p)`` (a gradient, or the weight itself) over each group's members."""
    norms = {}
    for name, members in groups.items():
        total = torch.zeros(())  # summed on the parameters' device: no host sync per member
        for param, select in members:
            value = of(param)
            if value is not None:
                value = value if select is None else select(value)
                total = total.to(value.device) + value.detach().float().pow(2).sum()
        norms[name] = total.sqrt()
    return norms


def gradient_split(terms: Mapping[str, torch.Tensor], groups: Mapping[str, Sequence[Member]]
                   ) -> dict[str, torch.Tensor]:
    """``{f"{term}/{group}": ||d term / d group||}`` for every term that depends on the parameters.

    One extra backward pass per term (the graph is kept for the real backward that follows).
    """
    params = list({id(p): p for members in groups.values() for p, _ in members}.values())
    norms: dict[str, torch.Tensor] = {}
    for term, value in terms.items():
        if not (isinstance(value, torch.Tensor) and value.requires_grad):
            continue
        grads = torch.autograd.grad(value, params, retain_graph=True, allow_unused=True)
        by_id = {id(p): g for p, g in zip(params, grads, strict=True)}
        for group, norm in group_norms(groups, lambda p, grads=by_id: grads[id(p)]).items():
            norms[f"{term}/{group}"] = norm
    return norms
