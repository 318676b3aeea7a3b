"""League pool: which frozen networks may sit at a table, how seats are drawn, and their ratings.

The disk side is :class:`meeple.checkpoint.pool.OpponentPool` (versioned, checksummed files that
survive crashes); this class adds what a league needs on top:

* **Snapshots and anchors.** ``promote`` freezes the learner as ``v{version:04d}``; ``add_anchor``
  adds a fixed opponent (the phase-2 policy) under a chosen name. At most ``max_on_disk`` of them
  are live, anchors included; the oldest snapshot is evicted first and anchors never are, so
  the league always keeps its reference points against forgetting.
* **Eviction is lazy on disk.** A checkpoint taken before an eviction still names the evicted
  snapshot, so its file is deleted only at the second :meth:`state_dict` after the eviction (by
  then a checkpoint without it has been taken; until then games already seated with it can still
  build it). :meth:`load_state_dict` deletes every pool file the resumed state does not name
  (newer promotions lost with the crash, evictions it has done). The disk may hold a few more
  than ``max_on_disk`` between checkpoints.
* **Device slots.** ``policy(name)`` builds networks with the ``make_policy`` factory and keeps
  the ``device_slots`` most recently used (LRU); :attr:`policies` is a lazy mapping view of the
  same, for ``env.set_league``. Holders must look fns up per use for the bound to hold.
* **Seat sampling.** Each seat is drawn independently from the mix ``self`` (the learner's latest
  frozen copy), ``pool`` (uniform over snapshots), ``anchor`` (uniform over anchors); the share of
  an empty category goes to ``self``. Every seat consumes exactly two uniforms of the caller's
  generator, whatever the pool holds, so the generator's state alone fixes future draws.
* **Ratings live here** (a :class:`LeagueRatings`): a snapshot inherits the learner's rating
  when promoted; an evicted one keeps its rating (games in flight may still finish against it,
  and the table logs every generation), which costs two floats per promotion.
  ``record(result)`` rates one finished game, counting the ``self`` copies as the learner.
"""

from __future__ import annotations

from collections import Counter, OrderedDict
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from meeple.checkpoint.io import CheckpointError
from meeple.checkpoint.pool import OpponentPool
from meeple.nets.policy_fn import greedy_policy, sampled_policy
from meeple.phases.league.protocol import SNAPSHOT_NAME
from meeple.phases.league.ratings import LeagueRatings

PolicyFn = Callable[..., torch.Tensor]
CATEGORIES = ("self", "pool", "anchor")
DEFAULT_MIX = {"self": 0.5, "pool": 0.3, "anchor": 0.2}


@dataclass
class LeagueEntry:
    name: str
    version: int  # OpponentPool version on disk
    anchor: bool


