"""Each game's drawing code for the viewer, found through the ``meeple.viewers`` entry points.

A game's plugin declares ``<game> = "<module>:<attr>"`` in that group; the attribute is a
:class:`Renderer` or a zero-argument callable returning one, usually
``Renderer.from_package(game, __package__)``, which reads the plugin's ``viewer/renderer.js``
(and ``viewer/renderer.css`` when there is one). Lookups read entry-point metadata; the plugin's
module is imported only for the game asked for.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib.resources import files

from meeple.errors import PluginNotFoundError
from meeple.plugins.registry import VIEWERS_GROUP, installed


@dataclass(frozen=True)
class Renderer:
    """A game's renderer: the source text of its script (which registers
    ``window.meepleRenderers[game]``) and of its style sheet."""

    game: str
    js: str
    css: str = ""

    @classmethod
    def from_package(cls, game: str, package: str, folder: str = "viewer") -> Renderer:
        """``<package>/<folder>/renderer.js`` and, if present, ``renderer.css``."""
        root = files(package).joinpath(folder)
        css = root.joinpath("renderer.css")
        return cls(game, root.joinpath("renderer.js").read_text(encoding="utf-8"),
                   css.read_text(encoding="utf-8") if css.is_file() else "")


def installed_viewers() -> list[str]:
    """Games with an installed renderer (entry-point metadata only: nothing is imported)."""
    return sorted(installed(VIEWERS_GROUP))


def renderer(game: str) -> Renderer:
    """The renderer of ``game``; an unknown game is one line naming the games that have one."""
    eps = installed(VIEWERS_GROUP)
    if game not in eps:
        choices = ", ".join(sorted(eps)) or f"none (a plugin declares one in [project.entry-points.\"{VIEWERS_GROUP}\"])"
        raise PluginNotFoundError(f"no viewer renderer for game {game!r}; installed: {choices}")
    found = eps[game].load()
    found = found() if callable(found) and not isinstance(found, Renderer) else found
    if not isinstance(found, Renderer) or found.game != game:
        raise PluginNotFoundError(f"entry point {eps[game].value!r} for viewer {game!r} does not provide "
                                  f"meeple.viewer.renderers.Renderer(game={game!r}, js, css)")
    return found
