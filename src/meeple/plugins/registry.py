"""Entry-point registries of what plugins provide: env backends (group ``meeple.plugins``) and
benchmarks (``meeple.benchmarks``).

Lookups read entry-point metadata only; a plugin's module is imported when what it provides
is first loaded, never while composing configs.
"""

from __future__ import annotations

import importlib.util
from functools import cache
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path

from meeple.errors import PluginNotFoundError
from meeple.plugins.spec import EnvBackend

GROUP = "meeple.plugins"
BENCHMARKS_GROUP = "meeple.benchmarks"  # name -> "module:main", main(argv) -> exit code


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


def conf_dirs() -> list[Path]:
    """Each installed plugin's ``conf/`` folder, located without importing the plugin."""
    dirs = []
    for ep in installed().values():
        top = ep.module.split(".")[0]
        spec = importlib.util.find_spec(top)
        if spec is None or not spec.submodule_search_locations:
            continue
        conf = Path(next(iter(spec.submodule_search_locations))) / "conf"
        if conf.is_dir() and conf not in dirs:
            dirs.append(conf)
    return dirs
