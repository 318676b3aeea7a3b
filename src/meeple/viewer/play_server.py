"""The local play server behind ``python -m meeple.play``: a person against a checkpoint.

Standard library only (``http.server.ThreadingHTTPServer``), bound to 127.0.0.1: the page and the
game stay on this machine. One game at a time (a lock serialises the requests that touch it):

    GET  /            the page: the core viewer's css, the game's renderer, static/play.js
    GET  /api/state   the game now (:meth:`PlayServer.payload`)
    POST /api/move    {"action": "<id>"}: plays the human's move, then the other seats until the
                      human's turn; 200 with the new payload, 400 {"error": "<one line>"} for a
                      malformed request or an illegal move (the game is unchanged)
    POST /api/new     a new game (the next seed)
    GET  /api/log     the game's log as a download (moves, PGN or MJAI, as the game writes it)

A request whose Host is not this server, or whose Origin is another site's, is refused (403); an
exception from the game itself is a one-line HTTP 500 (its traceback goes to the terminal).
"""

from __future__ import annotations

import json
import threading
import traceback
from collections.abc import Callable
from dataclasses import asdict
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

from meeple.viewer.page import CSP as REPLAY_CSP
from meeple.viewer.page import inline_page
from meeple.viewer.play_session import IllegalMove, PlaySession
from meeple.viewer.renderers import Renderer
from meeple.viewer.replay import Step

HOST = "127.0.0.1"
# The replay page's policy, plus requests to this server (the page's fetches and the log download).
CSP = f"{REPLAY_CSP}; connect-src 'self'"
MAX_BODY = 4096  # a move is a few bytes: anything longer is refused unread
SessionFactory = Callable[[int], PlaySession]  # seed -> a new session


def play_html(game: str, draw: Renderer) -> str:
    """The play page: inline like a replay page (whose decision panel it reuses) plus the core's
    play.css and play.js; the one request it may make is to this server."""
    body = "\n".join([
        '<main id="play">',
        '<header><h1 id="title"></h1><ol class="players" id="players"></ol>',
        '<p id="status" role="status"></p></header>',
        '<section class="stage"><div class="left"><div id="board"></div>',
        '<div id="legal" class="legal"></div><p id="error" role="alert"></p>',
        '<p><button id="new-game" type="button">New game</button> ',
        '<a id="download" href="/api/log" download hidden>Download the game\'s log</a></p></div>',
        '<div><h2>Since your move</h2><div id="decision"></div></div></section></main>',
    ])
    return inline_page(f"meeple: play {game}", draw, body, "play-config", {"game": game}, csp=CSP, extra="play")


class PlayServer(ThreadingHTTPServer):
    """Serves one game at a time of ``game``; ``new_session(seed)`` starts one."""

    daemon_threads = True

    def __init__(self, new_session: SessionFactory, game: str, renderer: Renderer, *, seed: int = 0,
                 port: int = 0) -> None:
        super().__init__((HOST, port), _Handler)
        self.new_session = new_session
        self.game = game
        self.page = play_html(game, renderer).encode()
        self.seed = seed
        self.lock = threading.Lock()
        self.session: PlaySession
        self.last: list[dict[str, Any]] = []
        self.new_game(seed)

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.server_address[1]}/"

    def new_game(self, seed: int) -> None:
        self.seed = seed
        self.session = self.new_session(seed)
        self.last = _moves(self.session.advance())

    def move(self, action_id: str) -> None:
        self.session.play(action_id)
        self.last = _moves(self.session.advance())

    def payload(self) -> dict[str, Any]:
        s = self.session
        return {
            "game": self.game,
            "seed": self.seed,
            "players": list(s.players),
            "human_seat": s.human_seat,
            "state": s.state(),
            "legal": s.legal(),
            "finished": s.finished,
            "result": s.result() if s.finished else {},
            "last": self.last,  # the other seats' moves since the human's (Steps, with decisions)
        }


def _moves(steps: list[Step]) -> list[dict[str, Any]]:
    """The steps as the page shows them: who played what and why, without each step's state (the
    page draws the state now; a round of several bots is dozens of steps)."""
    return [{k: v for k, v in asdict(step).items() if k != "state"} for step in steps]


