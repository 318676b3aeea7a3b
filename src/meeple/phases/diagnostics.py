"""Cheap checks of an on-policy update, measured on the data it trains on (docs/rl_diagnostics.md).

- :func:`explained_variance` of the critic on a rollout it has not trained on yet (the value
  targets GAE just computed): near 0 or negative means its advantages are mostly noise.
- :func:`gradient_split`: the norm of each loss term's gradient on each named group of
  parameters (e.g. the shared trunk, the policy head, the critic head, one slice of a stem), so
  one can see whether the term that must move a weight reaches it, and which term dominates
  the update that Adam normalises per parameter.
- :func:`policy_drift`: how a run's checkpoints moved on fixed states, from the start and from
  each other at growing lags: whether what one update learns is still there many updates later
  (a signal that accumulates) or is overwritten by the next updates' noise (a short memory).
- :func:`gradient_agreement`: how well two disjoint halves of a batch agree on the gradient, at
  several sizes, and the batch at which a gradient's signal equals its noise (the "simple noise
  scale" of McCandlish et al., 2018, An Empirical Model of Large-Batch Training).
"""

from __future__ import annotations

import math
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


def kl_rows(log_p: torch.Tensor, log_q: torch.Tensor) -> torch.Tensor:
    """Per-row KL(p || q) = sum_a p(a) (log p(a) - log q(a)) of log-probabilities ``[N, A]``.

    Masked actions have probability 0 under both (-inf); they are clamped so that 0 * (-inf)
    never makes a NaN (nor a NaN gradient)."""
    log_p, log_q = log_p.clamp_min(-1e9), log_q.clamp_min(-1e9)
    return (log_p.exp() * (log_p - log_q)).sum(-1)


def _corr(x: torch.Tensor, y: torch.Tensor) -> float:
    x, y = x - x.mean(), y - y.mean()
    den = (x.pow(2).sum() * y.pow(2).sum()).sqrt()
    return float((x * y).sum() / den) if den > 0 else float("nan")


def policy_drift(log_probs: Sequence[torch.Tensor], start: torch.Tensor, lags: Sequence[int]
                 ) -> dict[str, list[float]]:
    """How a sequence of policies (checkpoints in training order) moved on fixed states.

    ``log_probs``: each checkpoint's log-probabilities ``[N, A]`` on the same N states (-inf on
    illegal actions), ``start`` the same for the policy they started from. Returns
    ``to_start``: KL(pi_t || pi_0) per checkpoint; for each lag k in ``lags`` (in checkpoints),
    ``lag_kl``: KL(pi_{t+k} || pi_t) and ``lag_corr``: the correlation of the changes from the
    start, corr(D_t, D_{t+k}) with D_t = log pi_t - log pi_0 on the legal actions, each the mean
    over the t that have a t+k (nan where none has); ``walk_corr``: the same mean for an unbiased
    random walk from the start, sqrt(t / (t + k)) with checkpoint t (from 1) t equal intervals in.

    Reading: changes that add up (a consistent signal) keep ``lag_corr`` near 1, above
    ``walk_corr``, and make ``lag_kl`` grow like k^2; steps that are noise alone follow
    ``walk_corr`` (a free random walk) or fall below it (a walk held near the start, by an anchor or
    by each update overwriting the last), and ``lag_kl`` grows like k or saturates.
    """
    legal = torch.isfinite(start)
    deltas = [(lp - start)[legal] for lp in log_probs]
    out: dict[str, list[float]] = {"to_start": [float(kl_rows(lp, start).mean()) for lp in log_probs],
                                   "lag_kl": [], "lag_corr": [], "walk_corr": []}  # fmt: skip
    for k in lags:
        pairs = range(len(log_probs) - k)
        kl = [float(kl_rows(log_probs[t + k], log_probs[t]).mean()) for t in pairs]
        corr = [_corr(deltas[t], deltas[t + k]) for t in pairs]
        out["lag_kl"].append(sum(kl) / len(kl) if kl else float("nan"))
        out["lag_corr"].append(sum(corr) / len(corr) if corr else float("nan"))
        walk = [math.sqrt((t + 1) / (t + 1 + k)) for t in pairs]
        out["walk_corr"].append(sum(walk) / len(walk) if walk else float("nan"))
    return out


def _halves(samples: int, n: int, groups: torch.Tensor | None,
            generator: torch.Generator | None) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
    """Two disjoint random n-sample index sets; with ``groups``, drawn from two disjoint random
    halves of the groups, so that no group has members on both sides."""
    if groups is None:
        if 2 * n > samples:
            raise ValueError(f"size {n}: two disjoint halves need {2 * n} samples, {samples} given")
        perm = torch.randperm(samples, generator=generator)
        return perm[:n], perm[n : 2 * n]
    ids = groups.unique()
    ids = ids[torch.randperm(len(ids), generator=generator)]
    sides = [torch.isin(groups, part).nonzero().squeeze(-1) for part in (ids[: len(ids) // 2], ids[len(ids) // 2 :])]
    if min(len(side) for side in sides) < n:
        raise ValueError(f"size {n}: a half of the groups holds only {min(len(s) for s in sides)} samples; "
                         "accepted: sizes up to about half the samples")  # fmt: skip
    return tuple(side[torch.randperm(len(side), generator=generator)[:n]] for side in sides)  # type: ignore[return-value]


def gradient_agreement(grad: Callable[[torch.Tensor], torch.Tensor], samples: int, sizes: Sequence[int],
                       repeats: int = 8, generator: torch.Generator | None = None,
                       on_progress: Callable[[int], None] | None = None,
                       groups: torch.Tensor | None = None) -> list[dict[str, float]]:  # fmt: skip
    """The cosine between the gradients of two disjoint random halves of ``samples`` samples.

    ``grad(indices)``: the flat gradient of the mean loss over those samples. For each size n in
    ``sizes`` (2n <= samples), ``repeats`` random pairs of disjoint n-sample sets give the mean
    cosine; with per-sample gradients of mean G and covariance S, it is n / (n + n0) for
    n0 = tr(S) / |G|^2, the batch whose signal equals its noise, which each size estimates as
    n (1 - cos) / cos (inf where the halves do not agree at all). Returns one dict per size:
    ``n``, ``cos``, ``cos_sd`` (over the repeats) and ``n0``. ``on_progress(pairs done)`` after
    each pair.

    ``groups`` (one id per sample): samples whose noise is shared (decisions of one game, which
    share its wall and its outcome) never sit on both sides. Without it such samples agree by
    their shared noise, and the cosine counts that as signal: n0 comes out too small.
    """
    out = []
    for n in sizes:
        cos = []
        for _ in range(repeats):
            ia, ib = _halves(samples, n, groups, generator)
            a, b = grad(ia), grad(ib)
            cos.append(float(torch.nn.functional.cosine_similarity(a, b, dim=0)))
            if on_progress is not None:
                on_progress(len(out) * repeats + len(cos))
        c = torch.tensor(cos)
        mean = float(c.mean())
        out.append({"n": n, "cos": mean, "cos_sd": float(c.std()) if repeats > 1 else 0.0,
                    "n0": n * (1 - mean) / mean if mean > 0 else float("inf")})  # fmt: skip
    return out
