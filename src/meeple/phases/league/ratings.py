"""League ratings: one openskill Plackett-Luce (mu, sigma) per network, updated per finished table.

Why Plackett-Luce: a 4-player table game is a free-for-all with a full finishing order
(ties possible), which Plackett-Luce rates directly; Elo would need six pairwise updates per game.

Rules a reader must know:

* **Duplicated names.** The same network may sit at several seats of one table (two copies of the
  latest learner). Each seat is rated as its own one-player team, every copy starting from the
  network's current rating; the network's new mu and sigma are the means of its seats' posteriors.
  A copy ranked above another copy of itself is no evidence about the network, and the mean
  cancels most of it, where summing the updates would count one game several times. A table with
  a single distinct network carries no information and changes nothing.
* **Inheritance.** A new snapshot of the learner starts at the learner's mu with
  ``sigma = min(initial sigma, parent sigma + widen)``: the parent's rating lags behind the
  network that is frozen now, so the snapshot gets extra uncertainty to move quickly, but never
  more than a newcomer has.
* **Conservative score** ``mu - 3 sigma`` ranks networks (``best``): a lucky newcomer with few
  games does not outrank an established one.

Ratings are plain floats in :meth:`LeagueRatings.state_dict`, so a resume reproduces them exactly.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from openskill.models import PlackettLuce


class LeagueRatings:
    def __init__(self, *, mu: float = 25.0, sigma: float = 25.0 / 3.0, beta: float | None = None,
                 tau: float | None = None) -> None:
        """``beta`` (performance noise) defaults to sigma / 2 and ``tau`` (sigma added before each
        game, so ratings keep tracking a learner that changes) to mu / 300, openskill's defaults."""
        if sigma <= 0:
            raise ValueError(f"league ratings: sigma must be > 0, got {sigma!r}")
        self.mu, self.sigma = float(mu), float(sigma)
        self.model = PlackettLuce(mu=self.mu, sigma=self.sigma, beta=self.sigma / 2 if beta is None else beta,
                                  tau=self.mu / 300 if tau is None else tau)
        self._ratings: dict[str, tuple[float, float]] = {}  # name -> (mu, sigma), in insertion order
        self._games: dict[str, int] = {}

    # -- players -----------------------------------------------------------------------------
    def __contains__(self, name: str) -> bool:
        return name in self._ratings

    def names(self) -> list[str]:
        return list(self._ratings)

    def add(self, name: str, mu: float | None = None, sigma: float | None = None) -> None:
        """A new player at (mu, sigma), the model's initial rating by default."""
        if name in self._ratings:
            raise ValueError(f"league ratings: {name!r} is already rated")
        sigma = self.sigma if sigma is None else float(sigma)
        if sigma <= 0:
            raise ValueError(f"league ratings: sigma of {name!r} must be > 0, got {sigma!r}")
        self._ratings[name] = (self.mu if mu is None else float(mu), sigma)
        self._games[name] = 0

    def inherited(self, parent: str, sigma_widen: float) -> tuple[float, float]:
        """(mu, sigma) a snapshot of ``parent`` starts from: (parent mu, min(initial sigma, parent sigma + widen))."""
        if sigma_widen < 0:
            raise ValueError(f"league ratings: sigma_widen must be >= 0, got {sigma_widen!r}")
        mu, sigma = self.rating(parent)
        return mu, min(self.sigma, sigma + sigma_widen)

    def inherit(self, new: str, parent: str, sigma_widen: float) -> None:
        """Add ``new`` at :meth:`inherited` of ``parent``."""
        self.add(new, *self.inherited(parent, sigma_widen))

    def rating(self, name: str) -> tuple[float, float]:
        """(mu, sigma) of ``name``."""
        try:
            return self._ratings[name]
        except KeyError:
            raise KeyError(f"league ratings: {name!r} is not rated; rated: {', '.join(self._ratings) or 'none'}") from None

    def games(self, name: str) -> int:
        self.rating(name)
        return self._games[name]

    def conservative(self, name: str) -> float:
        mu, sigma = self.rating(name)
        return mu - 3.0 * sigma

    def best(self, names: Iterable[str] | None = None) -> str:
        """The name with the highest conservative score (first rated wins a tie)."""
        candidates = list(self._ratings if names is None else names)
        if not candidates:
            raise ValueError("league ratings: best() of no players")
        return max(candidates, key=self.conservative)

    # -- games -------------------------------------------------------------------------------
    def update(self, players: Sequence[str], ranks: Sequence[int]) -> None:
        """Rate one finished table: ``players[i]`` finished ``ranks[i]`` (0 = first, ties allowed)."""
        if len(players) != len(ranks) or len(players) < 2:
            raise ValueError(f"league ratings: one rank per seat and at least 2 seats; got players={list(players)} "
                             f"ranks={list(ranks)}")
        priors = {name: self.rating(name) for name in players}
        if len(priors) < 2:
            return
        teams = [[self.model.rating(mu=priors[name][0], sigma=priors[name][1])] for name in players]
        posteriors = self.model.rate(teams, ranks=[float(r) for r in ranks])
        seats: dict[str, list[tuple[float, float]]] = {name: [] for name in priors}
        for name, (post,) in zip(players, posteriors, strict=True):
            seats[name].append((post.mu, post.sigma))
        for name, values in seats.items():
            n = len(values)
            self._ratings[name] = (sum(v[0] for v in values) / n, sum(v[1] for v in values) / n)
            self._games[name] += 1

    # -- logging and resume ------------------------------------------------------------------
    def table(self, names: Iterable[str] | None = None) -> list[dict[str, Any]]:
        """Rows ``{name, mu, sigma, conservative, games}``, best conservative score first."""
        rows = [{"name": name, "mu": self.rating(name)[0], "sigma": self.rating(name)[1],
                 "conservative": self.conservative(name), "games": self._games[name]}
                for name in (self._ratings if names is None else names)]
        return sorted(rows, key=lambda row: -row["conservative"])

    def state_dict(self) -> dict[str, Any]:
        return {"ratings": {name: [mu, sigma] for name, (mu, sigma) in self._ratings.items()},
                "games": dict(self._games)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if set(state) != {"ratings", "games"} or set(state["ratings"]) != set(state["games"]):
            raise ValueError(f"league ratings state: expected keys 'ratings' and 'games' over the same names, "
                             f"got {sorted(state)}")
        self._ratings = {name: (float(mu), float(sigma)) for name, (mu, sigma) in state["ratings"].items()}
        self._games = {name: int(state["games"][name]) for name in self._ratings}
