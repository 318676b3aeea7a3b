"""The auto-battler's fight as one batched tensor program over (fights x units).

The same rules as the TypeScript reference (plugins/remote/node/src/games/autobattler/combat.ts,
docs/autobattler.md "Combat"), on integers, so results agree exactly: inside a tick every unit
decides from the tick's starting state; the nearest living enemy (Chebyshev distance, lowest index
on a tie) is attacked when in range and the unit has 100 energy, else the unit steps towards it
onto a square that was free at the tick's start and that no lower-index unit claims.

Work is O(fights x units) per tick apart from one (fights x 16 x 16) distance table; finished
fights leave the working set every ``compact_every`` ticks, so long fights don't hold short ones.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

GRID_ROWS, GRID_COLS = 6, 8
SIDE_UNITS = 16
FIGHT_UNITS = 2 * SIDE_UNITS
MAX_TICKS = 200
ACTION_COST = 100
# input fields of one unit (int32), as in combat.ts
ALIVE, ROW, COL, HP, ATK, DEF, SPEED, RANGE, TYPE = range(9)
UNIT_FIELDS = 9
WIN_A, WIN_B, DRAW = 0, 1, 2
NUM_TYPES = 4


def type_multiplier4(device: torch.device | str = "cpu") -> torch.Tensor:
    """[attacker, defender] damage multiplier x4: each type beats the one before it (5), loses to
    the one after it (3), else 4."""
    m = torch.full((NUM_TYPES, NUM_TYPES), 4, dtype=torch.int32, device=device)
    for t in range(NUM_TYPES):
        m[t, (t - 1) % NUM_TYPES] = 5
        m[(t - 1) % NUM_TYPES, t] = 3
    return m


@dataclass
class FightResult:
    """Per fight: ``winner`` (WIN_A, WIN_B, DRAW) and ``ticks``; per unit: final ``hp`` (0 when
    dead), ``row`` and ``col``."""

    winner: torch.Tensor  # [F] int32
    ticks: torch.Tensor  # [F] int32
    hp: torch.Tensor  # [F, 32] int32
    row: torch.Tensor
    col: torch.Tensor


class _State:
    """The working set: one row per unfinished fight."""

    def __init__(self, units: torch.Tensor) -> None:
        u = units.to(torch.int32)
        self.index = torch.arange(u.shape[0], device=u.device)  # rows -> input fights
        self.alive = u[..., ALIVE] != 0
        self.row, self.col, self.hp = u[..., ROW].clone(), u[..., COL].clone(), u[..., HP].clone()
        self.atk, self.defence, self.speed = u[..., ATK], u[..., DEF], u[..., SPEED]
        self.range, self.type = u[..., RANGE], u[..., TYPE]
        self.energy = torch.zeros_like(self.hp)
        self.ticks = torch.zeros_like(self.index, dtype=torch.int32)

    def keep(self, rows: torch.Tensor) -> None:
        for name in ("index", "alive", "row", "col", "hp", "atk", "defence", "speed", "range",
                     "type", "energy", "ticks"):
            setattr(self, name, getattr(self, name)[rows])


def _targets(s: _State) -> tuple[torch.Tensor, torch.Tensor]:
    """Each unit's nearest living enemy (unit index) and its distance; distance -1 when none."""
    a, b = slice(0, SIDE_UNITS), slice(SIDE_UNITS, FIGHT_UNITS)
    dist = torch.maximum(
        (s.row[:, a, None] - s.row[:, None, b]).abs(), (s.col[:, a, None] - s.col[:, None, b]).abs()
    )  # [F, A unit, B unit]
    big = torch.iinfo(torch.int32).max
    rank = torch.arange(SIDE_UNITS, device=dist.device, dtype=torch.int32)
    # key = distance * 64 + the enemy's rank on its side: ties go to the lowest index
    key_a = torch.where(s.alive[:, None, b], dist * 64 + rank, big).amin(dim=2)  # A's targets
    key_b = torch.where(s.alive[:, None, a], dist.transpose(1, 2) * 64 + rank, big).amin(dim=2)
    key = torch.cat([key_a, key_b], dim=1)
    has = key != big
    target = torch.where(has, key % 64, 0) + torch.tensor(
        [SIDE_UNITS] * SIDE_UNITS + [0] * SIDE_UNITS, device=key.device, dtype=torch.int32
    )
    return target.long(), torch.where(has, key // 64, -1)


def _tick(s: _State, mult: torch.Tensor) -> None:
    alive = s.alive
    s.energy += s.speed * alive
    target, dist = _targets(s)
    ready = alive & (dist >= 0) & (s.energy >= ACTION_COST)
    attack = ready & (dist <= s.range)
    t_type, t_def = s.type.gather(1, target), s.defence.gather(1, target)
    raw = torch.div(s.atk * mult[s.type.long(), t_type.long()], 4, rounding_mode="floor") - t_def
    damage = torch.zeros_like(s.hp).scatter_add_(1, target, raw.clamp(min=1) * attack)
    # steps: one square towards the target, onto a square free at the tick's start
    move = ready & ~attack
    to_row = s.row + torch.sign(s.row.gather(1, target) - s.row)
    to_col = s.col + torch.sign(s.col.gather(1, target) - s.col)
    dest = (to_row * GRID_COLS + to_col).long()
    cells = GRID_ROWS * GRID_COLS
    fights = s.hp.shape[0]
    here = (s.row * GRID_COLS + s.col).long()
    occupied = torch.zeros(fights, cells + 1, dtype=torch.bool, device=dest.device)
    occupied.scatter_(1, torch.where(alive, here, cells), True)  # cell `cells`: the dead
    unit = torch.arange(FIGHT_UNITS, device=dest.device).expand(fights, -1)
    claim = torch.full((fights, cells + 1), FIGHT_UNITS, dtype=torch.long, device=dest.device)
    claim.scatter_reduce_(1, torch.where(move, dest, cells), unit, reduce="amin")
    moved = move & ~occupied.gather(1, dest) & (claim.gather(1, dest) == unit)
    s.row = torch.where(moved, to_row, s.row)
    s.col = torch.where(moved, to_col, s.col)
    s.energy -= ACTION_COST * (attack | moved)
    s.hp = (s.hp - damage).clamp(min=0)
    s.alive = alive & (s.hp > 0)


def _sides_alive(alive: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return alive[:, :SIDE_UNITS].any(1), alive[:, SIDE_UNITS:].any(1)


@torch.no_grad()
def simulate(
    units: torch.Tensor, *, max_ticks: int = MAX_TICKS, compact_every: int = 8
) -> FightResult:
    """Fight every row of ``units`` ([F, 32, 9] int32, the layout of combat.ts) to the end."""
    if units.ndim != 3 or tuple(units.shape[1:]) != (FIGHT_UNITS, UNIT_FIELDS):
        raise ValueError(
            f"units has shape {tuple(units.shape)}; expected [fights, {FIGHT_UNITS}, {UNIT_FIELDS}]"
        )
    fights, device = units.shape[0], units.device
    out = FightResult(
        winner=torch.full((fights,), DRAW, dtype=torch.int32, device=device),
        ticks=torch.zeros(fights, dtype=torch.int32, device=device),
        hp=units[..., HP].to(torch.int32).clone(),
        row=units[..., ROW].to(torch.int32).clone(),
        col=units[..., COL].to(torch.int32).clone(),
    )
    s = _State(units)
    mult = type_multiplier4(device)
    for tick in range(max_ticks + 1):
        a, b = _sides_alive(s.alive)
        running = a & b
        if tick % compact_every == 0 or tick == max_ticks:
            finished = ~running if tick < max_ticks else torch.ones_like(running)
            if finished.any():
                _write(out, s, finished, a, b)
                s.keep(~finished)
                running = running[~finished]
            if s.index.numel() == 0:
                break
        if tick == max_ticks:
            break
        # a finished fight still in the working set stays as it is: no unit has a living target
        s.ticks += running
        _tick(s, mult)
    return out


def _write(out: FightResult, s: _State, rows: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> None:
    idx = s.index[rows]
    winner = torch.full_like(idx, DRAW, dtype=torch.int32)
    winner[(a & ~b)[rows]] = WIN_A
    winner[(b & ~a)[rows]] = WIN_B
    out.winner[idx] = winner
    out.ticks[idx] = s.ticks[rows]
    out.hp[idx], out.row[idx], out.col[idx] = s.hp[rows], s.row[rows], s.col[rows]
