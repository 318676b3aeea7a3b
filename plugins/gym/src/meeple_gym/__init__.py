"""Gymnasium env backend for meeple (entry point ``meeple.plugins: gym``)."""

from meeple_gym.env import GymBackend

backend = GymBackend()

__all__ = ["GymBackend", "backend"]
