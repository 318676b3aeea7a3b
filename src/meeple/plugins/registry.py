"""Entry-point registries of what plugins provide: env backends (group ``meeple.plugins``),
AlphaZero games (``meeple.games``), benchmarks (``meeple.benchmarks``), replay-viewer renderers
(``meeple.viewers``, read by :mod:`meeple.viewer.renderers`) and play sessions (``meeple.play``, read
by :mod:`meeple.viewer.play_session`).

Lookups read entry-point metadata only; a plugin's module is imported when what it provides
is first loaded, never while composing configs.
"""

from __future__ import annotations

import importlib.util
from functools import cache
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path

from meeple.errors import PluginNotFoundError
from meeple.plugins.spec import AlphaZeroGame, EnvBackend

GROUP = "meeple.plugins"
GAMES_GROUP = "meeple.games"
BENCHMARKS_GROUP = "meeple.benchmarks"  # name -> "module:main", main(argv) -> exit code
VIEWERS_GROUP = "meeple.viewers"  # game -> meeple.viewer.renderers.Renderer (or a callable returning one)
PLAY_GROUP = "meeple.play"  # game -> factory(checkpoint, *, seed, human_seat, **opts) -> PlaySession


def installed(group: str = GROUP) -> dict[str, EntryPoint]:
    """Installed entry points of ``group`` by name (env backends by default)."""
    return {ep.name: ep for ep in entry_points(group=group)}


@cache
def load_backend(name: str) -> EnvBackend:
    """The backend object for ``name``; a clear error lists what is installed."""
    eps = installed()
    if name not in eps:
        choices = ", ".join(sorted(eps)) or "none (pip install -e plugins/<name>)"
        raise PluginNotFoundError(
            f"env.backend={name!r} is not an installed env backend; installed: {choices}"
        )
    backend = eps[name].load()
    if not isinstance(backend, EnvBackend):
        raise PluginNotFoundError(
            f"entry point {eps[name].value!r} for backend {name!r} does not provide "
            "`name` and `make_env(env_cfg, *, num_envs, device)` (meeple.plugins.spec.EnvBackend)"
        )
    return backend


def installed_games() -> list[str]:
    """Names of the installed AlphaZero games (entry-point metadata only: nothing is imported)."""
    return sorted(installed(GAMES_GROUP))


@cache
def load_game(name: str) -> AlphaZeroGame:
    """The game object for ``phase.game``; a clear error lists what is installed."""
    eps = installed(GAMES_GROUP)
    if name not in eps:
        choices = ", ".join(sorted(eps)) or "none (pip install -e plugins/<game>)"
        raise PluginNotFoundError(
            f"phase.game={name!r} is not an installed game; installed: {choices}"
        )
    game = eps[name].load()
    if not isinstance(game, AlphaZeroGame):
        raise PluginNotFoundError(
            f"entry point {eps[name].value!r} for game {name!r} does not provide "
            "meeple.plugins.spec.AlphaZeroGame (name, planes_shape, num_actions, "
            "selfplay_options, selfplay_engine, mcts_player, play_match)"
        )
    return game


def conf_dirs() -> list[Path]:
    """Each installed plugin's ``conf/`` folder, located without importing the plugin: a plugin is
    any package that provides an env backend, a game or a benchmark (a game with no env backend,
    such as an AlphaZero-only one, still ships its recipes)."""
    dirs = []
    for ep in [ep for group in (GROUP, GAMES_GROUP, BENCHMARKS_GROUP) for ep in installed(group).values()]:
        top = ep.module.split(".")[0]
        spec = importlib.util.find_spec(top)
        if spec is None or not spec.submodule_search_locations:
            continue
        conf = Path(next(iter(spec.submodule_search_locations))) / "conf"
        if conf.is_dir() and conf not in dirs:
            dirs.append(conf)
    return dirs
