"""Mahjong in a real browser: a review page of an engine game stepped through, and the play page
against a checkpoint (one human seat, the policy across the table, rule bots): a discard by
clicking a hand tile, refused moves, hidden hands, and the finished game's MJAI log. Hands and
rivers on the page are checked against the engine's own (``Game.hand`` / ``Game.discards``)."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from meeple.play import build_server
from meeple.viewer.page import write_replay
from meeple_mahjong.mjai import PASS
from meeple_mahjong.policy import load_policy_heads
from meeple_mahjong.replay import games_of, review_game
from meeple_mahjong.viewer import renderer
from meeple_native import mahjong as _mj
from tests.browser.checkpoints import mahjong_checkpoint
from tests.browser.driver import serving
from tests.browser.pages import attributes, fetch_text, post_from_page, step_index, wait_until

pytestmark = pytest.mark.browser


def tiles(driver, selector: str) -> list[str]:
    return [t["data-tile"] for t in attributes(driver, f"{selector} [data-tile]", "data-tile")]


def engine_game(seed: int) -> list[str]:
    """An east-only game of four rule bots as the engine logs it (MJAI lines)."""
    game = _mj.Game(east_only=True)
    game.reset(seed, 0)
    _mj.play_bots(game, ["rule"] * 4, seed)
    return list(game.events(0))


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return mahjong_checkpoint(tmp_path_factory.mktemp("mahjong") / "tiny.pt")


def test_a_review_page_shows_each_steps_table(chrome, tmp_path, checkpoint):
    heads, _ = load_policy_heads(checkpoint)
    (game,) = games_of(engine_game(5))
    replay = review_game(game, heads, [1], rules={"east_only": True}, title="review of seat 1")
    chrome.get(write_replay(tmp_path / "review.html", replay, with_renderer=renderer()).as_uri())
    n = len(replay.steps)
    assert step_index(chrome) == (1, n)
    summary = chrome.find_element("css selector", "table.summary").text  # the agreement statistics
    assert replay.summary and all(f"{k.strip()} {v}" in summary for k, v in replay.summary.items())
    slider = chrome.find_element("id", "slider")
    for i in (1, 2, 40, n // 2, n - 1):  # the slider jumps; #next steps one
        chrome.execute_script("arguments[0].value = arguments[1]; arguments[0].dispatchEvent(new Event('input'))",
                              slider, i)  # fmt: skip
        chrome.find_element("id", "next").click()
        assert step_index(chrome) == (i + 1, n)
        state = replay.steps[i].state
        for seat in range(4):
            drawn = [state["drawn"][seat]] if state["drawn"][seat] else []
            assert tiles(chrome, f'.hand[data-seat="{seat}"]') == state["hands"][seat] + drawn, (i, seat)
            assert tiles(chrome, f'.river[data-seat="{seat}"]') == [d["pai"] for d in state["rivers"][seat]]
    final = replay.steps[-1].state
    assert final["scores"] == replay.result["scores"]


def engine_hand(engine, seat: int) -> Counter:
    return Counter(_mj.tile_to_mjai(t) for t in engine.hand(seat))


def test_playing_a_checkpoint_a_discard_refusals_and_the_log(chrome, checkpoint, source_plugins):
    server = build_server(str(checkpoint), seed=2)  # the game from the checkpoint: env.backend
    engine = server.session.engine
    with serving(server):
        chrome.get(server.url)
        wait_until(chrome, lambda d: d.find_element("id", "status").text == "Your move", "your turn")
        mine = tiles(chrome, '.hand[data-seat="0"]')
        assert Counter(mine) == engine_hand(engine, 0) and len(mine) == 14  # the dealer's first draw
        for seat in (1, 2, 3):  # the others' tiles are backs
            assert set(tiles(chrome, f'.hand[data-seat="{seat}"]')) == {"?"}

        events = engine.event_count
        for body in (json.dumps({"action": str(PASS)}), '{"action": "-1"}', '{"action": "1e3"}', "null"):
            answer = post_from_page(chrome, "/api/move", body)
            assert answer["status"] == 400 and "\n" not in answer["data"]["error"], body
        assert engine.event_count == events

        legal = chrome.find_elements("css selector", '.hand[data-seat="0"] .tile.legal')
        assert legal and {t.get_attribute("data-action") for t in legal} <= {m["id"] for m in server.session.legal()}
        discard = legal[0].get_attribute("data-tile")
        legal[0].click()
        wait_until(chrome, lambda d: tiles(d, '.river[data-seat="0"]')[:1] == [discard], "your discard in your river")
        wait_until(chrome, lambda d: d.find_element("id", "status").text in ("Your move", "Game over"), "your turn")
        for seat in range(4):
            river = [_mj.tile_to_mjai(t) for t in engine.discards(seat)]
            assert tiles(chrome, f'.river[data-seat="{seat}"]') == river, seat

        with server.lock:  # the rest of the game from here, as the page would play it
            session = server.session
            while not session.finished:
                session.play(session.legal()[0]["id"])
                session.advance()
        chrome.refresh()
        status = wait_until(chrome, lambda d: "Game over" in (t := d.find_element("id", "status").text) and t,
                            "the end of the game")
        assert "you placed" in status and chrome.find_element("id", "download").is_displayed()
        assert tiles(chrome, '.hand[data-seat="2"]') != [] and "?" not in tiles(chrome, ".hand")  # all shown now
        log = fetch_text(chrome, "/api/log")
        assert log["disposition"] == 'attachment; filename="mahjong.mjson"'
        lines = [json.loads(line) for line in log["text"].splitlines()]
        assert lines[0]["names"] == ["you", "rule", "agent", "rule"] and lines[-1]["type"] == "end_game"
        assert lines[-1]["scores"] == list(engine.scores)
