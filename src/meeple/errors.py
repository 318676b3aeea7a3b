"""Errors a user can act on: each message names what is wrong and what is accepted."""


class MeepleError(Exception):
    """Base class for errors meeple reports to users without a traceback."""


class ConfigError(MeepleError, ValueError):
    """A config value is missing, mistyped, unknown or impossible."""


class PluginNotFoundError(ConfigError, LookupError):
    """An env backend named in the config is not installed."""


class GateFailed(MeepleError):
    """A stage's result did not pass the gate of the transition into the next stage."""


class PeerLost(MeepleError):
    """Another learner process of a multi-process run died: this one stopped too."""