class LeaguePool:
    def __init__(self, folder: str | Path, make_policy: Callable[[dict[str, torch.Tensor]], PolicyFn], *,
                 max_on_disk: int = 20, device_slots: int = 4, mix: Mapping[str, float] | None = None,
                 sigma_widen: float = 1.0, ratings: LeagueRatings | None = None,
                 learner: str = "learner", self_name: str = "self") -> None:
        if max_on_disk < 2:
            raise ValueError(f"league pool: max_on_disk must be >= 2 (an anchor and a snapshot), got {max_on_disk!r}")
        if device_slots < 1:
            raise ValueError(f"league pool: device_slots must be >= 1, got {device_slots!r}")
        if sigma_widen < 0:
            raise ValueError(f"league pool: sigma_widen must be >= 0, got {sigma_widen!r}")
        self.disk = OpponentPool(folder)
        self.make_policy = make_policy
        self.max_on_disk, self.device_slots, self.sigma_widen = max_on_disk, device_slots, sigma_widen
        self.mix = _check_mix(DEFAULT_MIX if mix is None else mix)
        self.learner, self.self_name = learner, self_name
        self.ratings = LeagueRatings() if ratings is None else ratings
        if learner not in self.ratings:
            self.ratings.add(learner)
        self._entries: list[LeagueEntry] = []  # live, in the order they joined
        self._evicted: list[LeagueEntry] = []  # evicted since the last state_dict()
        self._deletable: list[LeagueEntry] = []  # evicted before it: files deleted at the next one
        self._built: OrderedDict[str, PolicyFn] = OrderedDict()  # LRU, most recent last
        self.uses: dict[str, int] = {}
        self.builds = 0
        self.policies: Mapping[str, PolicyFn] = _PolicyView(self)

    # -- membership ----------------------------------------------------------------------------
    def names(self) -> list[str]:
        return [e.name for e in self._entries]

    def snapshots(self) -> list[str]:
        return [e.name for e in self._entries if not e.anchor]

    def anchors(self) -> list[str]:
        return [e.name for e in self._entries if e.anchor]

    def entry(self, name: str) -> LeagueEntry:
        for entry in self._entries:
            if entry.name == name:
                return entry
        raise KeyError(f"league pool: no network {name!r}; live: {', '.join(self.names()) or 'none'}")

    def promote(self, state_dict: dict[str, torch.Tensor], step: int, phase: int) -> str:
        """Freeze the learner's weights as a new snapshot (rated from the learner's rating); its name."""
        mu, sigma = self.ratings.inherited(self.learner, self.sigma_widen)
        version = self.disk.add(state_dict, step=step, phase=phase, rating_mu=mu, rating_sigma=sigma).version
        name = f"v{version:04d}"
        self.ratings.add(name, mu, sigma)
        self._join(LeagueEntry(name, version, anchor=False))
        return name

    def add_anchor(self, name: str, state_dict: dict[str, torch.Tensor], *, step: int = 0, phase: int = 0,
                   mu: float | None = None, sigma: float | None = None) -> None:
        """A fixed opponent that is never evicted, rated from (mu, sigma) (the initial rating by default)."""
        if SNAPSHOT_NAME.match(name) or name in (self.learner, self.self_name) or name in self.names():
            raise ValueError(f"league pool: anchor name {name!r} is taken; snapshots are named v0001, ..., and "
                             f"{self.learner!r}, {self.self_name!r} and {self.names()} are in use")
        if len(self.anchors()) + 1 >= self.max_on_disk:
            raise ValueError(f"league pool: {len(self.anchors()) + 1} anchors leave no room for snapshots "
                             f"under max_on_disk={self.max_on_disk}")
        version = self.disk.add(state_dict, step=step, phase=phase, rating_mu=mu, rating_sigma=sigma).version
        if name not in self.ratings:
            self.ratings.add(name, mu, sigma)
        self._join(LeagueEntry(name, version, anchor=True))

    def _join(self, entry: LeagueEntry) -> None:
        self._entries.append(entry)
        while len(self._entries) > self.max_on_disk:
            oldest = next(e for e in self._entries if not e.anchor)
            self._entries.remove(oldest)
            self._evicted.append(oldest)

    # -- networks ------------------------------------------------------------------------------
    def policy(self, name: str) -> PolicyFn:
        """The built network ``name`` (from the LRU slots, or loaded, verified and built now).

        An evicted snapshot stays usable while its file is kept, for games already seated with it."""
        if name in self._built:
            self._built.move_to_end(name)
        else:
            kept = {e.name: e for e in self._evicted + self._deletable}
            entry = kept[name] if name in kept else self.entry(name)
            weights = self._load(entry)
            self._built[name] = self.make_policy(weights)
            self.builds += 1
            while len(self._built) > self.device_slots:
                self._built.popitem(last=False)
        self.uses[name] = self.uses.get(name, 0) + 1
        return self._built[name]

    def built(self) -> list[str]:
        """Names in the device slots, least recently used first."""
        return list(self._built)

    # -- seats and results ---------------------------------------------------------------------
    def sample(self, rng: torch.Generator | np.random.Generator, seats: int) -> list[str]:
        """``seats`` names, each drawn independently from the mix (``self_name`` for the learner's copy)."""
        return self.seat_mix().sample(rng, seats)

    def seat_mix(self) -> SeatMix:
        """What a seat is drawn from now, as a value another process can draw with (Ray actors)."""
        return SeatMix(self.mix, tuple(self.snapshots()), tuple(self.anchors()), self.self_name)

    def weights(self, name: str) -> dict[str, torch.Tensor]:
        """Network ``name``'s weights from disk (verified), for a process that builds it itself."""
        return self._load(self.entry(name))

    def _load(self, entry: LeagueEntry) -> dict[str, torch.Tensor]:
        try:
            return self.disk.load(entry.version)
        except CheckpointError as err:
            raise type(err)(f"league pool: snapshot {entry.name!r} (version {entry.version}) cannot be used: "
                            f"{err}") from err

    def record(self, result: Mapping[str, Any]) -> None:
        """Rate one finished game (``env.pop_results()`` item); the ``self`` copies count as the learner."""
        players = [self.learner if p == self.self_name else p for p in result["players"]]
        self.ratings.update(players, result["ranks"])

    # -- resume --------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """Everything but the built networks (rebuilt on use). Call it only when checkpointing:
        it deletes the files evicted before the previous call."""
        for entry in self._deletable:
            self._built.pop(entry.name, None)
            self._remove_file(entry.version)
        self._deletable, self._evicted = self._evicted, []
        return {"entries": [asdict(e) for e in self._entries], "uses": dict(self.uses), "builds": self.builds,
                "ratings": self.ratings.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore the league of a checkpoint; pool files it does not name are deleted."""
        entries = [LeagueEntry(**e) for e in state["entries"]]
        on_disk = {e.version for e in self.disk.entries()}
        missing = [f"{e.name} (version {e.version})" for e in entries if e.version not in on_disk]
        if missing:
            raise CheckpointError(f"league pool {self.disk.folder}: the checkpoint names snapshots whose files are "
                                  f"gone: {', '.join(missing)}")
        for version in on_disk - {e.version for e in entries}:
            self._remove_file(version)
        self._entries, self._evicted, self._deletable = entries, [], []
        self._built.clear()
        self.uses, self.builds = dict(state["uses"]), int(state["builds"])
        self.ratings.load_state_dict(state["ratings"])

    def _remove_file(self, version: int) -> None:
        try:
            self.disk.remove(version)
        except CheckpointError:  # already gone
            pass


