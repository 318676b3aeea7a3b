"""``python -m meeple.serve`` settings: usage text, composition and validation.

Every mistake becomes one :class:`ConfigError` naming the key, the value and what is accepted
(the CLI prints it as one line and exits 2); Hydra's multi-line messages are reduced to that.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.errors import HydraException, MissingConfigException
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from meeple.config.compose import conf_dir
from meeple.errors import ConfigError

SERVED = ("socket", "http", "shm")
UNIX_PATH_MAX = 107  # sun_path holds 108 bytes with the terminating NUL
TRANSPORT_KEYS = {
    "address": "socket file path (socket, shm) or 127.0.0.1:PORT (http); null: a default",
    "num_workers": "env worker processes sharing the envs (0: in the server process; shm: >= 1)",
    "max_body": "largest request body in bytes; larger ones are refused",
    "frame_timeout_s": "a started request must arrive within this, else its connection closes",
    "timeout_s": "shm: longest wait for a worker before a clear error",
    "spin_us": "shm and socket waits: microseconds of pure spinning",
    "yield_us": "then microseconds of spinning with sched_yield, then a futex (socket: recv)",
}

USAGE = """\
usage: python -m meeple.serve [env=NAME] [transport=socket|http|shm] [num_envs=N] [KEY=VALUE ...]

Host num_envs envs of one game in an env server that train.py (transport=socket|http|shm
transport.address=...) or any client of docs/protocol.md drives. It prints
MEEPLE_SERVER_READY {{json}} once it accepts clients; Ctrl-C or SIGTERM stops it and removes
its socket file and shared-memory segment.

config groups:
  env=NAME                       the game: {envs}
  transport=NAME                 socket (Unix socket frames), shm (shared memory),
                                 http (JSON on 127.0.0.1)
  hardware=NAME                  only for env configs that read it: {hardware}

settings (defaults in conf/serve.yaml and conf/transport/socket.yaml):
  num_envs={num_envs:<21} env instances hosted; one request steps all of them
{transport_keys}
  env.KEY=VALUE                  any key of the env config

One client drives the envs at a time (the first to reset); its env.num_envs must equal
num_envs. See docs/transport.md.

example:
  python -m meeple.serve env=<name> transport=socket num_envs=64 transport.address=/tmp/env.sock
  python train.py env=<name> transport=socket transport.address=/tmp/env.sock env.num_envs=64
"""


def usage() -> str:
    with _hydra():
        loader = GlobalHydra.instance().config_loader()
        envs = ", ".join(loader.get_group_options("env"))
        hardware = ", ".join(loader.get_group_options("hardware"))
        cfg = compose(config_name="serve")
    keys = "\n".join(
        f"  {f'transport.{key}={_yaml(cfg.transport.get(key))}':<30} {text}"
        for key, text in TRANSPORT_KEYS.items()
    )
    return USAGE.format(envs=envs, hardware=hardware, num_envs=cfg.num_envs, transport_keys=keys)


def _yaml(value: object) -> str:
    return "null" if value is None else str(value)


def _hydra():
    return initialize_config_dir(config_dir=str(conf_dir()), version_base="1.3")


def compose_serve_config(overrides: Sequence[str]) -> DictConfig:
    """The serve config for ``overrides``; Hydra's errors become one-line ConfigErrors."""
    try:
        with _hydra():
            cfg = compose(config_name="serve", overrides=list(overrides))
        OmegaConf.resolve(cfg)
    except MissingConfigException as err:
        group, _, name = (err.missing_cfg_file or "").rpartition("/")
        accepted = ", ".join(err.options or [])
        if group == "transport":
            accepted = ", ".join(o for o in err.options or [] if o in SERVED)
        raise ConfigError(
            f"{group}={name}: no such {group} config; accepted: {accepted}"
            if group
            else _first_line(err)
        ) from None
    except (HydraException, OmegaConfBaseException) as err:
        raise ConfigError(
            f"{_first_line(err)}; accepted: env=NAME, transport=NAME, num_envs=N, "
            f"transport.{{{','.join(TRANSPORT_KEYS)}}}=VALUE, env.KEY=VALUE "
            "(python -m meeple.serve --help)"
        ) from None
    return cfg


