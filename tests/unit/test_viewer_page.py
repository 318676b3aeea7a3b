"""The replay page: self-contained (nothing fetched), its JSON survives any string, atomic writes."""

from __future__ import annotations

import json
import re

import pytest

from meeple.errors import MeepleError
from meeple.viewer.artifacts import save_replays, slug
from meeple.viewer.page import json_for_script, read_replay, replay_html, write_replay
from meeple.viewer.renderers import Renderer
from meeple.viewer.replay import Choice, Decision, Replay, Step

TOY = Renderer("toy", "window.meepleRenderers = window.meepleRenderers || {}; "
               "window.meepleRenderers.toy = {draw: function (b, s) { b.textContent = s.n; }}; // </Script> in a comment",
               ".cell { color: red } /* </style> */")


def replay(note: str = "", steps: int = 3) -> Replay:
    return Replay("toy", "toy game <1>", ["agent", "bot"], [
        Step({"n": i}, actor=i % 2, action=f"move{i}" if i < steps - 1 else None, note=note,
             decision=Decision([Choice(f"move{i}", 0.75, 30), Choice("other", 0.25, 10)], value=0.5),
             marks=["win"] if i == steps - 1 else [])
        for i in range(steps)], meta={"seed": 1}, result={"winner": "agent"}, summary={"agreement": 0.5})


def embedded(page: str) -> str:
    return re.search(r'<script type="application/json" id="replay">(.*?)</script>', page, re.S).group(1)


def test_json_round_trip():
    original = replay()
    assert Replay.from_json(json.loads(json.dumps(original.to_json()))) == original


def test_from_json_names_what_is_missing():
    with pytest.raises(MeepleError, match="not a replay: missing or mistyped 'steps'; accepted: .*Replay.to_json"):
        Replay.from_json({"game": "toy", "title": "t", "players": []})


def test_page_is_self_contained():
    page = replay_html(replay(), with_renderer=TOY)
    assert not re.search(r"""(src|href)\s*=\s*["']?\s*(https?:|//)""", page, re.I)
    assert "http://" not in page and "https://" not in page
    assert "<link" not in page and "@import" not in page and "url(" not in page
    assert "default-src 'none'" in page  # the CSP refuses any request the page might make
    for must in ('id="viewer"', "meepleRenderers.toy", ".cell { color: red }", "function mount("):
        assert must in page
    assert "<title>toy game &lt;1&gt;</title>" in page


def test_a_string_cannot_close_the_json_script():
    evil = "</script><script>alert(1)</script><!--"
    page = replay_html(replay(note=evil), with_renderer=TOY)
    body = embedded(page)
    assert "<" not in body  # every < escaped: no </script>, no <!--
    assert Replay.from_json(json.loads(body)).steps[0].note == evil
    # the renderer's own source cannot end its element either, and each element ends once
    assert page.lower().count("</script>") == 3 and page.lower().count("</style>") == 2
    assert json.loads(json_for_script({"a": "</"})) == {"a": "</"}


def test_write_is_atomic_and_reads_back(tmp_path, monkeypatch):
    path = write_replay(tmp_path / "sub" / "game.html", replay(), with_renderer=TOY)
    assert read_replay(path) == replay()
    assert [p.name for p in path.parent.iterdir()] == ["game.html"]  # no temporary file left

    import meeple.viewer.page as page

    def fail(*args):
        raise OSError("disk full")

    monkeypatch.setattr(page.os, "replace", fail)
    with pytest.raises(OSError, match="disk full"):
        write_replay(path, replay(note="new"), with_renderer=TOY)
    assert read_replay(path) == replay()  # the old page is whole, and no temporary file is left
    assert [p.name for p in path.parent.iterdir()] == ["game.html"]


def test_save_replays_names_files_by_index_and_title(tmp_path, monkeypatch):
    import meeple.viewer.page as page

    monkeypatch.setattr(page, "renderer", lambda game: TOY)
    paths = save_replays([replay(), replay(steps=5)], tmp_path)
    assert [p.name for p in paths] == ["0-toy-game-1.html", "1-toy-game-1.html"]
    assert [len(read_replay(p).steps) for p in paths] == [3, 5]
    assert slug("Iteration 3: agent (X) vs MCTS!") == "iteration-3-agent-x-vs-mcts" and slug("!!") == "replay"
