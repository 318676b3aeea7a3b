"""A replay as one self-contained HTML page: the core's style and script, the game's renderer and
the replay's JSON, all inline. The page loads nothing (its Content-Security-Policy forbids any
request), so it opens from a file, an MLflow artifact view or a mail attachment alike.
"""

from __future__ import annotations

import html
import json
import os
import re
from importlib.resources import files
from pathlib import Path

from meeple.jsonio import write_text_atomic
from meeple.viewer.renderers import Renderer, renderer
from meeple.viewer.replay import Replay

# Inline scripts and styles only; no fetch, image, font or frame from anywhere.
CSP = "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:"


def core_asset(name: str) -> str:
    """The source text of one of the core's static files (``viewer.js``, ``viewer.css``)."""
    return files("meeple.viewer").joinpath("static", name).read_text(encoding="utf-8")


def json_for_script(data: object) -> str:
    """JSON safe inside ``<script type="application/json">``: every ``<`` escaped (``\\u003c``),
    so no string in it can close the element or open a comment."""
    return json.dumps(data, ensure_ascii=False, allow_nan=False).replace("<", "\\u003c")


def inline_asset(source: str, tag: str) -> str:
    """Script or style text that cannot end its element early (``</script`` -> ``<\\/script``,
    the same string in JS and the same token in CSS), in any letter case."""
    return re.sub(f"</({tag})", r"<\\/\1", source, flags=re.IGNORECASE)


def inline_page(title: str, draw: Renderer, body: str, data_id: str, data: object, *, csp: str = CSP,
                extra: str | None = None) -> str:
    """A page with everything inline: the core's viewer.css and viewer.js, the game's renderer,
    ``body``, ``data`` as JSON in ``<script id=data_id>``, and the core's ``extra`` .css/.js
    after them (the play page's)."""
    styles = [core_asset("viewer.css"), draw.css, *([core_asset(f"{extra}.css")] if extra else [])]
    scripts = [draw.js, core_asset("viewer.js"), *([core_asset(f"{extra}.js")] if extra else [])]
    return "\n".join([
        "<!doctype html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{csp}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{html.escape(title)}</title>",
        *(f"<style>{inline_asset(css, 'style')}</style>" for css in styles),
        "</head><body>",
        body,
        f'<script type="application/json" id="{data_id}">{json_for_script(data)}</script>',
        *(f"<script>{inline_asset(js, 'script')}</script>" for js in scripts),
        "</body></html>",
        "",
    ])


def replay_html(replay: Replay, *, with_renderer: Renderer | None = None) -> str:
    """The page of ``replay``, drawn by ``with_renderer`` or else the installed renderer of its game."""
    draw = with_renderer or renderer(replay.game)
    return inline_page(replay.title, draw, '<main id="viewer"></main>', "replay", replay.to_json())


def write_replay(path: str | os.PathLike, replay: Replay, *, with_renderer: Renderer | None = None) -> Path:
    """Writes the page to ``path`` atomically (a temporary file in the same folder, then renamed):
    a reader never sees half a page, and a failed write leaves no file behind."""
    return write_text_atomic(path, replay_html(replay, with_renderer=with_renderer))


def read_replay(path: str | os.PathLike) -> Replay:
    """The replay embedded in a page that :func:`write_replay` wrote (tests, tools)."""
    text = Path(path).read_text(encoding="utf-8")
    start = text.index('id="replay">') + len('id="replay">')
    return Replay.from_json(json.loads(text[start : text.index("</script>", start)]))
