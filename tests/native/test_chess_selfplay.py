"""Chess on the generic self-play engine (GameTraits<chess::Game>), with a Python evaluator.

The games are replayed with python-chess: every move must be legal there, and the way each
game ended must be what python-chess says about the final position.
"""

from __future__ import annotations

import numpy as np
import pytest

chess = pytest.importorskip("chess")
native = pytest.importorskip("meeple_native.chess")


def _uniform(calls: list[int]):
    def evaluator(planes: np.ndarray, legal: np.ndarray):
        assert planes.shape[1:] == (119, 8, 8) and planes.dtype == np.float32
        assert legal.shape == (planes.shape[0], 4672) and legal.dtype == np.bool_
        assert legal.any(axis=1).all()  # only positions with moves are evaluated
        calls.append(planes.shape[0])
        return np.zeros(legal.shape, np.float32), np.zeros(planes.shape[0], np.float32)

    return evaluator


def _final_state(board: chess.Board) -> str | None:
    if board.is_checkmate():
        return "checkmate"
    if board.is_insufficient_material():
        return "insufficient_material"
    if board.is_stalemate():
        return "stalemate"
    if board.is_fifty_moves():
        return "fifty_moves"
    if board.is_repetition(3):
        return "threefold_repetition"
    return None


def test_selfplay_plays_legal_complete_games_with_a_python_evaluator() -> None:
    calls: list[int] = []
    sp = native.SelfPlay(_uniform(calls), num_simulations=8, num_workers=1, games_per_worker=2,
                         leaves_per_game=2, batch_size=8, temperature_moves=400, seed=3)
    out = sp.run(2)
    assert len(out["moves"]) == 2 and calls
    n = out["planes"].shape[0]
    assert n == sum(len(m) for m in out["moves"]) > 0
    assert out["planes"].shape == (n, 119, 8, 8) and out["policy"].shape == (n, 4672)
    # visit distributions: sum to one, only on legal moves
    assert np.allclose(out["policy"].sum(axis=1), 1.0)
    assert not (out["policy"] > 0)[~out["legal"]].any()
    start = np.zeros((119, 8, 8), np.float32)
    native.Board().encode(start)
    for g, (moves, termination, winner) in enumerate(
            zip(out["moves"], out["termination"], out["winner"], strict=True)):
        rows = np.flatnonzero(out["game"] == g)
        np.testing.assert_array_equal(out["planes"][rows[0]], start)
        board, ours = chess.Board(), native.Board()
        for i, uci in enumerate(moves):
            move = chess.Move.from_uci(uci)
            assert move in board.legal_moves, (board.fen(), uci)
            mask = np.zeros(4672, bool)
            ours.legal_mask(mask)
            np.testing.assert_array_equal(out["legal"][rows[i]], mask)
            board.push(move)
            ours.push(uci)
        assert termination == _final_state(board) is not None
        # winner: 0 white, 1 black, -1 draw; values from the mover's view
        expected_winner = (1 if board.turn == chess.WHITE else 0) if termination == "checkmate" else -1
        assert winner == expected_winner
        movers = np.arange(len(moves)) % 2
        values = out["value"][rows]
        if winner < 0:
            assert np.all(values == 0)
        else:
            assert np.all(values == np.where(movers == winner, 1.0, -1.0))
    metrics = out["metrics"]
    assert metrics["games"] == 2 and metrics["positions"] == n and metrics["evaluations"] == sum(calls)


def test_selfplay_builtin_uniform_is_deterministic() -> None:
    kwargs = dict(num_simulations=4, num_workers=1, games_per_worker=1, temperature_moves=400, seed=9)
    a = native.SelfPlay(None, **kwargs).run(1)
    b = native.SelfPlay("uniform", **kwargs).run(1)
    assert a["moves"] == b["moves"] and a["termination"] == b["termination"]


@pytest.mark.parametrize("evaluator", [None, "rollout", "callable"])
def test_mcts_finds_a_mate_in_one(evaluator) -> None:
    fen = "6k1/5ppp/8/8/8/8/8/R5K1 w - - 0 1"  # back-rank mate: Ra8#
    reference = chess.Board(fen)
    reference.push_uci("a1a8")
    assert reference.is_checkmate()
    calls: list[int] = []
    ev = _uniform(calls) if evaluator == "callable" else evaluator
    search = native.MCTS(num_simulations=300, leaves_in_flight=4, seed=1)
    out = search.search(native.Board(fen), ev)
    assert out["best_move"] == "a1a8" and out["q"][out["best_action"]] == pytest.approx(1.0)
    assert out["simulations"] == 300 and out["visits"].sum() == 300
    assert (evaluator == "callable") == bool(calls)
    board = native.Board(fen)
    board.push_action(search.choose_action(0.0))
    assert board.termination() == "checkmate" and board.result() == "1-0"


def test_close_stops_a_running_selfplay_from_another_thread() -> None:
    import threading
    import time

    started = threading.Event()

    def slow(planes, legal):
        started.set()
        time.sleep(0.002)
        return np.zeros(legal.shape, np.float32), np.zeros(planes.shape[0], np.float32)

    results: list[dict] = []
    with native.SelfPlay(slow, num_simulations=64, games_per_worker=2, batch_size=4) as sp:
        runner = threading.Thread(target=lambda: results.append(sp.run(1000)))
        runner.start()
        assert started.wait(10)
        sp.close()  # returns only once run() has returned
        assert not sp.running
        runner.join(10)
    assert results and results[0]["metrics"]["stopped"] and len(results[0]["moves"]) < 1000
    assert sp.metrics["stopped"] and sp.metrics["batch_size"] == 4
    with pytest.raises(RuntimeError, match="closed"):
        sp.run(1)


def test_planes_buffers_are_the_callers_arrays() -> None:
    a, b = np.zeros((4, 119, 8, 8), np.float32), np.zeros((4, 119, 8, 8), np.float32)
    seen: list[bool] = []

    def evaluator(planes, legal):
        seen.append(np.shares_memory(planes, a) or np.shares_memory(planes, b))
        assert planes[:, 112:113].min() >= 0 and planes[:, :12].sum() > 0  # real positions
        return np.zeros(legal.shape, np.float32), np.zeros(planes.shape[0], np.float32)

    out = native.SelfPlay(evaluator, num_simulations=4, batch_size=4, planes_buffers=(a, b)).run(1)
    assert seen and all(seen) and len(out["moves"]) == 1
    with pytest.raises(ValueError, match="shape"):
        native.SelfPlay(None, batch_size=4, planes_buffers=(a[:2], b))
