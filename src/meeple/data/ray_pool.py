"""A fixed set of Ray actors that all answer one call per round, with a dead actor replaced.

Shared by the two things ``collector=ray`` runs in Ray actors: PPO's env collectors
(:mod:`meeple.data.ray_actors`) and AlphaZero's self-play engines
(:mod:`meeple.phases.alphazero.ray_selfplay`).

``address``: None starts a Ray instance in this process (stopped by :meth:`RayActorPool.shutdown`);
an address (``host:port``, or ``auto``) joins a running cluster (``ray start --head`` on one
machine, ``ray start --address=...`` on the others). An actor that dies during a round is
replaced with the arguments ``restart_args(index, restarts)`` gives and asked again (each actor
at most once per round); a replacement that dies too, or a death without ``restart_args``, is
:class:`~meeple.errors.PeerLost` naming the actor.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence
from typing import Any

from meeple.errors import ConfigError, PeerLost

log = logging.getLogger(__name__)


def import_ray():
    """Ray, or a ConfigError naming the extra that installs it."""
    try:
        import ray
    except ImportError:
        raise ConfigError("collector=ray needs Ray: pip install -e '.[ray]'; accepted otherwise: "
                          "collector=auto or sync (and multisync for PPO)") from None
    return ray


class ActorProcess:
    """Mixed into an actor class: what every pool actor answers besides its own work."""

    def pid(self) -> int:
        return os.getpid()


class RayActorPool:
    def __init__(self, actor_class: type, actor_args: Sequence[tuple], *, what: str, address: str | None = None,
                 cpus_per_actor: float = 1.0,
                 restart_args: Callable[[int, int], tuple] | None = None) -> None:
        """``actor_class(*actor_args[i])`` runs as actor i; ``what`` names the pool in messages
        ("collector=ray", ...); ``restart_args(i, n)``: the arguments of actor i's n-th replacement."""
        ray = import_ray()
        if not actor_args:
            raise ConfigError(f"{what} needs at least one Ray actor")
        self._ray = ray
        self.what = what
        self._owns_ray = not ray.is_initialized()
        if self._owns_ray:
            options = dict(include_dashboard=False, log_to_driver=False, configure_logging=False)
            if address:
                ray.init(address=address, **options)
            else:  # one logical CPU per actor even on a smaller machine (they mostly wait)
                ray.init(num_cpus=len(actor_args) * cpus_per_actor, **options)
        self.restart_args = restart_args
        self.restarts = 0
        self.actors = []
        try:
            self._remote_class = ray.remote(num_cpus=cpus_per_actor)(actor_class)
            self.actors = [self._remote_class.remote(*args) for args in actor_args]
        except BaseException:
            self.shutdown(close_method=None)  # a Ray instance started here is not left running
            raise
        log.info("%s: %d Ray actor(s) on %s", what, len(self.actors), address or "a Ray instance in this process")

    def __len__(self) -> int:
        return len(self.actors)

    def put(self, value: Any):
        """``value`` in Ray's object store once, for every actor's call to read."""
        return self._ray.put(value)

    def call(self, method: str, per_actor: Sequence[tuple]) -> list[Any]:
        """``actor_i.method(*per_actor[i])`` on every actor at once; the results in actor order."""
        refs = [getattr(actor, method).remote(*args) for actor, args in zip(self.actors, per_actor, strict=True)]
        results = []
        for index, ref in enumerate(refs):
            try:
                results.append(self._ray.get(ref))
            except self._ray.exceptions.RayActorError as err:
                results.append(self._replace_and_call(index, method, per_actor[index], err))
        return results

    def _replace_and_call(self, index: int, method: str, args: tuple, err: Exception) -> Any:
        why = str(err).splitlines()[0][:200]
        if self.restart_args is None:
            raise PeerLost(f"Ray actor {index} of {self.what} died ({why})") from None
        self.restarts += 1
        log.warning("Ray actor %d of %s died (%s); replacing it (restart %d)", index, self.what, why, self.restarts)
        self.actors[index] = self._remote_class.remote(*self.restart_args(index, self.restarts))
        try:
            return self._ray.get(getattr(self.actors[index], method).remote(*args))
        except self._ray.exceptions.RayActorError as again:
            raise PeerLost(f"Ray actor {index} of {self.what} died again right after its replacement "
                           f"({str(again).splitlines()[0][:200]})") from None

    def pids(self) -> list[int]:
        return self._ray.get([actor.pid.remote() for actor in self.actors])

    def shutdown(self, close_method: str | None = "close") -> None:
        """Ask every actor to ``close_method`` (a dead one is skipped), kill them, and stop Ray if
        this pool started it."""
        ray = self._ray
        for actor in self.actors:
            if close_method is not None:
                try:
                    ray.get(getattr(actor, close_method).remote(), timeout=30)
                except Exception:  # a dead actor has nothing to close
                    pass
            ray.kill(actor)
        self.actors = []
        if self._owns_ray:
            ray.shutdown()
