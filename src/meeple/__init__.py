"""meeple: a config-driven experiment platform for training game-playing agents."""

__version__ = "0.1.0"
