"""A replay step's decision from a player's last search (``NativeMCTSPlayer.last_search``: the
native MCTS report with ``visits``, ``prior`` and ``root_value`` per action index)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from meeple.viewer.replay import Choice, Decision


def search_decision(player: Any, label: Callable[[int], str], top: int = 5,
                    played: int | None = None) -> Decision | None:
    """The ``top`` most visited actions of ``player``'s last search (ties: the higher prior
    first), each with the policy's prior and its visits, and the root value from the mover's
    side; the ``played`` action is listed too (a tie in visits the search broke its own way
    may leave it out of the top); None for a player that does not search (a solver, a random
    player)."""
    search = getattr(player, "last_search", None)
    if not search:
        return None
    visits, prior = np.asarray(search["visits"]), np.asarray(search["prior"], dtype=float)
    order = np.lexsort((-prior, -visits))  # last key first: most visits, then highest prior
    picked = [int(a) for a in order[:top] if visits[a] > 0 or prior[a] > 0]
    if played is not None and played not in picked:
        picked.append(int(played))
    value = float(search.get("root_value", math.nan))
    return Decision([Choice(label(a), float(prior[a]), int(visits[a])) for a in picked],
                    None if math.isnan(value) else value)
