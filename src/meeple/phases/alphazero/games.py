"""Native games AlphaZero can play: name -> (planes shape, number of actions).

Imported by config validation, so it loads only the native extension (no torch).
"""

from __future__ import annotations

from meeple_native import OBS_SHAPE, WIDTH

GAMES: dict[str, tuple[tuple[int, ...], int]] = {"connect4": (tuple(OBS_SHAPE), WIDTH)}
