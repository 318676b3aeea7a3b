"""Seeded games as traces (obs, mask, reward, done, truncated) that any stepper can replay."""

from __future__ import annotations

import numpy as np

FIELDS = ("obs", "mask", "reward", "done", "truncated")


def random_legal(rng: np.random.Generator, mask: np.ndarray) -> np.ndarray:
    """One uniformly random legal action per row of ``mask``."""
    return np.array([rng.choice(np.flatnonzero(row)) for row in mask], dtype=np.int32)


def play(stepper, steps: int, seed: int = 7, multi: bool = False) -> list[dict[str, np.ndarray]]:
    """Reset with ``seed``, then ``steps`` random legal moves; every record copied."""
    rng = np.random.default_rng(seed)
    records = stepper.reset(seed)
    trace = [{k: np.array(records[k]) for k in FIELDS}]
    seats = stepper.spaces.num_seats
    for _ in range(steps):
        if multi:
            mask = records["mask"]
            if (
                mask.ndim == 2
            ):  # per-env records (after RESET): the mover's mask, offered to every seat
                mask = np.repeat(mask[:, None], seats, axis=1)
            actions = np.zeros(mask.shape[:2], dtype=np.int32)
            for seat in range(seats):
                moving = mask[:, seat].any(axis=1)
                if moving.any():
                    actions[moving, seat] = random_legal(rng, mask[moving, seat])
            records = stepper.step_multi(actions)
        else:
            records = stepper.step(random_legal(rng, records["mask"]))
        trace.append({k: np.array(records[k]) for k in FIELDS})
    return trace


def assert_same(a: list[dict], b: list[dict], what: str) -> None:
    assert len(a) == len(b)
    for t, (x, y) in enumerate(zip(a, b)):
        for k in FIELDS:
            np.testing.assert_array_equal(x[k], y[k], err_msg=f"{what}: step {t} field {k}")
