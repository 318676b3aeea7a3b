"""The play server over HTTP with a stand-in game (a race to 5, adding 1 or 2 a turn): moves,
refusals (HTTP 400, one line, the game unchanged, the server still serving), new games, the log.
The real games in a real browser: tests/browser/."""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from importlib.metadata import EntryPoint

import pytest

from meeple.errors import PluginNotFoundError
from meeple.viewer.play_server import MAX_BODY, PlayServer
from meeple.viewer.play_session import IllegalMove, PlaySession, load_play_factory
from meeple.viewer.renderers import Renderer
from meeple.viewer.replay import Step

GOAL = 5
RENDERER = Renderer("race", "window.meepleRenderers = window.meepleRenderers || {};"
                            "window.meepleRenderers.race = {draw: function (b, s) { b.textContent = s.total; }};")


class Race:
    """Seats take turns adding 1 or 2; whoever reaches GOAL wins. The agent always adds 1."""

    def __init__(self, seed: int, human_seat: int = 0) -> None:
        self.seed, self.human_seat, self.total, self.turn, self.moves = seed, human_seat, 0, 0, []
        self.players = ["you", "agent"] if human_seat == 0 else ["agent", "you"]

    @property
    def finished(self) -> bool:
        return self.total >= GOAL

    def state(self) -> dict:
        return {"total": self.total, "turn": self.turn}

    def legal(self) -> list[dict[str, str]]:
        if self.finished or self.turn != self.human_seat:
            return []
        return [{"id": str(k), "label": f"+{k}"} for k in (1, 2) if self.total + k <= GOAL]

    def _add(self, k: int) -> None:
        self.total += k
        self.moves.append(k)
        self.turn = 1 - self.turn

    def play(self, action_id: str) -> None:
        if action_id == "bug":  # a game's own failure, not the player's
            raise RuntimeError("the session broke\nsecond line never sent")
        if action_id not in {m["id"] for m in self.legal()}:
            raise IllegalMove(f"move {action_id!r} is not legal here\nsecond line never sent")
        self._add(int(action_id))

    def advance(self) -> list[Step]:
        steps = []
        while not self.finished and self.turn != self.human_seat:
            steps.append(Step(self.state(), actor=self.turn, action="+1"))
            self._add(1)
        return steps

    def result(self) -> dict:
        return {"winner": 1 - self.turn, "text": "over"} if self.finished else {}

    def log(self) -> tuple[str, str]:
        return "race.txt", " ".join(map(str, self.moves)) + "\n"


@pytest.fixture
def server():
    srv = PlayServer(lambda seed: Race(seed), "race", RENDERER, seed=7)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()
    thread.join(5)


def call(srv: PlayServer, path: str, body: bytes | None = None, headers: dict[str, str] | None = None):
    req = urllib.request.Request(srv.url.rstrip("/") + path, data=body, headers=headers or {},
                                 method="POST" if body is not None else "GET")
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as err:
        return err.code, dict(err.headers), err.read()


def move(srv: PlayServer, action) -> tuple[int, dict]:
    status, _, data = call(srv, "/api/move", json.dumps({"action": action}).encode())
    return status, json.loads(data)


def test_the_race_is_a_play_session():
    assert isinstance(Race(0), PlaySession)


def test_serves_on_loopback_the_page_and_the_state(server):
    assert server.server_address[0] == "127.0.0.1" and server.url.startswith("http://127.0.0.1:")
    status, headers, page = call(server, "/")
    assert status == 200 and headers["Content-Type"].startswith("text/html")
    text = page.decode()
    assert "connect-src 'self'" in text and 'id="board"' in text and "window.meepleRenderers.race" in text
    assert "meepleViewer" in text  # the core viewer's script, whose decision panel the page reuses
    status, _, data = call(server, "/api/state")
    state = json.loads(data)
    assert status == 200 and state["seed"] == 7 and state["state"] == {"total": 0, "turn": 0}
    assert [m["id"] for m in state["legal"]] == ["1", "2"] and state["players"] == ["you", "agent"]


def test_a_legal_move_is_answered_by_the_agent(server):
    status, state = move(server, "2")
    assert status == 200 and state["state"]["total"] == 3 and state["state"]["turn"] == 0
    assert [(s["actor"], s["action"]) for s in state["last"]] == [(1, "+1")]
    assert "state" not in state["last"][0]  # the page draws the state now, not each step's


