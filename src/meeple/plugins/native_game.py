"""Shared parts of AlphaZero games whose self-play engine is a ``meeple_native`` ``SelfPlay`` class.

Torch-free: config validation loads a game's module to check ``phase.selfplay``.
"""

from __future__ import annotations

from typing import Any, ClassVar

SET_BY_PHASE = frozenset({"seed", "planes_buffers"})  # the AlphaZero data module passes these


def keyword_options(engine: type) -> frozenset[str]:
    """The keyword options of a nanobind ``engine`` class that a config may set, read from its
    signature line: ``__init__(self, evaluator, *, a: int = 1, ...)``."""
    first = (engine.__init__.__doc__ or "").split("\n", 1)[0]
    if "*," not in first:
        raise TypeError(f"{engine.__name__}.__init__ has no keyword-only signature line: {first!r}")
    names = {part.split(":")[0].strip() for part in first[first.index("*,") + 2 : first.rindex(")")].split(",")}
    return frozenset(names - SET_BY_PHASE)


class NativeSelfPlayGame:
    """Base of a game plugin (``meeple.plugins.spec.AlphaZeroGame``) whose ``engine`` is a native
    ``SelfPlay`` class: ``selfplay_options`` and ``selfplay_engine`` follow from it, and the gate's
    ``mcts_player`` from ``player`` (the arena's search player, e.g. a
    ``meeple.plugins.arena.NativeMCTSPlayer``); the subclass adds the game's shapes,
    ``mirror_symmetric`` and the gate's ``play_match``."""

    engine: ClassVar[type]
    player: ClassVar[type]
    selfplay_options: ClassVar[frozenset[str]]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "engine" in cls.__dict__:
            cls.selfplay_options = keyword_options(cls.engine)

    def selfplay_engine(self, evaluator: Any, *, seed: int, planes_buffers: Any, **options: Any) -> Any:
        return self.engine(evaluator, seed=seed, planes_buffers=planes_buffers, **options)

    def mcts_player(self, evaluator: Any, *, num_simulations: int, leaves_in_flight: int, seed: int) -> Any:
        return self.player(evaluator, num_simulations=num_simulations, leaves_in_flight=leaves_in_flight,
                           seed=seed)
