"""Connect Four for meeple: the env backend (entry point ``meeple.plugins: connect4``) and the
AlphaZero game (``meeple.games: connect4``, :mod:`meeple_connect4.game`)."""

from meeple_connect4.env import Connect4ArrayEnv, Connect4Backend

backend = Connect4Backend()

__all__ = ["Connect4ArrayEnv", "Connect4Backend", "backend"]
