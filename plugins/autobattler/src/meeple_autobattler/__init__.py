"""meeple plugin: the 8-player auto-battler served from Node, its batched combat, and self-play."""

from meeple_autobattler.backend import AutoBattlerBackend

backend = AutoBattlerBackend()

__all__ = ["AutoBattlerBackend", "backend"]
