"""The replay viewer: a game's played steps as one self-contained HTML page (docs/viewer.md).

``replay`` (the data, torch-free), ``renderers`` (each game's drawing code, entry points
``meeple.viewers``), ``page`` (the HTML), ``artifacts`` (pages in the run directory and MLflow).
"""

from meeple.viewer.replay import Choice, Decision, Replay, Step

__all__ = ["Choice", "Decision", "Replay", "Step"]
