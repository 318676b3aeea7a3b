"""``python -m meeple.serve``: host ``num_envs`` envs of any registered backend for one transport.

Prints ``MEEPLE_SERVER_READY {json}`` on stdout once it accepts clients (launchers wait for
it). SIGINT/SIGTERM stop the workers and remove the socket file and shared-memory segment.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
import threading

from omegaconf import OmegaConf

from meeple.config.compose import compose_config
from meeple.errors import MeepleError
from meeple.transport.launch import READY, default_address
from meeple.transport.server import EnvServer
from meeple.transport.waiting import WaitPolicy

log = logging.getLogger("meeple")


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    env_json = _pop_option(
        argv, "--env-json"
    )  # launchers pass a training run's resolved env config
    parent = _pop_option(argv, "--parent-pid")  # launchers: exit when the launcher is gone
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    try:
        cfg = compose_config(argv, config_name="serve")
        env_cfg = (
            json.loads(env_json) if env_json else OmegaConf.to_container(cfg.env, resolve=True)
        )
        t = cfg.transport
        if t.type not in ("socket", "http", "shm"):
            raise MeepleError(f"transport={t.type} cannot be served; accepted: socket, http, shm")
        address = t.address or default_address(t.type, str(env_cfg.get("backend", "env")))
        server = EnvServer(
            env_cfg,
            transport=t.type,
            address=address,
            num_envs=int(cfg.num_envs),
            num_workers=int(t.num_workers),
            max_body=int(t.max_body),
            policy=WaitPolicy(float(t.spin_us), float(t.yield_us), float(t.timeout_s)),
        )
        stop = threading.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: stop.set())
        server.start()
    except MeepleError as err:
        print(f"meeple.serve: error: {err}", file=sys.stderr)
        return 2
    try:
        ready = {
            "transport": t.type,
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
        log.info("shutting down")
    finally:
        server.close()
    return 0


def _pop_option(argv: list[str], name: str) -> str | None:
    if name not in argv:
        return None
    i = argv.index(name)
    value = argv[i + 1]
    del argv[i : i + 2]
    return value
