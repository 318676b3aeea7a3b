"""Self-play over the wire: every seat of every env as one row, stepped with STEP_MULTI.

A multi-seat server's ``num_envs`` games become ``num_envs * num_seats`` single-seat rows (env-major:
env 0 seat 0, env 0 seat 1, ...), so one policy forward acts for all seats of all envs and the
learner sees a plain batched env. A seat not to move (waiting for the others, or out of the game)
has an all-zero mask on the wire; here it gets action 0 as its only legal one, the protocol's
"ignored" convention, so masked policies stay defined and such rows carry no policy gradient.
"""

from __future__ import annotations

import numpy as np

from meeple.envs.spaces import Spaces
from meeple.errors import ConfigError


class SeatStepper:
    """A :class:`~meeple.envs.record_env.RecordStepper` of rows (env, seat) over a multi-seat one."""

    transient = False  # rows are copies

    def __init__(self, stepper) -> None:
        inner = stepper.spaces
        if inner.num_seats < 2:
            raise ConfigError(
                f"{inner.env_name or 'this env'} has {inner.num_seats} seat; self-play over seats "
                "needs a multi-seat game (SPACES num_seats >= 2)"
            )
        self.stepper, self.seats, self.num_games = stepper, inner.num_seats, inner.num_envs
        self.spaces = Spaces(
            inner.num_envs * inner.num_seats,
            inner.num_actions,
            inner.obs_shape,
            inner.obs_dtype,
            1,
            inner.info,
            inner.env_name,
        )

    def reset(self, seed: int | None) -> np.ndarray:
        self.stepper.reset(seed)
        return self._rows(self.stepper.observe(all_seats=True))

    def step(self, actions: np.ndarray) -> np.ndarray:
        actions = np.asarray(actions, dtype=np.int32).reshape(self.num_games, self.seats)
        return self._rows(self.stepper.step_multi(actions))

    def _rows(self, records: np.ndarray) -> np.ndarray:
        rows = np.array(records).reshape(-1)  # a copy: shared-memory records are reused
        waiting = ~rows["mask"].any(axis=1)
        rows["mask"][waiting, 0] = 1
        return rows

    def health(self) -> dict[str, int]:
        return self.stepper.health()

    def close(self) -> None:
        self.stepper.close()
