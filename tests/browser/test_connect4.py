"""Connect Four in a real browser: a replay page stepped through, and the play page against a
checkpoint (a legal move, moves the page and the server refuse, the finished game's log).
The board the page shows is checked against stones dropped by hand from the engine's moves."""

from __future__ import annotations

import json
import time

import pytest

from meeple.play import build_server
from meeple.viewer.page import write_replay
from meeple.viewer.play_server import PlayServer
from meeple_connect4.arena import MCTSPlayer
from meeple_connect4.play import Connect4Session
from meeple_connect4.replay import record_game, renderer
from tests.browser.checkpoints import alphazero_checkpoint
from tests.browser.driver import serving
from tests.browser.pages import attributes, fetch_text, post_from_page, step_index, wait_until

pytestmark = pytest.mark.browser
ROWS, COLS = 6, 7


def dropped(moves: list[int]) -> list[list[int]]:
    """The grid (top row first) after ``moves``: stones 1, 2, 1, ... fall to the lowest empty row."""
    grid = [[0] * COLS for _ in range(ROWS)]
    for i, col in enumerate(moves):
        row = max(r for r in range(ROWS) if grid[r][col] == 0)
        grid[row][col] = i % 2 + 1
    return grid


def page_grid(driver) -> list[list[int]]:
    grid = [[-1] * COLS for _ in range(ROWS)]
    for cell in attributes(driver, "#board [data-row][data-piece]", "data-row", "data-col", "data-piece"):
        grid[int(cell["data-row"])][int(cell["data-col"])] = int(cell["data-piece"])
    return grid


def playable_columns(driver) -> list[str]:
    """The columns the page lets a click play (the renderer's input hook marks their heads)."""
    return [h["data-col"] for h in attributes(driver, "#board .c4-head.playable", "data-col")]


def click(driver, selector: str) -> None:
    driver.find_element("css selector", selector).click()


def test_a_replay_page_steps_through_the_engine_positions(chrome, tmp_path):
    players = [MCTSPlayer("uniform", num_simulations=8, leaves_in_flight=1, seed=s) for s in (1, 2)]
    replay = record_game(players, ["first", "second"], "uniform vs uniform")
    moves = [int(step.action) - 1 for step in replay.steps if step.action]
    page = write_replay(tmp_path / "c4.html", replay, with_renderer=renderer())
    chrome.get(page.as_uri())
    n = len(replay.steps)
    assert step_index(chrome) == (1, n) and page_grid(chrome) == dropped([])
    for i in range(1, min(n, 9)):
        click(chrome, "#next")
        assert step_index(chrome) == (i + 1, n)
        assert page_grid(chrome) == dropped(moves[:i]), f"after move {i}"
        step = replay.steps[i]
        if step.action:  # the decision panel: the move played and the search's top moves
            panel = chrome.find_element("id", "decision").text
            assert f"played: {step.action}" in panel and "visits" in panel
    click(chrome, "#last")
    assert step_index(chrome) == (n, n) and page_grid(chrome) == dropped(moves)
    chrome.find_element("tag name", "body").send_keys("\ue012")  # ArrowLeft
    assert step_index(chrome) == (n - 1, n) and page_grid(chrome) == dropped(moves[:-1])


def test_playing_a_checkpoint_a_legal_move_and_refused_ones(chrome, tmp_path, source_plugins):
    ckpt = alphazero_checkpoint("connect4", tmp_path / "c4.pt")
    server = build_server(str(ckpt), seed=0, opts={"simulations": 8})  # the game from the checkpoint
    with serving(server):
        chrome.get(server.url)
        wait_until(chrome, lambda d: d.find_element("id", "status").text == "Your move", "your turn")
        assert page_grid(chrome) == dropped([])
        assert playable_columns(chrome) == list("0123456")
        click(chrome, '#board .c4-head[data-col="3"]')
        wait_until(chrome, lambda d: sum(map(sum, page_grid(d))) == 3, "your stone and the agent's")
        moves = list(server.session.moves)
        assert moves[0] == 3 and len(moves) == 2 and page_grid(chrome) == dropped(moves)
        assert "played: " in chrome.find_element("id", "decision").text  # the agent's search

        for body in ('{"action": "7"}', '{"action": "x"}', '{"action": 3}', "[", ""):
            answer = post_from_page(chrome, "/api/move", body)
            assert answer["status"] == 400 and "\n" not in answer["data"]["error"], body
        assert server.session.moves == moves and page_grid(chrome) == dropped(moves)


def fixed_server(opening: list[int]) -> PlayServer:
    """A game from ``opening`` against a uniform-prior search (no checkpoint needed)."""
    def new_session(seed: int) -> Connect4Session:
        player = MCTSPlayer("uniform", num_simulations=8, leaves_in_flight=1, seed=seed)
        return Connect4Session(player, opening=opening)

    return PlayServer(new_session, "connect4", renderer())


def test_a_full_column_cannot_be_played_from_the_page_nor_posted(chrome):
    opening = [0] * ROWS  # column 1 full, no four in a row, the first player to move
    with serving(fixed_server(opening)) as server:
        chrome.get(server.url)
        wait_until(chrome, lambda d: d.find_element("id", "status").text == "Your move", "your turn")
        assert page_grid(chrome) == dropped(opening)
        assert playable_columns(chrome) == list("123456")  # the renderer's input hook skips column 1
        click(chrome, '#board .c4-head[data-col="0"]')  # no handler: nothing is sent
        time.sleep(0.3)
        answer = post_from_page(chrome, "/api/move", json.dumps({"action": "0"}))
        assert answer["status"] == 400 and "not legal" in answer["data"]["error"]
        assert server.session.moves == opening and page_grid(chrome) == dropped(opening)


def test_a_won_game_ends_and_downloads_its_moves(chrome):
    opening = [0, 1, 0, 1, 0, 1]  # three of the first player's stones stacked in column 1
    with serving(fixed_server(opening)) as server:
        chrome.get(server.url)
        wait_until(chrome, lambda d: d.find_element("id", "status").text == "Your move", "your turn")
        assert not chrome.find_element("id", "download").is_displayed()
        click(chrome, '#board .c4-head[data-col="0"]')
        status = wait_until(chrome, lambda d: "Game over" in (t := d.find_element("id", "status").text) and t,
                            "the end of the game")
        assert "you won" in status and page_grid(chrome) == dropped([*opening, 0])
        assert chrome.find_element("id", "download").is_displayed()
        log = fetch_text(chrome, "/api/log")
        assert log["status"] == 200 and log["disposition"] == 'attachment; filename="connect4.txt"'
        assert log["text"] == "1212121\n"
