"""What the oracle planes say for certain: which discards deal in (phase 2's teacher,
docs/mahjong_phase2.md).

An opponent can ron a discarded kind when the kind is among its winning kinds (oracle plane
9 * (i - 1) + 6) and it is not furiten (plane 9 * (i - 1) + 7). Yaku are not checked: a wait
without a yaku still counts, so the set errs on the side of danger (the engine-checked test in
plugins/mahjong/tests/test_teacher.py: no ron-able discard is ever missed).

- :class:`OracleSafetyMask`: the teacher network's last policy layer (``model.oracle_safety``):
  the dealing actions get no probability while another action is legal. It reads the oracle
  planes like the stem, so when distillation drops the opponent planes it fades with them.
- :func:`safe_policy`: the same rule around any policy fn (``duplicate --safe-challenger``).
"""

from __future__ import annotations

import torch
from torch import nn

from .specs import NUM_ACTIONS, TRUTH_PLANES, WIDTH, PolicyFn, call_policy

OPPONENT_PLANES = 9  # oracle planes per opponent: 9 * (i - 1) + j
assert 3 * OPPONENT_PLANES == TRUTH_PLANES  # an env's `oracle_truth` holds all the planes read here
WAITS, FURITEN = 6, 7  # j: its winning kinds (3n+1 tiles, tenpai); it is furiten (scalar plane)
DISCARD_CLASSES = 37  # 0-33 plain kinds, 34-36 the red 5m/5p/5s
RIICHI_OFFSET = 37  # 37 + class: riichi declared with that discard
RED_FIVE_KINDS = (4, 13, 22)
# A blocked action's logit: this far below the lowest legal safe one (e^-10 relative to each).
# Finite on purpose: a student distilled by KL(student || teacher) cannot see the oracle and keeps
# some mass there; a -inf teacher would make that KL infinite instead of a strong push.
BLOCK_MARGIN = 10.0


def discard_kinds() -> torch.Tensor:
    """int64[155]: the kind each discard (and riichi-with-discard) action gives away, -1 else."""
    kind = torch.full((NUM_ACTIONS,), -1, dtype=torch.int64)
    classes = torch.cat([torch.arange(WIDTH), torch.tensor(RED_FIVE_KINDS)])
    kind[:DISCARD_CLASSES] = classes
    kind[RIICHI_OFFSET : RIICHI_OFFSET + DISCARD_CLASSES] = classes
    return kind


def ron_kinds_by_opponent(oracle: torch.Tensor) -> torch.Tensor:
    """bool (..., 3, 34): kinds opponent i (relative seat i + 1) could ron now."""
    waits = torch.stack([oracle[..., OPPONENT_PLANES * i + WAITS, :] for i in range(3)], -2) > 0.5
    furiten = torch.stack([oracle[..., OPPONENT_PLANES * i + FURITEN, 0] for i in range(3)], -1) > 0.5
    return waits & ~furiten.unsqueeze(-1)


def ron_kinds(oracle: torch.Tensor) -> torch.Tensor:
    """bool (..., 34): kinds some opponent could ron now."""
    return ron_kinds_by_opponent(oracle).any(-2)


def dealing_actions(oracle: torch.Tensor, mask: torch.Tensor, kinds: torch.Tensor) -> torch.Tensor:
    """bool (..., 155): the legal actions that discard a kind in :func:`ron_kinds`."""
    danger = ron_kinds(oracle)
    by_action = torch.gather(danger, -1, kinds.clamp_min(0).expand(*danger.shape[:-1], -1))
    return by_action & (kinds >= 0) & mask.bool()


def avoidable(dealing: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """bool (..., 155): the dealing actions of the rows where some legal action does not deal in."""
    return dealing & (mask.bool() & ~dealing).any(-1, keepdim=True)


def blocked_actions(oracle: torch.Tensor, mask: torch.Tensor, kinds: torch.Tensor) -> torch.Tensor:
    """bool (..., 155): what the safety rule blocks: the avoidable dealing actions."""
    return avoidable(dealing_actions(oracle, mask, kinds), mask)


class OracleSafetyMask(nn.Module):
    """``(logits, oracle, action_mask) -> logits`` with the avoidable dealing actions blocked:
    at most :data:`BLOCK_MARGIN` below the lowest legal safe logit, so greedy play never picks
    them. No parameters: a checkpoint loads the same with or without it."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("kinds", discard_kinds(), persistent=False)

    def forward(self, logits: torch.Tensor, oracle: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        mask = mask.bool()
        blocked = blocked_actions(oracle, mask, self.kinds)
        floor = logits.masked_fill(~mask | blocked, torch.inf).amin(-1, keepdim=True)
        return torch.where(blocked, torch.minimum(logits, floor - BLOCK_MARGIN), logits)


def safe_policy(policy: PolicyFn) -> PolicyFn:
    """``policy`` with the avoidable dealing actions masked out (an oracle policy fn)."""
    kinds = discard_kinds()

    def act(obs: torch.Tensor, mask: torch.Tensor, oracle: torch.Tensor) -> torch.Tensor:
        legal = mask.bool()
        return call_policy(policy, obs, legal & ~blocked_actions(oracle, legal, kinds), oracle,
                           what="the safe policy's network")

    act.oracle = True  # type: ignore[attr-defined]
    return act
