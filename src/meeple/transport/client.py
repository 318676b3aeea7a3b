"""Client side: connect to an env server over any transport and use it as a TorchRL env.

``RemoteEnv`` is a batched ``EnvBase`` (batch ``[num_envs]``): one round trip steps every
env. With ``shm`` the records are views of the shared segment; TorchRL keeps tensors across
steps, so ``RemoteEnv`` copies them once into each step's TensorDict (``ShmChannel`` gives
zero-copy views to code that consumes them before the next request).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import torch

from meeple.envs.record_env import RecordEnv
from meeple.errors import ConfigError
from meeple.plugins.registry import load_backend
from meeple.transport.http import HttpClient
from meeple.transport.launch import ServerProcess, default_address
from meeple.transport.protocol import ErrorCode, MsgType, ProtocolError, decode_name
from meeple.transport.seats import SeatStepper
from meeple.transport.shm import ShmChannel
from meeple.transport.socket import SocketClient
from meeple.transport.waiting import WaitPolicy

log = logging.getLogger(__name__)

CLIENT_TRANSPORTS = ("socket", "http", "shm", "auto")


class ShmClient:
    """Control plane over the server's Unix socket, data plane through shared memory."""

    transient = True

    def __init__(
        self, path: str, timeout_s: float = 30.0, policy: WaitPolicy | None = None
    ) -> None:
        self.control = SocketClient(path, timeout_s)
        try:
            name = decode_name(self.control.call(MsgType.SHM_ATTACH))
            self.channel = ShmChannel(name, policy or WaitPolicy(timeout_s=timeout_s))
        except BaseException:
            self.control.sock.close()
            raise
        self.spaces = self.channel.spaces
        self.server_name = self.control.server_name
        # the channel's own methods: a forwarding call was ~0.1 us of a ~5 us round trip
        self.reset, self.step = self.channel.reset, self.channel.step
        self.step_multi, self.observe = self.channel.step_multi, self.channel.observe

    def health(self) -> dict[str, int]:
        return self.control.health()

    def close(self) -> None:
        self.channel.close()
        self.control.close()


def connect(
    transport: str, address: str, *, timeout_s: float = 30.0, policy: WaitPolicy | None = None
):
    """A stepper (``reset/step/step_multi/observe/health/close``) for a running server."""
    if transport == "socket":
        return SocketClient(address, timeout_s, policy or WaitPolicy(timeout_s=timeout_s))
    if transport == "shm":
        return ShmClient(address, timeout_s, policy)
    if transport == "http":
        return HttpClient(address, timeout_s)
    if transport == "auto":
        return _connect_auto(address, timeout_s, policy)
    raise ConfigError(f"transport={transport!r}; accepted: {', '.join(CLIENT_TRANSPORTS)}")


def _connect_auto(address: str, timeout_s: float, policy: WaitPolicy | None):
    if not address.startswith("/") and ":" in address:
        log.info(
            "transport=auto: using http (%s is a TCP address; shm and socket need a Unix socket path)",
            address,
        )
        return connect("http", address, timeout_s=timeout_s)
    try:
        client = ShmClient(address, timeout_s, policy)
    except ProtocolError as err:
        log.info("transport=auto: using socket (shm skipped: %s)", err.text)
        return SocketClient(address, timeout_s, policy or WaitPolicy(timeout_s=timeout_s))
    log.info("transport=auto: using shm at %s", address)
    return client


class RemoteEnv(RecordEnv):
    """A TorchRL env whose ``num_envs`` envs live in an env server (any transport).

    ``server`` (optional) is a :class:`ServerProcess` this env started and stops on close.
    """

    def __init__(
        self,
        stepper,
        device: str | torch.device = "cpu",
        server: ServerProcess | None = None,
        *,
        address: str | None = None,
        num_envs: int | None = None,
    ) -> None:
        """``address`` and ``num_envs``: a server the user started, and the batch this run
        expects of it; checked when the envs are first driven (reading specs needs no match)."""
        super().__init__(stepper, device=device)
        self.server = server
        self.address, self._expected_num_envs = address, num_envs

    def _reset(self, tensordict=None, **kwargs):
        if self._expected_num_envs not in (None, self.spaces.num_envs):
            n, expected = self.spaces.num_envs, self._expected_num_envs
            raise ConfigError(
                f"the env server at {self.address} hosts num_envs={n} envs but this run has "
                f"env.num_envs={expected}; they must be equal (one request steps every env): "
                f"train with env.num_envs={n}, or serve with num_envs={expected}"
            )
        try:
            return super()._reset(tensordict, **kwargs)
        except ProtocolError as err:
            if err.code != ErrorCode.BUSY or self.address is None:
                raise
            raise ConfigError(
                f"the env server at {self.address} is driven by another client (another run, "
                "or another collector worker of this one: a server you started hosts one env "
                "batch; use env.num_workers=1, or start one server per worker)"
            ) from err

    def health(self) -> dict[str, int]:
        return self.stepper.health()

    def close(self, *, raise_if_closed: bool = True) -> None:
        try:
            super().close(raise_if_closed=raise_if_closed)
        finally:
            if self.server is not None:
                self.server.stop()


