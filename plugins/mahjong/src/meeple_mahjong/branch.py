"""Action values from branched rollouts with common random numbers (``env.branch``).

PPO's advantage of a mahjong decision is the return of one game minus a critic's guess, and
most of that return is the wall: who draws what decides a hand far more than one discard does
(docs/rl_diagnostics.md, sections e-h: 0.6% of a public policy's decisions carry a signal the
size of the advantage's noise). A simulator that can copy a table can ask the question directly.
At a learner decision, `BranchValues` copies the table once per candidate action
(``BatchSim.copy_tables``), plays the candidate in its copy and the rest of the hand with the
learner's current policy and the table's own bots, and sums the learner's rewards up to the
hand's end. The copies share everything that is luck:

- the walls and every bot's random stream (they are copied with the table);
- the learner's own sampling: at the j-th decision after the branch every copy of one decision
  draws with the same uniform number (inverse-CDF sampling), so two copies that reach the same
  state play the same action.

So where the candidate does not matter, as in most decisions, the copies play the same hand and
their values differ by exactly 0; where it does (a deal-in, a win given up), the difference is
the effect of that one choice on that wall. Each value is an unbiased sample of the public
policy's action value: the copies start from the real hidden state, which is a draw from its
true distribution given what the learner has seen, and the learner's policy in them reads only
the public planes. (The "vine" estimator of Schulman et al.'s TRPO paper, with a hand as the
horizon.) `meeple_mahjong.branch_ppo` trains on these values.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from typing import Any

import torch

from meeple.errors import ConfigError
from meeple_native import mahjong as _mj

from .specs import ACTION_KINDS, NUM_ACTIONS, ORACLE_PLANES, PLANES, WIDTH, PolicyFn, is_oracle


@dataclass(frozen=True)
class BranchOptions:
    """``env.branch``: how often and how widely a decision is branched.

    ``prob``: the chance that a learner decision with at least two legal actions is branched;
    ``candidates``: how many actions are tried there (the policy's most likely, at least 2);
    ``tables``: copies played at once (one simulator of that many tables, reused);
    ``max_steps``: learner steps after which a copy stops (a hand has at most ~25);
    ``kinds``: null (any decision), or only decisions that offer one of these kinds of action
    (keys of ``specs.ACTION_KINDS``, e.g. [riichi, call]: where the signal is denser, and where a
    rollout that always declares riichi never sees the dama branch); ``under_riichi``: only
    decisions taken while an opponent has declared riichi (with ``kinds``, both must hold), where a
    discard can deal in to a hand that is surely ready; ``continuation``: how the learner plays a
    copy after its candidate, ``sample`` (its policy, with the copies' common draws: the value of
    the policy the rollouts sample) or ``greedy`` (its argmax: the value of the policy every
    evaluation plays, without the learner's own sampling noise); ``redeals``: each candidate is
    played on this many copies whose unseen tiles (the undrawn wall, rinshan, unrevealed dora and
    ura indicators; ``Game.redeal_wall``) are shuffled anew, the same shuffle for every candidate
    of one re-deal, and its value is their mean (1: the real wall alone). The other seats' hands
    stay as dealt, so the mean is still an unbiased sample of the action's value; what it averages
    away is the luck of the draws after the decision. Not with a policy that reads the oracle
    planes (they show the wall)."""

    CONTINUATIONS = ("sample", "greedy")

    prob: float = 0.1
    candidates: int = 4
    tables: int = 256
    max_steps: int = 64
    kinds: tuple[str, ...] | None = None
    under_riichi: bool = False
    continuation: str = "sample"
    redeals: int = 1

    @classmethod
    def parse(cls, node: Any) -> BranchOptions:
        accepted = ("a mapping with prob (0, 1], candidates >= 2, tables >= candidates, max_steps >= 1, "
                    f"kinds null or a non-empty list of {list(ACTION_KINDS)}, under_riichi true/false, "
                    f"continuation one of {list(cls.CONTINUATIONS)}, redeals >= 1 with tables >= candidates x redeals")
        if not isinstance(node, dict) and not hasattr(node, "items"):
            raise ConfigError(f"env.branch={node!r}; accepted: null (off) or {accepted}")
        opts = dict(node.items())
        unknown = sorted(set(opts) - {f.name for f in fields(cls)})
        if unknown:
            raise ConfigError(f"env.branch has unknown keys {unknown}; accepted: {accepted}")
        kinds = opts.get("kinds")
        if kinds is not None:
            kinds = tuple(kinds) if isinstance(kinds, Sequence) and not isinstance(kinds, str) else (kinds,)
            if not kinds or any(k not in ACTION_KINDS for k in kinds):
                raise ConfigError(f"env.branch.kinds={opts['kinds']!r}; accepted: {accepted}")
            opts["kinds"] = kinds
        o = cls(**opts)
        if (not 0 < o.prob <= 1 or o.candidates < 2 or o.tables < o.candidates or o.max_steps < 1
                or o.continuation not in cls.CONTINUATIONS or not isinstance(o.under_riichi, bool)
                or not isinstance(o.redeals, int) or o.redeals < 1 or o.tables < o.candidates * o.redeals):
            raise ConfigError(f"env.branch={opts}; accepted: {accepted}")
        return o


def crn_sample(logits: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """Inverse-CDF draws from softmax(logits) (rows; -inf = illegal) with the uniforms ``u``:
    rows given the same logits and the same u draw the same action."""
    cdf = logits.softmax(-1).cumsum(-1)
    pick = torch.searchsorted(cdf, (u * cdf[:, -1]).unsqueeze(-1), right=True).squeeze(-1)
    # a rounding past the last legal action falls back to the most likely one
    legal = torch.isfinite(logits).gather(-1, pick.clamp_max(logits.shape[-1] - 1).unsqueeze(-1)).squeeze(-1)
    return torch.where(legal & (pick < logits.shape[-1]), pick, logits.argmax(-1))


def top_candidates(logits: torch.Tensor, k: int) -> torch.Tensor:
    """[N, k] action indices: each row's k most likely legal actions, -1 where fewer are legal."""
    k = min(k, logits.shape[-1])
    values, idx = logits.topk(k, dim=-1)
    return idx.masked_fill(~torch.isfinite(values), -1)


class BranchValues:
    """Plays branches of decisions of a source ``BatchSim`` (see the module doc).

    ``sim_args``: the source simulator's ``learner_seats``, ``bots``, ``score_scale`` and
    ``rank_reward`` (copies need the same); ``rules``: its ``Game`` of rule options."""

    def __init__(self, options: BranchOptions, rules: Any, sim_args: dict[str, Any], *, seed: int = 0) -> None:
        self.options = options
        self.L = len(sim_args["learner_seats"])
        self.sim = _mj.BatchSim(options.tables, rules, **sim_args)
        n = self.sim.num_slots
        self.buf = {
            "obs": torch.empty(n, PLANES, WIDTH),
            "mask": torch.empty(n, NUM_ACTIONS, dtype=torch.uint8),
            "active": torch.empty(n, dtype=torch.uint8),
            "reward": torch.empty(n),
            "done": torch.empty(n, dtype=torch.uint8),
        }
        self.oracle: torch.Tensor | None = None
        self.gen = torch.Generator().manual_seed(seed)
        self.policy: PolicyFn | None = None
        self.copies = 0  # branches played
        self.truncated = 0  # ... of which reached max_steps before the hand ended
        self.forwards = 0  # policy calls (choosing candidates and playing branches)

    def set_policy(self, fn: PolicyFn) -> None:
        """``fn(obs, mask[, oracle]) -> masked logits`` (meeple.nets.policy_fn.logits_fn)."""
        if is_oracle(fn) and self.options.redeals > 1:
            raise ConfigError("env.branch.redeals > 1 with a policy that reads the oracle planes, which show the "
                              "wall a re-deal shuffles; accepted: redeals 1 for an oracle policy")  # fmt: skip
        self.policy = fn
        if is_oracle(fn) and self.oracle is None:
            self.oracle = torch.empty(self.sim.num_slots, ORACLE_PLANES, WIDTH)

    def _out(self) -> dict[str, Any]:
        out = {k: v.numpy() for k, v in self.buf.items()}
        if self.oracle is not None:
            out["oracle"] = self.oracle.numpy()
        return out

    def logits(self, obs: torch.Tensor, mask: torch.Tensor, oracle: torch.Tensor | None = None) -> torch.Tensor:
        """The policy's masked logits on these rows (with their oracle planes if it reads them)."""
        if self.policy is None:
            raise RuntimeError("env.branch: no policy set (MahjongEnv.set_branch_policy) before the first decision")
        self.forwards += 1
        return self.policy(obs, mask, oracle) if is_oracle(self.policy) else self.policy(obs, mask)

    def _logits(self, rows: torch.Tensor) -> torch.Tensor:
        planes = self.oracle[rows] if self.oracle is not None else None
        return self.logits(self.buf["obs"][rows], self.buf["mask"][rows].bool(), planes)

    def values(self, source: Any, tables: torch.Tensor, seats: torch.Tensor,
               candidates: torch.Tensor) -> torch.Tensor:  # fmt: skip
        """[N, K] sum of the learner's rewards from decision n with action candidates[n, k] to
        the end of that hand (nan where candidates[n, k] < 0). Decision n is the pending one of
        learner column ``seats[n]`` at ``source``'s table ``tables[n]``."""
        N, K = candidates.shape
        out = torch.full((N, K), float("nan"))
        per_call = max(self.options.tables // (K * self.options.redeals), 1)
        for start in range(0, N, per_call):
            sl = slice(start, min(start + per_call, N))
            out[sl] = self._play(source, tables[sl], seats[sl], candidates[sl])
        return out

    def _play(self, source: Any, tables: torch.Tensor, seats: torch.Tensor, cand: torch.Tensor) -> torch.Tensor:
        R = self.options.redeals
        if R > 1:  # decision i's re-deal r is row i * R + r below; its value the mean over r
            tables, seats, cand = (x.repeat_interleave(R, 0) for x in (tables, seats, cand))
        n, K = cand.shape
        T, L = self.options.tables, self.L
        used = cand.reshape(-1) >= 0
        src = torch.full((T,), -1, dtype=torch.int32)
        src[: n * K] = torch.where(used, tables.repeat_interleave(K).to(torch.int32), -1)
        out = self._out()
        self.sim.copy_tables(source, src.numpy(), **out)
        if R > 1:  # one shuffle per re-deal, shared by its K candidates (their common random numbers)
            seeds = torch.zeros(T, dtype=torch.int64)
            seeds[: n * K] = torch.randint(0, 2**62, (n,), generator=self.gen).repeat_interleave(K)
            self.sim.redeal((src >= 0).to(torch.uint8).numpy(), seeds.numpy().view("uint64"))
        b = torch.arange(n * K)
        slot = b * L + seats.repeat_interleave(K)  # the branched learner column of each copy
        group = torch.arange(n).repeat_interleave(K)  # copies of one decision share their draws
        hands = torch.tensor(self.sim.hands_played()[: n * K])
        value = torch.zeros(n * K)
        live = used.clone()
        greedy = self.options.continuation == "greedy"
        first = True
        for _ in range(self.options.max_steps + 1):
            if not live.any():
                break
            active = self.buf["active"].view(torch.bool)
            go_tables = torch.zeros(T, dtype=torch.bool)
            go_tables[: n * K] = live
            rows = torch.nonzero(active & go_tables.repeat_interleave(L)).squeeze(-1)
            actions = torch.full((T * L,), _mj.PASS_ACTION, dtype=torch.int64)
            if len(rows):
                logits = self._logits(rows)
                if greedy:
                    actions[rows] = logits.argmax(-1)
                else:
                    u = torch.rand(n, L, generator=self.gen)  # one draw per decision and column
                    actions[rows] = crn_sample(logits, u[group[rows // L], rows % L])
            if first:  # the branch point: each copy plays its candidate
                actions[slot[used]] = cand.reshape(-1)[used]
                first = False
            self.sim.step(actions.numpy(), **out, tables=go_tables.to(torch.uint8).numpy())
            value += torch.where(live, self.buf["reward"][slot], 0.0)
            now = torch.tensor(self.sim.hands_played()[: n * K])
            live &= ~(self.buf["done"][slot].bool() | (now != hands))
        self.copies += int(used.sum())
        self.truncated += int(live.sum())
        return value.masked_fill(~used, float("nan")).view(n // R, R, K).mean(1)


def candidate_probs(logits: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """[N, A]: the policy of ``logits`` (masked or log-probabilities) renormalised over each row's
    candidates ``mask``, 0 elsewhere."""
    return logits.clamp_min(-1e9).masked_fill(~mask, float("-inf")).softmax(-1).nan_to_num(0.0)


def candidate_advantages(value: torch.Tensor, mask: torch.Tensor, prior: torch.Tensor) -> torch.Tensor:
    """[N, A]: each candidate's value less the candidates' mean under ``prior``, 0 elsewhere."""
    return (value - (prior * value).sum(-1, keepdim=True)).masked_fill(~mask, 0.0)


def branch_keys(
    values_fn: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor],
    logits: torch.Tensor,
    chosen: torch.Tensor,
    k: int,
) -> dict[str, torch.Tensor]:
    """The env's branch keys for decisions whose ``logits`` [N, A] (masked) were computed and
    of which ``chosen`` [N] bool are branched: ``branch_value`` [N, A] (each candidate's value,
    0 elsewhere), ``branch_mask`` [N, A] (the candidates) and ``branch_prior`` [N, A] (the
    policy's probabilities renormalised over the candidates: the behaviour policy of the
    all-action surrogate)."""
    N, A = logits.shape
    value = torch.zeros(N, A)
    mask = torch.zeros(N, A, dtype=torch.bool)
    prior = torch.zeros(N, A)
    rows = torch.nonzero(chosen).squeeze(-1)
    if len(rows):
        cand = top_candidates(logits[rows], k)
        q = values_fn(rows, cand)
        ok = cand >= 0
        r = rows.unsqueeze(-1).expand_as(cand)[ok]
        c = cand[ok]
        value[r, c] = q[ok]
        mask[r, c] = True
        prior[rows] = candidate_probs(logits[rows], mask[rows])
    return {"branch_value": value, "branch_mask": mask, "branch_prior": prior}