class _RequestError(Exception):
    """A request the server refuses (HTTP 400) with a one-line reason."""


class _Forbidden(Exception):
    """A request from elsewhere than this machine's page (HTTP 403)."""


class _Handler(BaseHTTPRequestHandler):
    server: PlayServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (the base's name)
        pass  # a move per request: the terminal keeps only the URL line

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        self._answer(self._get)

    def do_POST(self) -> None:  # noqa: N802
        self._answer(self._post)

    def _answer(self, route: Callable[[str], None]) -> None:
        """Runs ``route(path)``: a refused request is a one-line JSON error, a failing game (a bug)
        is HTTP 500 with one line while its traceback goes to the terminal; the server goes on."""
        try:
            self._check_origin()
            route(urlsplit(self.path).path)
        except _Forbidden as err:
            self._json(HTTPStatus.FORBIDDEN, {"error": str(err)})
        except (_RequestError, IllegalMove) as err:
            self._json(HTTPStatus.BAD_REQUEST, {"error": str(err).splitlines()[0]})
        except Exception as err:  # noqa: BLE001 (whatever a game's session raises)
            traceback.print_exc()
            self._json(HTTPStatus.INTERNAL_SERVER_ERROR, {"error": f"{type(err).__name__}: {err}".splitlines()[0]})

    def _check_origin(self) -> None:
        """Only this machine's pages may talk to the game: the Host must name the server (a DNS
        rebinding attack names another host) and a cross-site request's Origin must be ours."""
        port = self.server.server_address[1]
        hosts = {f"{HOST}:{port}", f"localhost:{port}"}
        host = self.headers.get("Host", "")
        if host not in hosts:
            raise _Forbidden(f"Host {host!r}; accepted: {', '.join(sorted(hosts))}")
        origin = self.headers.get("Origin")
        if origin is not None and origin not in {f"http://{h}" for h in hosts}:
            raise _Forbidden(f"Origin {origin!r}; accepted: this page's own requests")

    def _get(self, path: str) -> None:
        if path == "/":
            self._send(HTTPStatus.OK, self.server.page, "text/html; charset=utf-8")
        elif path == "/api/state":
            with self.server.lock:
                self._json(HTTPStatus.OK, self.server.payload())
        elif path == "/api/log":
            with self.server.lock:
                name, text = self.server.session.log()
            self._send(HTTPStatus.OK, text.encode(), "text/plain; charset=utf-8",
                       {"Content-Disposition": f'attachment; filename="{name}"'})
        else:
            self._json(HTTPStatus.NOT_FOUND, {"error": f"no page {path}; accepted: /, /api/state, /api/log"})

    def _post(self, path: str) -> None:
        body = self._body()
        with self.server.lock:
            if path == "/api/move":
                self.server.move(_action_id(body))
            elif path == "/api/new":
                self.server.new_game(self.server.seed + 1)
            else:
                self._json(HTTPStatus.NOT_FOUND, {"error": f"no action {path}; accepted: /api/move, /api/new"})
                return
            self._json(HTTPStatus.OK, self.server.payload())

    def _body(self) -> bytes:
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            raise _RequestError("Content-Length is not a number") from None
        if length < 0 or length > MAX_BODY:
            self.close_connection = True  # the body stays unread
            raise _RequestError(f"a body of {length} bytes; accepted: at most {MAX_BODY}")
        return self.rfile.read(length)

    def _json(self, status: HTTPStatus, obj: Any) -> None:
        self._send(status, json.dumps(obj).encode(), "application/json")

    def _send(self, status: HTTPStatus, data: bytes, kind: str, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "no-store")
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)


def _action_id(body: bytes) -> str:
    """The ``action`` of a move's JSON body, or a one-line reason it is not one."""
    try:
        data = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise _RequestError('the body is not JSON; accepted: {"action": "<id>"}') from None
    action = data.get("action") if isinstance(data, dict) else None
    if not isinstance(action, str):
        raise _RequestError(f'no string "action" in {body[:80].decode("utf-8", "replace")!r}; '
                            'accepted: {"action": "<id>"}, an id from /api/state\'s "legal"')
    return action