def make_remote_env(
    env_cfg: Mapping[str, Any],
    transport_cfg: Mapping[str, Any],
    *,
    num_envs: int,
    device: str = "cpu",
    evaluation: bool = False,
) -> RemoteEnv:
    """A :class:`RemoteEnv` for ``conf/transport``: connect to ``address``, or start a server.

    A server at ``address`` (one the user started) hosts the collector's env batch; its
    ``num_envs`` must equal the run's. ``evaluation`` batches get a server of their own
    (same env config and transport), stopped with the env: one client drives a server's envs
    at a time, and the collector holds them for the whole run.

    ``env.seats`` > 1 (self-play): ``num_envs`` counts (game, seat) rows, the server hosts
    ``num_envs / seats`` games, and every step is one STEP_MULTI (:class:`SeatStepper`). A
    backend with ``server_command(...)`` (a game in another language) names its own server.
    """
    seats = int(env_cfg.get("seats", 1))
    if seats > 1 and num_envs % seats:
        raise ConfigError(
            f"env.num_envs={num_envs} with env.seats={seats}: num_envs counts (game, seat) rows "
            f"and must be a multiple of {seats}"
        )
    games = num_envs // seats
    rows = (lambda stepper: SeatStepper(stepper)) if seats > 1 else (lambda stepper: stepper)
    transport = transport_cfg["type"]
    if transport not in CLIENT_TRANSPORTS:
        raise ConfigError(
            f"transport.type={transport!r}; accepted: inproc, {', '.join(CLIENT_TRANSPORTS)}"
        )
    timeout_s = float(transport_cfg.get("timeout_s", 30.0))
    policy = WaitPolicy(
        float(transport_cfg.get("spin_us", 20.0)),
        float(transport_cfg.get("yield_us", 200.0)),
        timeout_s,
    )
    address = transport_cfg.get("address")
    if address and not evaluation:
        try:
            stepper = connect(transport, address, timeout_s=timeout_s, policy=policy)
        except ConnectionError as err:
            raise ConfigError(
                f"transport.address={address}: no env server answers there ({err}); start one "
                f"(python -m meeple.serve transport={transport} transport.address={address}) "
                "or set transport.address=null and the run starts its own"
            ) from err
        return RemoteEnv(rows(stepper), device=device, address=address, num_envs=num_envs)
    if address:
        log.info(
            "evaluation: %d envs in a %s env server of its own (the server at %s hosts the "
            "collector's envs)",
            num_envs,
            transport,
            address,
        )
    workers = int(transport_cfg.get("num_workers", 0))
    # the server side of this config: waits and limits
    extra = [
        f"transport.{key}={transport_cfg[key]}"
        for key in ("spin_us", "yield_us", "max_body", "timeout_s", "frame_timeout_s")
        if key in transport_cfg
    ]
    order = ["shm", "socket", "http"] if transport == "auto" else [transport]
    failures = []
    for kind in order:
        try:
            server = ServerProcess(
                env_cfg,
                transport=kind,
                num_envs=games,
                num_workers=max(workers, 1) if kind == "shm" else workers,
                extra=extra,
                **_foreign_server(env_cfg, transport_cfg, kind, games, workers),
            )
        except ConfigError as err:
            failures.append(f"{kind}: {err}")
            log.warning(
                "transport=auto: %s server failed to start (%s); trying the next", kind, err
            )
            continue
        try:
            stepper = connect(kind, server.address, timeout_s=timeout_s, policy=policy)
        except BaseException:
            server.stop()
            raise
        if transport == "auto":
            log.info(
                "transport=auto: using %s%s", kind, f" ({'; '.join(failures)})" if failures else ""
            )
        return RemoteEnv(rows(stepper), device=device, server=server)
    raise ConfigError("no transport could start an env server: " + "; ".join(failures))


def _foreign_server(
    env_cfg: Mapping[str, Any], transport_cfg: Mapping[str, Any], kind: str, games: int, workers: int
) -> dict[str, Any]:
    """``address`` and ``command`` of a backend's own server (``server_command``), else nothing
    (``python -m meeple.serve``)."""
    backend = load_backend(env_cfg["backend"]) if "backend" in env_cfg else None
    command = getattr(backend, "server_command", None)
    if command is None:
        return {}
    address = default_address(kind, str(env_cfg["backend"]))
    wait = {key: transport_cfg[key] for key in ("spin_us", "yield_us", "timeout_s") if key in transport_cfg}
    return {
        "address": address,
        "command": command(
            env_cfg, transport=kind, address=address, num_envs=games,
            num_workers=max(workers, 1) if kind == "shm" else (workers or None), wait=wait,
        ),
    }
