"""SAN and PGN of meeple_native.chess games against python-chess (the peer): every move of random
games (castling, en passant, promotions, disambiguation, checks and mates come up), and the PGN
read back to the same final position."""

from __future__ import annotations

import io
import random

import chess
import chess.pgn

from meeple_chess.notation import pgn, san
from meeple_native.chess import Board


def random_game(seed: int) -> tuple[Board, chess.Board, list[str]]:
    rng = random.Random(seed)
    board, peer, moves = Board(), chess.Board(), []
    while not board.is_game_over():
        actions = board.legal_actions()
        action = int(actions[rng.randrange(len(actions))])
        uci = board.action_to_uci(action)
        mine, theirs = san(board, action), peer.san(chess.Move.from_uci(uci))
        assert mine == theirs, (board.fen(), uci)
        moves.append(mine)
        board.push_action(action)
        peer.push_uci(uci)
    return board, peer, moves


def test_san_matches_python_chess_on_random_games():
    kinds = set()
    for seed in range(40):
        _, _, moves = random_game(seed)
        kinds |= {k for k, hit in {"O-O": any(m.startswith("O-O") for m in moves), "=": any("=" in m for m in moves),
                                   "#": any(m.endswith("#") for m in moves),
                                   "disambiguated": any(len(m.rstrip("+#")) == 4 and m[0] in "NBRQ" and m[1] != "x"
                                                        for m in moves)}.items() if hit}  # fmt: skip
    assert kinds == {"O-O", "=", "#", "disambiguated"}  # the random games reached each case


def test_pgn_reads_back_to_the_final_position():
    board, peer, moves = random_game(3)
    text = pgn(moves, board.result(), {"White": "you", "Black": 'agent "x"'})
    game = chess.pgn.read_game(io.StringIO(text))
    assert not game.errors and game.end().board().fen() == peer.fen()
    assert game.headers["Result"] == board.result() and game.headers["White"] == "you"
    assert game.headers["Black"] == "agent x"  # quotes cannot break a tag
    assert all(len(line) <= 80 for line in text.splitlines())
