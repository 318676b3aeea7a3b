"""The auto-battler as a meeple env backend: a Node server, every seat a row (self-play).

``env.combat: batched`` runs the fights in the batched combat service
(:mod:`meeple_autobattler.combat_server`, on ``env.combat_device``): each Node server started for
the run gets a service of its own, started here and ended with that server (the service runs
with ``--exit-with-clients``, and exits with this process too)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from meeple.errors import ConfigError

GAME = "autobattler"
COMBAT = ("local", "batched")
_services: list = []  # the combat services started here (each ends with its Node server)


def combat_option(env_cfg: Mapping[str, Any]) -> str:
    """``env.combat``, checked: ``local`` (the Node game's own fights) or ``batched``."""
    combat = str(env_cfg.get("combat", "local"))
    if combat not in COMBAT:
        raise ConfigError(f"env.combat={combat!r}; accepted: {', '.join(COMBAT)}")
    return combat


def start_combat_service(device: str = "cpu"):
    """A batched combat service that exits when its last client (a Node server) is gone."""
    from meeple.transport.launch import ServerProcess, default_address
    from meeple_autobattler.combat_server import service_command

    address = default_address("socket", "autobattler-combat")
    command = service_command(address, device=device, exit_with_clients=True)
    service = ServerProcess({}, transport="socket", num_envs=0, address=address, command=command)
    _services[:] = [s for s in _services if s.proc.poll() is None] + [service]
    return service


def start_server(num_envs: int, *, transport: str = "socket", num_workers: int | None = None,
                 combat: str = "local"):
    """A Node server hosting ``num_envs`` auto-battler games, for code that drives it directly
    (evaluation, benchmark, tests); ``combat``: ``local`` or ``batched:<service address>``."""
    from meeple.transport.launch import ServerProcess, default_address
    from meeple.transport.node import server_command

    address = default_address(transport, GAME)
    cmd = server_command(GAME, transport=transport, address=address, num_envs=num_envs,
                         num_workers=num_workers) + ["--combat", combat]
    return ServerProcess({}, transport=transport, num_envs=num_envs, address=address, command=cmd)


class AutoBattlerBackend:
    """``env.backend: autobattler``. The game runs in the TypeScript host library's server
    (any transport; ``transport=inproc`` starts a socket server); ``env.seats`` rows per game."""

    name = GAME

    def batch_unit(self, env_cfg: Mapping[str, Any]) -> int:
        return int(env_cfg.get("seats", 8))

    def server_command(
        self, env_cfg: Mapping[str, Any], *, transport: str, address: str, num_envs: int,
        num_workers: int | None = None, wait: dict[str, float] | None = None,
    ) -> list[str]:
        from meeple.transport.node import server_command

        combat = combat_option(env_cfg)
        cmd = server_command(GAME, transport=transport, address=address, num_envs=num_envs,
                             num_workers=num_workers, wait=wait)
        if combat == "batched":
            service = start_combat_service(str(env_cfg.get("combat_device", "cpu")))
            cmd += ["--combat", f"batched:{service.address}"]
        return cmd

    def make_env(self, env_cfg: Mapping[str, Any], *, num_envs: int, device: str = "cpu"):
        from meeple.transport.client import make_remote_env

        combat_option(env_cfg)
        if int(env_cfg.get("seats", 8)) != 8:
            raise ConfigError(f"env.seats={env_cfg.get('seats')}; the auto-battler has 8 seats")
        return make_remote_env(env_cfg, {"type": "socket"}, num_envs=num_envs, device=device)