def _first_line(err: Exception) -> str:
    text = str(err).strip().splitlines()
    return text[0].rstrip(".") if text else type(err).__name__


@dataclass(frozen=True)
class ServeSettings:
    transport: str
    address: str | None
    num_envs: int
    num_workers: int
    max_body: int
    frame_timeout_s: float
    timeout_s: float
    spin_us: float
    yield_us: float

    @classmethod
    def from_config(cls, cfg: DictConfig) -> ServeSettings:
        t = cfg.transport
        if t.type not in SERVED:
            raise ConfigError(f"transport={t.type} cannot be served; accepted: {', '.join(SERVED)}")
        num_envs = _integer("num_envs", cfg.num_envs, 1)
        workers = _integer("transport.num_workers", t.get("num_workers", 0), 0)
        if t.type == "shm" and workers < 1:
            raise ConfigError(
                f"transport.num_workers={workers}: transport=shm steps envs in worker "
                "processes; accepted: 1..num_envs"
            )
        if workers > num_envs:
            raise ConfigError(
                f"transport.num_workers={workers} exceeds num_envs={num_envs}; "
                f"accepted: 0..{num_envs} (each worker hosts at least one env)"
            )
        return cls(
            transport=t.type,
            address=_address(t.type, t.get("address")),
            num_envs=num_envs,
            num_workers=workers,
            max_body=_integer("transport.max_body", t.get("max_body", 64 << 20), 1),
            frame_timeout_s=_number("transport.frame_timeout_s", t.get("frame_timeout_s", 5), 0),
            timeout_s=_number("transport.timeout_s", t.get("timeout_s", 30), 0),
            spin_us=_number("transport.spin_us", t.get("spin_us", 20), 0, allow_zero=True),
            yield_us=_number("transport.yield_us", t.get("yield_us", 200), 0, allow_zero=True),
        )


def _integer(key: str, value: object, low: int) -> int:
    if type(value) is not int or value < low:
        raise ConfigError(f"{key}={value!r}; accepted: an integer >= {low}")
    return value


def _number(key: str, value: object, low: float, *, allow_zero: bool = False) -> float:
    ok = type(value) in (int, float) and (value >= low if allow_zero else value > low)
    if not ok:
        raise ConfigError(
            f"{key}={value!r}; accepted: a number {'>=' if allow_zero else '>'} {low}"
        )
    return float(value)


def _address(transport: str, address: object) -> str | None:
    if address is None:
        return None
    if transport == "http":
        host, _, port = str(address).rpartition(":")
        if host not in ("127.0.0.1", "localhost") or not port.isdigit() or int(port) > 65535:
            raise ConfigError(
                f"transport.address={address}; accepted for http: 127.0.0.1:PORT with PORT "
                "0..65535 (0: a free port; servers bind the loopback interface only)"
            )
        return str(address)
    if not isinstance(address, str) or not address:
        raise ConfigError(
            f"transport.address={address!r}; accepted for {transport}: a socket file path, "
            "or null (a default path)"
        )
    folder = os.path.dirname(os.path.abspath(address))
    if not os.path.isdir(folder):
        raise ConfigError(
            f"transport.address={address}: folder {folder} does not exist; accepted: "
            "a socket file path in an existing folder, or null (a default path)"
        )
    if len(os.fsencode(address)) > UNIX_PATH_MAX:
        raise ConfigError(
            f"transport.address={address} is {len(os.fsencode(address))} bytes long; "
            f"accepted: a socket path of at most {UNIX_PATH_MAX} bytes"
        )
    if os.path.exists(address) and not _is_socket(address):
        raise ConfigError(
            f"transport.address={address} is an existing file, not a socket; accepted: "
            "a new path, or one a stopped server left"
        )
    return address


def _is_socket(path: str) -> bool:
    import stat

    return stat.S_ISSOCK(os.stat(path).st_mode)
