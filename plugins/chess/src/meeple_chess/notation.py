"""Standard Algebraic Notation and PGN for ``meeple_native.chess`` games (the engine speaks UCI
and policy indices). SAN follows the PGN standard: piece letter, the origin's file, rank or both
only when another piece of that kind could reach the same square, ``x`` for captures (en passant
included), ``=Q`` promotions, ``O-O`` / ``O-O-O``, ``+`` check and ``#`` mate.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence

from meeple_native.chess import Board

FILES = "abcdefgh"


def piece_map(board: Board) -> dict[str, str]:
    """Square name -> FEN letter (upper case white) of every piece on the board."""
    at = {}
    for i, row in enumerate(board.fen().split()[0].split("/")):
        file = 0
        for ch in row:
            if ch.isdigit():
                file += int(ch)
            else:
                at[f"{FILES[file]}{8 - i}"] = ch
                file += 1
    return at


def san(board: Board, action: int) -> str:
    """The SAN of legal ``action`` on ``board`` (before it is played)."""
    uci = board.action_to_uci(action)
    origin, target, promotion = uci[:2], uci[2:4], uci[4:]
    at = piece_map(board)
    piece = at[origin].upper()
    if piece == "K" and abs(FILES.index(origin[0]) - FILES.index(target[0])) == 2:
        text = "O-O" if target[0] > origin[0] else "O-O-O"
    elif piece == "P":
        capture = origin[0] != target[0]  # a pawn changes file only by capturing (en passant too)
        text = (f"{origin[0]}x" if capture else "") + target + (f"={promotion.upper()}" if promotion else "")
    else:
        rivals = [m[:2] for m in board.legal_moves()
                  if m[2:4] == target and m[:2] != origin and at[m[:2]].upper() == piece]
        if not rivals:
            where = ""
        elif all(r[0] != origin[0] for r in rivals):
            where = origin[0]
        elif all(r[1] != origin[1] for r in rivals):
            where = origin[1]
        else:
            where = origin
        text = piece + where + ("x" if target in at else "") + target
    after = board.copy()
    after.push_action(action)
    return text + ("#" if after.is_checkmate() else "+" if after.is_check() else "")


def pgn(moves: Sequence[str], result: str, headers: Mapping[str, str]) -> str:
    """A PGN game of SAN ``moves`` from the initial position; ``result`` "1-0", "0-1", "1/2-1/2"
    or "*" (unfinished). The Seven Tag Roster comes first, ``headers`` filling it."""
    tags = {"Event": "?", "Site": "?", "Date": datetime.date.today().strftime("%Y.%m.%d"), "Round": "-",
            "White": "?", "Black": "?", **headers, "Result": result}
    lines = [f'[{k} "{str(v).replace(chr(92), "").replace(chr(34), "")}"]' for k, v in tags.items()]
    tokens = [f"{i // 2 + 1}. {m}" if i % 2 == 0 else m for i, m in enumerate(moves)] + [result]
    text, line = [], ""
    for token in tokens:  # export format: lines of at most 80 characters
        if line and len(line) + 1 + len(token) > 80:
            text.append(line)
            line = token
        else:
            line = f"{line} {token}" if line else token
    return "\n".join([*lines, "", *text, line]) + "\n"