class _PolicyView(Mapping[str, PolicyFn]):
    """``pool.policies[name]`` is ``pool.policy(name)``: lazy, LRU-bounded, counted."""

    def __init__(self, pool: LeaguePool) -> None:
        self._pool = pool

    def __getitem__(self, name: str) -> PolicyFn:
        return self._pool.policy(name)

    def __iter__(self) -> Iterator[str]:
        return iter(self._pool.names())

    def __len__(self) -> int:
        return len(self._pool.names())

    def __contains__(self, name: object) -> bool:
        return name in self._pool.names()


@dataclass(frozen=True)
class SeatMix:
    """The draw of one seat: category from ``mix``, then uniform within it (an empty category's
    share goes to ``self``). Two uniforms per seat, whatever the membership."""

    mix: Mapping[str, float]
    snapshots: tuple[str, ...]
    anchors: tuple[str, ...]
    self_name: str = "self"

    def sample(self, rng: torch.Generator | np.random.Generator, seats: int) -> list[str]:
        if isinstance(rng, np.random.Generator):
            u = rng.random((seats, 2))
        elif isinstance(rng, torch.Generator):
            u = torch.rand((seats, 2), generator=rng, dtype=torch.float64, device=rng.device).cpu().numpy()
        else:
            raise TypeError(f"league pool: rng must be a torch.Generator or numpy Generator, got {type(rng).__name__}")
        members = {"pool": self.snapshots, "anchor": self.anchors}
        shares = {c: self.mix[c] if c == "self" or members[c] else 0.0 for c in CATEGORIES}
        shares["self"] += 1.0 - sum(shares.values())
        bounds = np.cumsum([shares[c] for c in CATEGORIES])
        names = []
        for pick, within in u:
            category = CATEGORIES[min(int(np.searchsorted(bounds, pick, side="right")), len(CATEGORIES) - 1)]
            if category == "self":
                names.append(self.self_name)
            else:
                names.append(members[category][int(within * len(members[category]))])
        return names

    def category(self, name: str) -> str:
        """``self``, ``pool`` or ``anchor``: where a drawn name came from."""
        return "self" if name == self.self_name else "anchor" if name in self.anchors else "pool"

    def seat(self, rng: torch.Generator | np.random.Generator, env: Any, policy: Callable[[str], PolicyFn],
             counts: Counter[str]) -> list[str]:
        """The other seats of one table's next game: drawn, counted in ``counts`` (``latest``,
        ``pool``, ``anchor``), and every drawn network besides the learner's copy handed to the
        league ``env`` as ``policy(name)`` builds it. The one seating of a league, in one process
        (the module's pool) and in a Ray actor (meeple.phases.league.remote)."""
        names = self.sample(rng, env.league_seats)
        for name in names:
            category = self.category(name)
            counts["latest" if category == "self" else category] += 1
            if category != "self":
                env.update_policy(name, policy(name))
        return names


class OpponentPolicies:
    """Frozen networks as policy fns for the league's seats: their argmax (``greedy``), or a
    sample from a stream of their own (seeds ``seed + 1``, ``seed + 2``, ... in build order)."""

    def __init__(self, greedy: bool, seed: int) -> None:
        self.greedy, self.seed = greedy, seed

    def __call__(self, network: torch.nn.Module) -> PolicyFn:
        if self.greedy:
            return greedy_policy(network)
        self.seed += 1
        return sampled_policy(network, seed=self.seed)


def _check_mix(mix: Mapping[str, float]) -> dict[str, float]:
    unknown = set(mix) - set(CATEGORIES)
    values = {c: float(mix.get(c, 0.0)) for c in CATEGORIES}
    if unknown or any(v < 0 for v in values.values()) or abs(sum(values.values()) - 1.0) > 1e-6:
        raise ValueError(f"league pool: mix {dict(mix)} must give shares >= 0 summing to 1 over "
                         f"{', '.join(CATEGORIES)}")
    return values
