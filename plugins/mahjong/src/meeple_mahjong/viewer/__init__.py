"""The mahjong table in the browser viewer (meeple.viewer): `renderer()` is the ``meeple.viewers``
entry point ``mahjong`` (renderer.js / renderer.css beside this file); `table.Table` turns MJAI
events into the state that script draws."""

from __future__ import annotations

from meeple.viewer.renderers import Renderer


def renderer() -> Renderer:
    return Renderer.from_package("mahjong", "meeple_mahjong")  # viewer/renderer.js, renderer.css
