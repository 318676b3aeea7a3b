"""Chess in a real browser: a replay page stepped through, and the play page against a checkpoint
(a move by clicks, moves the page and the server refuse, a mate that ends the game, its PGN).
The squares the page shows are checked against the engine's board (its FEN)."""

from __future__ import annotations

import time

import pytest

from meeple.play import build_server
from meeple.viewer.page import write_replay
from meeple.viewer.play_server import PlayServer
from meeple_chess.arena import MCTSPlayer
from meeple_chess.notation import piece_map
from meeple_chess.play import ChessSession
from meeple_chess.replay import record_game, renderer
from meeple_native.chess import Board
from tests.browser.checkpoints import alphazero_checkpoint
from tests.browser.driver import serving
from tests.browser.pages import attributes, fetch_text, post_from_page, step_index, wait_until

pytestmark = pytest.mark.browser


def page_pieces(driver) -> dict[str, str]:
    squares = attributes(driver, "#board [data-square]", "data-square", "data-piece")
    assert len(squares) == 64
    return {s["data-square"]: s["data-piece"] for s in squares if s["data-piece"]}


def board_after(ucis: list[str]) -> Board:
    board = Board()
    for uci in ucis:
        board.push(uci)
    return board


def click_square(driver, name: str) -> None:
    driver.find_element("css selector", f'#board [data-square="{name}"]').click()


def test_a_replay_page_steps_through_the_engine_positions(chrome, tmp_path):
    players = [MCTSPlayer("uniform", num_simulations=4, leaves_in_flight=1, seed=s) for s in (1, 2)]
    replay = record_game(players, ["white", "black"], "uniform vs uniform", max_plies=10)
    moves = [step.action for step in replay.steps if step.action]
    chrome.get(write_replay(tmp_path / "chess.html", replay, with_renderer=renderer()).as_uri())
    n = len(replay.steps)
    assert step_index(chrome) == (1, n) and page_pieces(chrome) == piece_map(Board())
    for i in range(1, n):
        chrome.find_element("id", "next").click()
        assert step_index(chrome) == (i + 1, n)
        assert page_pieces(chrome) == piece_map(board_after(moves[:i])), f"after {moves[:i]}"
    chrome.find_element("id", "first").click()
    assert step_index(chrome) == (1, n) and page_pieces(chrome) == piece_map(Board())


def test_playing_a_checkpoint_by_clicks_and_refused_moves(chrome, tmp_path, source_plugins):
    ckpt = alphazero_checkpoint("chess", tmp_path / "chess.pt")
    server = build_server(str(ckpt), seed=0, opts={"simulations": 4})
    with serving(server):
        chrome.get(server.url)
        wait_until(chrome, lambda d: d.find_element("id", "status").text == "Your move", "your turn")
        assert page_pieces(chrome) == piece_map(Board())
        click_square(chrome, "a1")  # a rook with no move: not selectable
        click_square(chrome, "a3")
        time.sleep(0.3)
        assert server.session.uci == []
        click_square(chrome, "e2")
        click_square(chrome, "e4")
        wait_until(chrome, lambda d: len(server.session.uci) == 2 and page_pieces(d) == piece_map(board_after(server.session.uci)),
                   "your move and the agent's")  # fmt: skip
        assert server.session.uci[0] == "e2e4"
        agent = server.last[-1]  # the reply's decision: the move played is listed and highlighted
        assert agent["action"] == server.session.uci[1] and agent["decision"]["top"]
        chosen = attributes(chrome, "#decision tr.chosen", "data-action")
        assert chosen == [{"data-action": agent["action"]}]
        for body in ('{"action": "e4e6"}', '{"action": "e2e4"}', '{"action": 796}', "{"):
            answer = post_from_page(chrome, "/api/move", body)
            assert answer["status"] == 400 and "\n" not in answer["data"]["error"], body
        assert len(server.session.uci) == 2
        log = fetch_text(chrome, "/api/log")
        assert log["disposition"] == 'attachment; filename="chess.pgn"'
        assert '[Result "*"]' in log["text"] and "1. e4 " in log["text"]


def test_a_mate_ends_the_game_and_downloads_its_pgn(chrome):
    opening = ["f2f3", "e7e5", "g2g4"]  # the fool's mate, black (the human) to play Qh4#
    board, actions = Board(), []
    for uci in opening:
        actions.append(board.uci_to_action(uci))
        board.push(uci)

    def new_session(seed: int) -> ChessSession:
        return ChessSession(MCTSPlayer("uniform", num_simulations=4, leaves_in_flight=1, seed=seed),
                            human_seat=1, opening=actions)

    with serving(PlayServer(new_session, "chess", renderer())) as server:
        chrome.get(server.url)
        wait_until(chrome, lambda d: d.find_element("id", "status").text == "Your move", "your turn")
        click_square(chrome, "d8")
        click_square(chrome, "h4")
        status = wait_until(chrome, lambda d: "Game over" in (t := d.find_element("id", "status").text) and t,
                            "the end of the game")
        assert "0-1 by checkmate" in status and "you won" in status
        assert chrome.find_element("id", "download").is_displayed()
        log = fetch_text(chrome, "/api/log")["text"]
        assert '[Black "you"]' in log and log.rstrip().endswith("1. f3 e5 2. g4 Qh4# 0-1")
