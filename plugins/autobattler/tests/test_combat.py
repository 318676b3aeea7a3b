"""The batched combat (torch) against the TypeScript reference fight, field by field."""

import subprocess

import numpy as np
import pytest
import torch

from meeple.transport import node
from meeple_autobattler import combat as C


@pytest.fixture(scope="module")
def dist():
    return node.build()


def reference(dist, tmp_path, *, boards: np.ndarray | None = None, count: int = 0, seed: int = 0):
    """The TypeScript fights: (boards [N, 32, 9], results [N, 98])."""
    args = ["--in", str(tmp_path / "in.bin")] if boards is not None else ["--count", str(count), "--seed", str(seed)]
    if boards is not None:
        boards.astype(np.int32).tofile(tmp_path / "in.bin")
    out = tmp_path / "ref"
    subprocess.run(
        ["node", str(dist / "games/autobattler/cli.js"), "fights", *args, "--out", str(out)],
        check=True, capture_output=True, text=True,
    )
    units = np.fromfile(out / "boards.bin", dtype=np.int32).reshape(-1, C.FIGHT_UNITS, C.UNIT_FIELDS)
    return units, np.fromfile(out / "results.bin", dtype=np.int32).reshape(len(units), -1)


def assert_same(units: np.ndarray, ref: np.ndarray, **kwargs) -> C.FightResult:
    got = C.simulate(torch.from_numpy(units), **kwargs)
    n = C.FIGHT_UNITS
    for name, ours, theirs in [
        ("hp", got.hp, ref[:, :n]), ("row", got.row, ref[:, n:2 * n]), ("col", got.col, ref[:, 2 * n:3 * n]),
        ("winner", got.winner, ref[:, 3 * n]), ("ticks", got.ticks, ref[:, 3 * n + 1]),
    ]:
        bad = np.flatnonzero((ours.numpy() != theirs).reshape(len(units), -1).any(axis=1))
        assert len(bad) == 0, f"{name} differs in {len(bad)} of {len(units)} fights, first: fight {bad[:5]}"
    return got


def test_thousands_of_random_boards_agree_exactly(dist, tmp_path):
    units, ref = reference(dist, tmp_path, count=4000, seed=21)
    got = assert_same(units, ref, compact_every=5)
    winners = np.bincount(got.winner.numpy(), minlength=3)
    # the boards exercise the rules: both sides win often, fights last tens of ticks
    assert winners[C.WIN_A] > 1000 and winners[C.WIN_B] > 1000, winners
    assert 30 < got.ticks.float().mean() < 150
    moved = (got.row.numpy() != units[..., C.ROW]) & (units[..., C.ALIVE] == 1)
    assert moved.any(axis=1).mean() > 0.5  # most fights move units


def one_unit(side_index: int, row: int, col: int, hp=100, atk=10, df=0, speed=100, rng=1, typ=0):
    return side_index, [1, row, col, hp, atk, df, speed, rng, typ]


def fights_of(*fights) -> np.ndarray:
    units = np.zeros((len(fights), C.FIGHT_UNITS, C.UNIT_FIELDS), dtype=np.int32)
    for f, members in enumerate(fights):
        for index, fields in members:
            units[f, index] = fields
    return units


def test_edge_cases_agree(dist, tmp_path):
    """Ties, collisions, type multipliers, simultaneous deaths, timeouts, empty sides."""
    units = fights_of(
        # two enemies at the same distance: the lower index is the target
        [one_unit(0, 4, 3), one_unit(16, 1, 2), one_unit(17, 1, 4)],
        # two movers claiming one square: the lower index steps, the other waits
        [one_unit(0, 5, 2, rng=1), one_unit(1, 5, 4, rng=1), one_unit(16, 0, 3, rng=1)],
        # type advantage and defence floor (damage at least 1)
        [one_unit(0, 2, 3, typ=1, atk=40), one_unit(16, 1, 3, typ=0, df=200, atk=3, hp=30)],
        # both die in the same tick: a draw
        [one_unit(0, 2, 3, hp=10, atk=10), one_unit(16, 1, 3, hp=10, atk=10)],
        # nobody can kill: the tick limit ends it as a draw
        [one_unit(0, 2, 3, hp=10**6, atk=1), one_unit(16, 1, 3, hp=10**6, atk=1)],
        # one side empty from the start
        [one_unit(0, 4, 0)],
    )
    _, ref = reference(dist, tmp_path, boards=units)
    got = assert_same(units, ref)
    assert got.winner.tolist() == [ref[f, 3 * C.FIGHT_UNITS] for f in range(len(units))]
    assert got.winner[3] == C.DRAW and got.ticks[4] == C.MAX_TICKS and got.ticks[5] == 0


def test_simulate_checks_its_input():
    with pytest.raises(ValueError, match=r"expected \[fights, 32, 9\]"):
        C.simulate(torch.zeros(3, 16, 9, dtype=torch.int32))
