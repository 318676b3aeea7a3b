"""What a model factory builds, as the phase registry checks it.

Free of torch imports: ``meeple.phases.registry`` reads the mark while validating a config.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

MODEL_KIND_ATTR = "meeple_model_kind"
ACTOR_CRITIC = "actor_critic"  # factory(observation_spec, action_spec, **model_cfg) -> (actor, critic)

F = TypeVar("F", bound=Callable)


def mark_actor_critic_factory(factory: F) -> F:
    """Declare that ``factory(observation_spec, action_spec, **model_cfg)`` returns ``(actor, critic)``
    like :func:`meeple.nets.actor_critic.build_actor_critic`, so the phases that take actor-critic
    models (PPO, BC) accept a plugin's factory without the core naming it."""
    setattr(factory, MODEL_KIND_ATTR, ACTOR_CRITIC)
    return factory
