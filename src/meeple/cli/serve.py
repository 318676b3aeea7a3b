"""``python -m meeple.serve``: host ``num_envs`` envs of any registered backend for one transport.

Prints ``MEEPLE_SERVER_READY {json}`` on stdout once it accepts clients (launchers wait for
it). SIGINT/SIGTERM stop the workers and remove the socket file and shared-memory segment
(exit 0). A config mistake is one ``meeple: error:`` line (exit 2); an env worker that dies
shuts the server down with a line naming it (exit 1).
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
import threading

from omegaconf import OmegaConf

from meeple.cli.serve_args import ServeSettings, compose_serve_config, usage
from meeple.envs.pettingzoo import BACKEND as PETTINGZOO
from meeple.errors import ConfigError, MeepleError
from meeple.transport.launch import READY, default_address
from meeple.transport.server import EnvServer
from meeple.transport.waiting import WaitPolicy

log = logging.getLogger("meeple")


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if "-h" in argv or "--help" in argv:
        print(usage())
        return 0
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    try:
        # launchers pass a training run's resolved env config, and their pid (exit with them)
        env_json = _pop_option(argv, "--env-json")
        parent = _pop_option(argv, "--parent-pid")
        cfg = compose_serve_config(argv)
        env_cfg = (
            json.loads(env_json) if env_json else OmegaConf.to_container(cfg.env, resolve=True)
        )
        if env_cfg.get("backend") == PETTINGZOO:
            raise ConfigError(
                f"env.backend={PETTINGZOO} (a multi-agent env) cannot be served: phase=dqn steps it in "
                "its own actor process; accepted: an env of an installed backend (python -m "
                "meeple.serve --help lists them) or env.array_env=package.module:Class"
            )
        s = ServeSettings.from_config(cfg)
        address = s.address or default_address(s.transport, str(env_cfg.get("backend", "env")))
        server = EnvServer(
            env_cfg,
            transport=s.transport,
            address=address,
            num_envs=s.num_envs,
            num_workers=s.num_workers,
            max_body=s.max_body,
            frame_timeout_s=s.frame_timeout_s,
            policy=WaitPolicy(s.spin_us, s.yield_us, s.timeout_s),
        )
        stop = threading.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: stop.set())
        server.on_failure = lambda _: stop.set()
        try:
            server.start()
        except OSError as err:
            raise ConfigError(f"cannot serve at transport.address={address}: {err}") from err
    except MeepleError as err:
        print(f"meeple: error: {err}", file=sys.stderr)
        return 2
    try:
        ready = {
            "transport": s.transport,
            "address": server.address,
            "num_envs": server.num_envs,
            "pid": os.getpid(),
            "segment": server.segment_name,
        }
        print(READY + json.dumps(ready), flush=True)
        while not stop.wait(0.5):
            if parent and os.getppid() != int(parent):
                log.warning("the process that started this server (pid %s) is gone", parent)
                break
        if not server.failure:  # a failure was logged, and shut the server down, already
            log.info("shutting down")
    finally:
        server.close()
    if server.failure:
        print(f"meeple: error: {server.failure}", file=sys.stderr)
        return 1
    return 0


def _pop_option(argv: list[str], name: str) -> str | None:
    if name not in argv:
        return None
    i = argv.index(name)
    if i + 1 >= len(argv):
        raise ConfigError(f"{name} needs a value")
    value = argv[i + 1]
    del argv[i : i + 2]
    return value
