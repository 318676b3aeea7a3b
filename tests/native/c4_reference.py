"""Independent pure-Python Connect Four reference for the native tests.

Plain 6x7 grid, full-board scans for wins: deliberately nothing like the
bitboards it checks.
"""

from __future__ import annotations

import random

import numpy as np

ROWS, COLS = 6, 7

# Every line of four cells on the board: 24 horizontal, 21 vertical, 2 x 12 diagonal.
WINDOWS = [
    tuple((h + k * dh, c + k * dc) for k in range(4))
    for h in range(ROWS)
    for c in range(COLS)
    for dh, dc in ((0, 1), (1, 0), (1, 1), (1, -1))
    if 0 <= h + 3 * dh < ROWS and 0 <= c + 3 * dc < COLS
]
assert len(WINDOWS) == 69


class RefConnect4:
    def __init__(self) -> None:
        # grid[h][c]: h = 0 is the bottom row; 0 empty, 1 first player, 2 second player
        self.grid = [[0] * COLS for _ in range(ROWS)]
        self.n = 0
        self.won_by: int | None = None  # 0 first player, 1 second player

    def copy(self) -> RefConnect4:
        r = RefConnect4()
        r.grid = [row[:] for row in self.grid]
        r.n, r.won_by = self.n, self.won_by
        return r

    @property
    def to_play(self) -> int:
        return self.n % 2

    def height(self, c: int) -> int:
        return sum(1 for h in range(ROWS) if self.grid[h][c])

    def is_terminal(self) -> bool:
        return self.won_by is not None or self.n == ROWS * COLS

    def legal_moves(self) -> list[int]:
        if self.is_terminal():
            return []
        return [c for c in range(COLS) if self.grid[ROWS - 1][c] == 0]

    def play(self, c: int) -> None:
        assert c in self.legal_moves()
        h = self.height(c)
        self.grid[h][c] = 1 + self.n % 2
        self.n += 1
        w = self.four_in_a_row()
        if w:
            self.won_by = w - 1

    def four_in_a_row(self) -> int:
        """1 or 2 if that player has four in a row anywhere, else 0 (full scan)."""
        g = self.grid
        for window in WINDOWS:
            (h0, c0), (h1, c1), (h2, c2), (h3, c3) = window
            p = g[h0][c0]
            if p and p == g[h1][c1] == g[h2][c2] == g[h3][c3]:
                return p
        return 0

    def wins_now(self, c: int) -> bool:
        r = self.copy()
        r.play(c)
        return r.won_by is not None

    def board(self) -> tuple:
        return tuple(tuple(row) for row in self.grid)

    def planes(self) -> np.ndarray:
        """(3, 6, 7): own stones, opponent stones, ones; row 0 = top row."""
        me, opp = 1 + self.n % 2, 2 - self.n % 2
        out = np.zeros((3, ROWS, COLS), np.float32)
        for h in range(ROWS):
            for c in range(COLS):
                out[0, ROWS - 1 - h, c] = self.grid[h][c] == me
                out[1, ROWS - 1 - h, c] = self.grid[h][c] == opp
        out[2] = 1.0
        return out

    def negamax(self) -> int:
        """Exact score in Pons' convention by brute force (only for nearly full boards)."""
        if self.won_by is not None:
            return -(22 - (self.n + 1) // 2)
        if self.n == ROWS * COLS:
            return 0
        best = -99
        for c in self.legal_moves():
            r = self.copy()
            r.play(c)
            best = max(best, -r.negamax())
        return best


def random_game(rng: random.Random, avoid_wins: bool = False) -> list[int]:
    """Column list of a finished random game; with avoid_wins, players avoid
    completing a four when another move exists (many games then fill the board)."""
    r = RefConnect4()
    moves: list[int] = []
    while not r.is_terminal():
        legal = r.legal_moves()
        if avoid_wins:
            quiet = [c for c in legal if not r.wins_now(c)]
            legal = quiet or legal
        c = rng.choice(legal)
        r.play(c)
        moves.append(c)
    return moves
