"""What an ``env=mahjong`` policy reads and answers, without an env: the observation's shapes
(docs/mahjong_encoding.md), the TorchRL specs `MahjongEnv` declares, and the policy-function
contract every seat-playing module shares.

A *policy function* is ``fn(obs [N, 84, 34] float32, mask [N, 155] bool) -> actions [N] int64``;
one with ``fn.oracle = True`` (phase 2's teacher) is called ``fn(obs, mask, oracle [N, 205, 34])``
with the deciding seats' oracle planes too.

The lowest layer of the plugin besides the native engine: the env builds its specs here, and a
checkpoint's actor is rebuilt from them (`meeple_mahjong.policy`) without building an env.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch
from torchrl.data import Binary, Categorical, Composite, Unbounded

from meeple_native import mahjong as _mj

PLANES, WIDTH, ORACLE_PLANES = _mj.PUBLIC_PLANES, _mj.PLANE_WIDTH, _mj.ORACLE_PLANES
# The oracle's first planes, the three opponents' (meeple_mahjong.safety reads their waits): what
# an env with oracle dropout (env.oracle_keep < 1) still gives, unmasked, as `oracle_truth`.
TRUTH_PLANES = 27
SHOWN_KEY, TRUTH_KEY = "oracle_shown", "oracle_truth"  # what oracle dropout adds to the observation
NUM_ACTIONS = _mj.NUM_ACTIONS

PolicyFn = Callable[..., torch.Tensor]

# The action indices of each kind of choice (docs/mahjong_encoding.md): what the change probe and
# the focus module tell apart. Every index 0-154 is in exactly one kind.
ACTION_KINDS: dict[str, range] = {
    "discard": range(0, 37),   # a plain discard (34 kinds and the three red fives)
    "riichi": range(37, 74),   # riichi with a discard
    "call": range(74, 151),    # chi, pon, daiminkan, ankan, kakan
    "win": range(151, 153),    # tsumo, ron
    "pass": range(153, 154),   # decline every claim
    "other": range(154, 155),  # nine terminals
}


def rows_offering(action_mask: torch.Tensor, kinds: tuple[str, ...]) -> torch.Tensor:
    """[...] bool: the decisions whose legal actions (``action_mask`` [..., 155]) include one of
    ``kinds``' actions (keys of ACTION_KINDS)."""
    pick = torch.zeros(action_mask.shape[-1], dtype=torch.bool, device=action_mask.device)
    for kind in kinds:
        r = ACTION_KINDS[kind]
        pick[r.start : r.stop] = True
    return (action_mask.bool() & pick).any(-1)


# Public planes of relative seat i (0: the deciding seat): 8 + 14 * i + j (docs/mahjong_encoding.md).
SEAT_PLANE_BASE, SEAT_PLANES, RIICHI_FLAG = 8, 14, 11


def opponents_in_riichi(obs: torch.Tensor) -> torch.Tensor:
    """[N, 3] bool: whether opponents 1..3 (relative seats) have declared riichi, from the
    public planes ``obs`` [N, 84, 34]."""
    planes = [SEAT_PLANE_BASE + SEAT_PLANES * i + RIICHI_FLAG for i in (1, 2, 3)]
    return obs[:, planes, 0] > 0.5


def slots_per_table(env_cfg: Mapping[str, Any]) -> int:
    """An env's batch comes in whole tables: one slot per learner seat (one per table in a league)."""
    return 1 if env_cfg.get("league") else len(env_cfg.get("learner_seats", (0,)))


def observation_spec(n: int, *, oracle: bool, branch: bool = False, guide: bool = False,
                     oracle_dropout: bool = False, device: str | torch.device = "cpu") -> Composite:  # fmt: skip
    """The observation of ``n`` slots (with the ``oracle`` planes when the env gives them, the
    branched action values with ``env.branch`` (meeple_mahjong.branch) and the guide bot's choice
    with ``env.guide`` (meeple_mahjong.guide_ppo)); with ``oracle_dropout`` (``env.oracle_keep`` < 1)
    also whether each slot's oracle planes were shown and the opponents' planes as they are."""
    obs = {
        "observation": Unbounded((n, PLANES, WIDTH), dtype=torch.float32),
        "action_mask": Binary(n=NUM_ACTIONS, shape=(n, NUM_ACTIONS), dtype=torch.bool),
        "active": Binary(n=1, shape=(n, 1), dtype=torch.bool),
        "rank": Unbounded((n, 1), dtype=torch.int64),
        "score": Unbounded((n, 1), dtype=torch.int64),
        "seat": Unbounded((n, 1), dtype=torch.int64),
    }
    if oracle:
        obs["oracle"] = Unbounded((n, ORACLE_PLANES, WIDTH), dtype=torch.float32)
    if oracle_dropout:
        obs[SHOWN_KEY] = Binary(n=1, shape=(n, 1), dtype=torch.bool)
        obs[TRUTH_KEY] = Unbounded((n, TRUTH_PLANES, WIDTH), dtype=torch.float32)
    if branch:
        obs["branch_value"] = Unbounded((n, NUM_ACTIONS), dtype=torch.float32)
        obs["branch_mask"] = Binary(n=NUM_ACTIONS, shape=(n, NUM_ACTIONS), dtype=torch.bool)
        obs["branch_prior"] = Unbounded((n, NUM_ACTIONS), dtype=torch.float32)
    if guide:
        obs["guide_action"] = Unbounded((n,), dtype=torch.int64)
    return Composite(obs, shape=(n,), device=device)


def action_spec(n: int, *, device: str | torch.device = "cpu") -> Categorical:
    """One action index per slot."""
    return Categorical(NUM_ACTIONS, shape=(n,), dtype=torch.int64, device=device)


def is_oracle(fn: PolicyFn) -> bool:
    """Whether ``fn`` is an oracle policy (called with the deciding seats' oracle planes too)."""
    return bool(getattr(fn, "oracle", False))


def call_policy(fn: PolicyFn, obs: torch.Tensor, mask: torch.Tensor, oracle: torch.Tensor | None, *,
                what: str) -> torch.Tensor:
    """``fn``'s actions for these rows (with the oracle planes if it reads them), checked to be
    one index per row; ``what`` names the policy in the error (e.g. "policy 'a'")."""
    actions = fn(obs, mask, oracle) if is_oracle(fn) else fn(obs, mask)
    if not isinstance(actions, torch.Tensor) or actions.shape != (len(obs),):
        got = tuple(actions.shape) if isinstance(actions, torch.Tensor) else type(actions).__name__
        raise ValueError(
            f"{what} must return an int64 tensor of shape ({len(obs)},) (one action index per observation), "
            f"got {got}"
        )
    return actions.to(device="cpu", dtype=torch.int64)
