"""Server side of one batch of env slots: validate a request, run the env, contain its faults."""

from __future__ import annotations

import logging

import numpy as np

from meeple.envs.array import ArrayEnv
from meeple.transport.protocol import (
    OBSERVE,
    RESET,
    STEP,
    STEP_MULTI,
    ErrorCode,
    MsgType,
    ProtocolError,
)

log = logging.getLogger(__name__)


class EnvHost:
    """Runs RESET / STEP / STEP_MULTI / OBSERVE on an :class:`ArrayEnv` and writes records.

    Actions are checked against the action count and the masks of the last records before
    the env sees them. An env that throws is logged, counted and reset, and the request
    fails with ``env_exception``.
    """

    def __init__(self, env: ArrayEnv, first_slot: int = 0) -> None:
        self.env, self.spaces, self.first_slot = env, env.spaces, first_slot
        self.legal: np.ndarray | None = None  # [n, num_actions] mask of the seat to move (STEP)
        self.legal_multi: np.ndarray | None = None  # [n, seats, num_actions] (after STEP_MULTI)
        self.steps = 0
        self.env_errors = 0
        self._out: np.ndarray | None = None  # the last ``out`` and its mask view
        self._out_mask: np.ndarray | None = None

    def execute(
        self,
        command: int,
        out: np.ndarray,
        out_multi: np.ndarray | None = None,
        *,
        seed: int | None = None,
        actions: np.ndarray | None = None,
    ) -> None:
        """``out``: ``[n]`` records (RESET/STEP/OBSERVE); ``out_multi``: ``[n, seats]`` (STEP_MULTI)."""
        if command != RESET and self.legal is None and self.legal_multi is None:
            raise ProtocolError(
                ErrorCode.NOT_READY, f"{MsgType(command).name} before RESET; send RESET first"
            )
        try:
            if command == STEP:
                self._check(actions, self.legal)
                self.env.step(actions, out)
                self.steps += len(actions)
            elif command == RESET:
                # env i of the whole server gets seed + i, however the slots are split
                self.env.reset(None if seed is None else seed + self.first_slot, out)
            elif command == STEP_MULTI:
                self._step_multi(actions, out, out_multi)
                self.steps += len(actions)
            elif command == OBSERVE:
                self.env.observe(out)
            else:
                raise ProtocolError(
                    ErrorCode.UNKNOWN_TYPE, f"command {command} is not an env command"
                )
        except ProtocolError:
            raise
        except Exception as err:  # the env's own fault: contain it, keep serving
            raise self.contain(err, out) from err
        # Views, not copies: only the env writes these records, after the next check.
        if command == STEP_MULTI:
            self.legal_multi, self.legal = out_multi["mask"], out_multi["mask"].max(axis=1)
        else:
            if out is not self._out:  # servers hand the same buffer every request
                self._out, self._out_mask = out, out["mask"]
            self.legal, self.legal_multi = self._out_mask, None

    def contain(self, err: Exception, out: np.ndarray) -> ProtocolError:
        """After the env raised ``err``: log and count it, reset the env's slots into
        ``out``; the error to answer with (``env_exception``)."""
        self.env_errors += 1
        log.error(
            "env slots %d..%d raised; resetting them",
            self.first_slot,
            self.first_slot + self.spaces.num_envs - 1,
            exc_info=err,
        )
        self.legal = self.legal_multi = None
        try:
            self.env.reset(None, out)
            self.legal = out["mask"].copy()
        except Exception:  # noqa: BLE001 - reported below; the next RESET retries
            log.exception("reset after the env error failed too")
        return ProtocolError(
            ErrorCode.ENV_EXCEPTION,
            f"env slots {self.first_slot}..{self.first_slot + self.spaces.num_envs - 1} raised "
            f"{type(err).__name__}: {err}; they were reset (episodes restart)",
        )

    def masks_in(self, out: np.ndarray) -> bool:
        """Whether the legal actions of the next STEP are the masks in ``out`` (the last
        request wrote them there): a STEP into ``out`` then needs only that check."""
        return self.legal is not None and self.legal is self._out_mask and out is self._out

    def _step_multi(self, actions: np.ndarray, out: np.ndarray, out_multi: np.ndarray) -> None:
        n, seats = self.spaces.num_envs, self.spaces.num_seats
        actions = actions.reshape(n, seats)
        step_multi = getattr(self.env, "step_multi", None)
        if step_multi is None:
            if seats != 1:
                raise ProtocolError(
                    ErrorCode.UNKNOWN_TYPE, f"{self.spaces.env_name} has no STEP_MULTI"
                )
            self._check(actions[:, 0], self.legal)
            self.env.step(actions[:, 0], out)
            out_multi[:, 0] = out
            return
        if self.legal_multi is not None:
            # seats whose mask is all zero are not to move: their actions are ignored
            for seat in range(seats):
                moving = self.legal_multi[:, seat].any(axis=1)
                self._check(
                    actions[moving, seat],
                    self.legal_multi[moving, seat],
                    seat=seat,
                    rows=np.flatnonzero(moving),
                )
        else:
            self._check_range(actions)
        step_multi(actions, out_multi)

    def _check_range(self, actions: np.ndarray) -> None:
        # one comparison for both ends: negative int32 values wrap to huge uint32 ones
        if not (actions.astype(np.uint32, copy=False) >= self.spaces.num_actions).any():
            return
        bad = np.flatnonzero((actions < 0) | (actions >= self.spaces.num_actions))
        if len(bad):
            flat = actions.reshape(-1)
            raise ProtocolError(
                ErrorCode.BAD_ACTION,
                f"action {int(flat[bad[0]])} at position {int(bad[0])} is out of range; "
                f"accepted 0..{self.spaces.num_actions - 1}",
            )

    def _check(
        self,
        actions: np.ndarray,
        legal: np.ndarray,
        *,
        seat: int | None = None,
        rows: np.ndarray | None = None,
    ) -> None:
        if len(actions) <= 16:  # small batches: plain Python beats numpy's per-call cost
            n = self.spaces.num_actions
            for i, a in enumerate(actions.tolist()):
                if not (0 <= a < n and legal.item(i, a)):
                    break
            else:
                return
        self._check_range(actions)
        ok = legal[np.arange(len(actions)), actions]
        if not ok.all():
            i = int(np.flatnonzero(ok == 0)[0])
            env = self.first_slot + (int(rows[i]) if rows is not None else i)
            where = f"env {env}" + ("" if seat is None else f" seat {seat}")
            allowed = np.flatnonzero(legal[i]).tolist()
            raise ProtocolError(
                ErrorCode.BAD_ACTION,
                f"action {int(actions[i])} is illegal for {where}; legal actions: {allowed}",
            )