@pytest.mark.parametrize("body", [
    json.dumps({"action": "3"}).encode(),       # not a legal id
    json.dumps({"action": 1}).encode(),         # not a string
    json.dumps(["1"]).encode(),                 # not an object
    b"{not json",
    b"\xff\xfe",
])  # fmt: skip
def test_illegal_or_malformed_moves_are_one_line_400s_and_change_nothing(server, body):
    before = json.loads(call(server, "/api/state")[2])
    status, headers, data = call(server, "/api/move", body)
    error = json.loads(data)["error"]
    assert status == 400 and headers["Content-Type"] == "application/json"
    assert error and "\n" not in error and ("accepted" in error or "not legal" in error)
    assert json.loads(call(server, "/api/state")[2]) == before  # unchanged, and still serving
    assert move(server, "1")[0] == 200


def test_a_body_over_the_limit_is_refused_unread(server):
    status, _, data = call(server, "/api/move", b"x" * (MAX_BODY + 1))
    assert status == 400 and f"at most {MAX_BODY}" in json.loads(data)["error"]
    assert call(server, "/api/state")[0] == 200


def test_requests_from_elsewhere_are_403_and_a_failing_game_is_one_line_500(server, capsys):
    before = json.loads(call(server, "/api/state")[2])
    status, _, data = call(server, "/api/state", headers={"Host": "attacker.example:80"})  # DNS rebinding
    assert status == 403 and "accepted: 127.0.0.1:" in json.loads(data)["error"]
    status, _, data = call(server, "/api/move", b'{"action": "1"}', headers={"Origin": "https://evil.example"})
    assert status == 403 and "Origin 'https://evil.example'" in json.loads(data)["error"]
    own = {"Origin": server.url.rstrip("/")}
    status, _, data = call(server, "/api/move", b'{"action": "bug"}', headers=own)
    assert status == 500 and json.loads(data)["error"] == "RuntimeError: the session broke"
    assert "Traceback" in capsys.readouterr().err
    assert json.loads(call(server, "/api/state")[2]) == before  # nothing played, still serving
    assert call(server, "/api/move", b'{"action": "1"}', headers=own)[0] == 200


def test_unknown_paths_are_404_naming_the_accepted_ones(server):
    status, _, data = call(server, "/api/nothing")
    assert status == 404 and "/api/state" in json.loads(data)["error"]
    status, _, data = call(server, "/api/nothing", b"{}")
    assert status == 404 and "/api/move" in json.loads(data)["error"]


def test_a_finished_game_refuses_moves_downloads_and_a_new_game_takes_the_next_seed(server):
    move(server, "2")  # 2, agent 1 -> 3
    status, state = move(server, "2")  # -> 5: the human wins
    assert status == 200 and state["finished"] and state["result"]["winner"] == 0 and state["legal"] == []
    assert move(server, "1")[0] == 400
    status, headers, data = call(server, "/api/log")
    assert status == 200 and headers["Content-Disposition"] == 'attachment; filename="race.txt"'
    assert data.decode() == "2 1 2\n"
    status, _, data = call(server, "/api/new", b"")
    state = json.loads(data)
    assert status == 200 and state["seed"] == 8 and state["state"]["total"] == 0 and not state["finished"]


def test_an_unknown_game_is_one_line_naming_the_playable_ones():
    available = {"race": EntryPoint("race", f"{__name__}:Race", "meeple.play")}
    assert load_play_factory("race", available) is Race
    with pytest.raises(PluginNotFoundError, match=r"^game 'go' cannot be played in the browser; installed: race$"):
        load_play_factory("go", available)


def test_the_command_line_refuses_bad_input_in_one_line(tmp_path, capsys):
    from meeple.checkpoint.io import save_atomic
    from meeple.play import main

    def one_line(argv: list[str], needle: str) -> None:
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.startswith("meeple: error: ") and err.count("\n") == 1 and needle in err, err

    one_line([str(tmp_path / "missing.pt")], "missing.pt")
    ckpt = tmp_path / "ckpt.pt"
    save_atomic({"model_state_dict": {}, "config": {"env": {"backend": "nothing"}}, "checkpoint_version": 1}, ckpt)
    one_line([str(ckpt)], "game 'nothing' cannot be played in the browser; installed: ")
    one_line([str(ckpt), "--port", "70000"], "--port 70000; accepted: 0 (any free port) to 65535")
    save_atomic({"model_state_dict": {}, "config": {}, "checkpoint_version": 1}, ckpt)
    one_line([str(ckpt)], "its config names no game (phase.game or env.backend); give --game")
