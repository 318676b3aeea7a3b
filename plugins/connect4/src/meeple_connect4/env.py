"""Connect Four as an array env (rules from ``meeple_native``), hosted or stepped in-process.

Observations are ``meeple_native``'s planes ``(3, 6, 7)`` float32 from the point of view of
the seat they are given to; masks are the legal columns. Finished games restart at once
(the protocol's auto-reset), so a record with ``done = 1`` shows the new empty board.
Info fields: ``to_play`` (seat to move in the returned position), ``moves`` (stones on
it) and ``winner`` of the step's game (-1 ongoing, 0 or 1 the seat that won, 2 draw).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from meeple.envs.array import LocalStepper
from meeple.envs.spaces import Spaces
from meeple_native import OBS_SHAPE, WIDTH, Connect4

if TYPE_CHECKING:
    from torchrl.envs import EnvBase

ONGOING, DRAW = -1, 2
INFO = (("to_play", np.uint8), ("moves", np.uint8), ("winner", np.int8))
# legal_mask() bits -> mask row
_MASKS = np.array(
    [[(bits >> c) & 1 for c in range(WIDTH)] for bits in range(1 << WIDTH)], dtype=np.uint8
)


class Connect4ArrayEnv:
    """``num_envs`` Connect Four games; ``step`` plays one move per game for its side to move."""

    def __init__(self, num_envs: int) -> None:
        self.spaces = Spaces(
            num_envs, WIDTH, OBS_SHAPE, np.float32, num_seats=2, info=INFO, env_name="connect4"
        )
        self.games = [Connect4() for _ in range(num_envs)]

    def reset(self, seed: int | None, out: np.ndarray) -> None:
        # The rules are deterministic: the seed has nothing to seed.
        self.games = [Connect4() for _ in self.games]
        out["reward"], out["done"], out["truncated"] = 0, 0, 0
        for i, game in enumerate(self.games):
            self._write(out[i], game, game.to_play, ONGOING)

    def observe(self, out: np.ndarray) -> None:
        out["reward"], out["done"], out["truncated"] = 0, 0, 0
        for i, game in enumerate(self.games):
            self._write(out[i], game, game.to_play, ONGOING)

    def step(self, actions: np.ndarray, out: np.ndarray) -> None:
        out["truncated"] = 0
        for i, action in enumerate(actions.tolist()):
            game = self.games[i]
            mover = game.to_play
            game.play(action)
            winner, reward = ONGOING, 0.0
            if game.is_terminal():
                won = game.winner()
                winner, reward = (DRAW, 0.0) if won is None else (won, 1.0 if won == mover else 0.0)
                game = self.games[i] = Connect4()
            rec = out[i]
            rec["reward"], rec["done"] = reward, winner != ONGOING
            self._write(rec, game, game.to_play, winner)

    def step_multi(self, actions: np.ndarray, out: np.ndarray) -> None:
        """``actions[env, seat]``; the side to move's action is played. ``out[env, seat]``: each seat's view."""
        out["truncated"] = 0
        for i in range(len(self.games)):
            game = self.games[i]
            game.play(int(actions[i, game.to_play]))
            winner = ONGOING
            if game.is_terminal():
                won = game.winner()
                winner = DRAW if won is None else won
                game = self.games[i] = Connect4()
            for seat in (0, 1):
                rec = out[i, seat]
                rec["reward"] = (
                    0.0 if winner in (ONGOING, DRAW) else (1.0 if winner == seat else -1.0)
                )
                rec["done"] = winner != ONGOING
                self._write(rec, game, seat, winner)

    @staticmethod
    def _write(rec: np.ndarray, game: Connect4, seat: int, winner: int) -> None:
        obs = rec["obs"]
        game.encode(obs)
        if seat != game.to_play:  # planes are the side to move's: swap own/opponent stones
            obs[[0, 1]] = obs[[1, 0]]
            rec["mask"] = 0
        else:
            rec["mask"] = _MASKS[game.legal_mask()]
        rec["info_to_play"], rec["info_moves"], rec["info_winner"] = (
            game.to_play,
            game.moves_played,
            winner,
        )

    def close(self) -> None:
        self.games = []


class Connect4Backend:
    name = "connect4"

    def make_array_env(self, env_cfg: Mapping[str, Any], *, num_envs: int) -> Connect4ArrayEnv:
        return Connect4ArrayEnv(num_envs)

    def make_env(
        self, env_cfg: Mapping[str, Any], *, num_envs: int, device: str = "cpu"
    ) -> EnvBase:
        from meeple.envs.record_env import RecordEnv  # torch: not in servers

        return RecordEnv(LocalStepper(Connect4ArrayEnv(num_envs)), device=device)
