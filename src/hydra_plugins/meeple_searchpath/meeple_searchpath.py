"""Adds every installed meeple plugin's ``conf/`` to Hydra's search path.

This is how ``env=<name>`` finds configs shipped by plugins: the core's
``conf/`` holds no plugin configs and imports no plugin.
"""

from hydra.core.config_search_path import ConfigSearchPath
from hydra.plugins.search_path_plugin import SearchPathPlugin


class MeepleSearchPathPlugin(SearchPathPlugin):
    def manipulate_search_path(self, search_path: ConfigSearchPath) -> None:
        from meeple.plugins.registry import conf_dirs

        for conf in conf_dirs():
            search_path.append(provider=f"meeple-plugin:{conf.parent.name}", path=f"file://{conf}")
