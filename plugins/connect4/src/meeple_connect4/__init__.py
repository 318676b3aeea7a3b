"""Connect Four env backend for meeple (entry point ``meeple.plugins: connect4``)."""

from meeple_connect4.env import Connect4ArrayEnv, Connect4Backend

backend = Connect4Backend()

__all__ = ["Connect4ArrayEnv", "Connect4Backend", "backend"]
