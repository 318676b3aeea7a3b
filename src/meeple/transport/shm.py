"""Shared-memory transport: the segment layout of docs/protocol.md section 4, its client
(:class:`ShmChannel`) and its worker loop (:func:`worker_main`).

The client writes actions into each env's slot and rings each worker's doorbell; each
worker steps the slots it owns and writes results in place; the client reads observations
and masks as views of the segment. No serialisation, no system call while both sides spin.
"""

from __future__ import annotations

import hashlib
import logging
import mmap
import os
import signal
import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from meeple.transport.protocol import (
    OBSERVE,
    OBSERVE_ALL_SEATS_UNSERVED,
    RESET,
    STEP,
    STEP_MULTI,
    ErrorCode,
    MsgType,
    ProtocolError,
    Spaces,
    round_up,
)
from meeple.transport.waiting import SpinBudget, WaitPolicy, WaitTimeout, WordWaiter, futex_wake

log = logging.getLogger(__name__)

SHM_MAGIC = 0x4853504D  # "MPSH"
SHM_VERSION = 1
SHM_DIR = "/dev/shm"
CONTROL = struct.Struct("<IHHIIIIIIIIIIIIQ")  # 64 bytes, fields in docs/protocol.md order
WORKER_BLOCK = 320
ERROR_TEXT = 224
STATE_STARTING, STATE_READY, STATE_CLOSING = 0, 1, 2
LIVENESS_EVERY = 256  # a busy worker checks its server (getppid: ~0.3 us) every this many requests
# A busy client checks the server every this many: reading /proc/PID/stat (a zombie is dead)
# takes ~35 us, which was every 256th round trip's latency and most of the 1-env p99.
# The workers notice a dead server first (above) and stop answering, so the client's
# futex wait finds out anyway; this check only covers a client kept busy meanwhile.
CLIENT_LIVENESS_EVERY = 4096
# word (u32) offsets inside a worker block
W_DOORBELL, W_WORKER_SLEEPING, W_ENV_ERRORS = 0, 1, 2
W_DONE, W_CLIENT_SLEEPING, W_FIRST, W_COUNT, W_PID = 16, 17, 18, 19, 20
W_ERROR_AT, W_STEPS_AT, W_TEXT_AT = 84, 88, 96  # byte offsets
U64 = struct.Struct("<Q")


def segment_name(address: str) -> str:
    """The segment of the server listening at ``address`` (stable: crash recovery finds it)."""
    digest = hashlib.sha1(os.path.abspath(address).encode()).hexdigest()[:16]
    return f"meeple-{digest}"


def pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        with open(f"/proc/{pid}/stat") as f:  # a zombie is dead for our purposes
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, IndexError):
        return False
    except PermissionError:
        return True


@dataclass(frozen=True)
class Layout:
    spaces: Spaces
    num_workers: int

    workers_offset = 64

    @property
    def spaces_offset(self) -> int:
        return self.workers_offset + self.num_workers * WORKER_BLOCK

    @property
    def slots_offset(self) -> int:
        return round_up(self.spaces_offset + len(self.spaces.encode()), 64)

    @property
    def records_offset(self) -> int:
        return round_up(24 + 4 * self.spaces.num_seats, 8)

    @property
    def slot_size(self) -> int:
        return round_up(self.records_offset + self.spaces.num_seats * self.spaces.record_size, 64)

    @property
    def size(self) -> int:
        return self.slots_offset + self.spaces.num_envs * self.slot_size


class Segment:
    """A mapped segment with typed views of its control words, slots and records."""

    def __init__(self, name: str, mm: mmap.mmap, layout: Layout) -> None:
        self.name, self.mm, self.layout = name, mm, layout
        spaces = layout.spaces
        self.words = memoryview(mm).cast("I")
        self.base = np.frombuffer(mm, dtype=np.uint8).ctypes.data
        header = np.dtype(
            {
                "names": ["req_seq", "resp_seq", "command", "status", "flags", "seed", "actions"],
                "formats": ["<u4", "<u4", "u1", "u1", "u1", "<u8", ("<i4", (spaces.num_seats,))],
                "offsets": [0, 4, 8, 9, 10, 16, 24],
                "itemsize": layout.slot_size,
            }
        )
        n = spaces.num_envs
        self.slots = np.ndarray((n,), header, buffer=mm, offset=layout.slots_offset)
        self.records = np.ndarray(
            (n, spaces.num_seats),
            spaces.record_dtype(),
            buffer=mm,
            offset=layout.slots_offset + layout.records_offset,
            strides=(layout.slot_size, spaces.record_size),
        )

    # -- creation / attachment --
    @classmethod
    def create(cls, name: str, spaces: Spaces, num_workers: int) -> Segment:
        layout = Layout(spaces, num_workers)
        path = os.path.join(SHM_DIR, name)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.ftruncate(fd, layout.size)
            mm = mmap.mmap(fd, layout.size)
        finally:
            os.close(fd)
        blob = spaces.encode()
        CONTROL.pack_into(
            mm,
            0,
            SHM_MAGIC,
            SHM_VERSION,
            spaces.num_seats,
            spaces.num_envs,
            spaces.num_actions,
            spaces.obs_bytes,
            spaces.record_size,
            layout.slot_size,
            layout.slots_offset,
            os.getpid(),
            STATE_STARTING,
            num_workers,
            layout.workers_offset,
            layout.spaces_offset,
            len(blob),
            0,
        )
        mm[layout.spaces_offset : layout.spaces_offset + len(blob)] = blob
        return cls(name, mm, layout)

    @classmethod
    def attach(cls, name: str) -> Segment:
        path = os.path.join(SHM_DIR, name)
        try:
            fd = os.open(path, os.O_RDWR)
        except FileNotFoundError as err:
            raise ProtocolError(
                ErrorCode.NOT_READY, f"shared-memory segment {path} does not exist"
            ) from err
        try:
            mm = mmap.mmap(fd, os.fstat(fd).st_size)
        finally:
            os.close(fd)
        fields = CONTROL.unpack_from(mm, 0)
        if fields[0] != SHM_MAGIC or fields[1] != SHM_VERSION:
            raise ProtocolError(
                ErrorCode.VERSION,
                f"{path}: magic 0x{fields[0]:08X} version {fields[1]}; "
                f"expected 0x{SHM_MAGIC:08X} version {SHM_VERSION}",
            )
        spaces_offset, spaces_len = fields[13], fields[14]
        spaces = Spaces.decode(mm[spaces_offset : spaces_offset + spaces_len])
        return cls(name, mm, Layout(spaces, fields[11]))

    @staticmethod
    def read_server_pid(name: str) -> int | None:
        try:
            with open(os.path.join(SHM_DIR, name), "rb") as f:
                head = f.read(CONTROL.size)
        except FileNotFoundError:
            return None
        return CONTROL.unpack(head)[9] if len(head) == CONTROL.size else 0

    # -- control words --
    @property
    def state(self) -> int:
        return self.words[9]

    @state.setter
    def state(self, value: int) -> None:
        self.words[9] = value

    @property
    def server_pid(self) -> int:
        return self.words[8]

    def word(self, worker: int, index: int) -> int:
        """Index into ``self.words`` of a worker block's u32 field."""
        return (self.layout.workers_offset + worker * WORKER_BLOCK) // 4 + index

    def slot_words(self, first: int, count: int) -> list[int] | None:
        """Indices into ``self.words`` of the first u32 (req_seq) of slots ``first..``, if they
        are few: writing a handful one by one (~0.05 us each) beats a numpy fill (~0.4 us)."""
        if count > 4:
            return None
        step, base = self.layout.slot_size // 4, self.layout.slots_offset // 4
        return [base + i * step for i in range(first, first + count)]

    def address(self, word_index: int) -> int:
        return self.base + 4 * word_index

    def set_error(self, worker: int, code: int, text: str) -> None:
        at = self.layout.workers_offset + worker * WORKER_BLOCK
        raw = text.encode()[:ERROR_TEXT]
        self.mm[at + W_TEXT_AT : at + W_TEXT_AT + len(raw)] = raw
        struct.pack_into("<HH", self.mm, at + W_ERROR_AT, code, len(raw))

    def error(self, worker: int) -> tuple[int, str]:
        at = self.layout.workers_offset + worker * WORKER_BLOCK
        code, n = struct.unpack_from("<HH", self.mm, at + W_ERROR_AT)
        return code, bytes(self.mm[at + W_TEXT_AT : at + W_TEXT_AT + n]).decode(errors="replace")

    def add_steps(self, worker: int, steps: int) -> None:
        at = self.layout.workers_offset + worker * WORKER_BLOCK + W_STEPS_AT
        struct.pack_into("<Q", self.mm, at, steps)

    def steps(self) -> int:
        return sum(
            struct.unpack_from(
                "<Q", self.mm, self.layout.workers_offset + w * WORKER_BLOCK + W_STEPS_AT
            )[0]
            for w in range(self.layout.num_workers)
        )

    def env_errors(self) -> int:
        return sum(self.words[self.word(w, W_ENV_ERRORS)] for w in range(self.layout.num_workers))

    def close(self) -> None:
        self.words.release()
        self.slots = self.records = None
        try:
            self.mm.close()
        except BufferError:  # a caller still holds a view; the mapping goes with it
            pass

    def unlink(self) -> None:
        try:
            os.unlink(os.path.join(SHM_DIR, self.name))
        except FileNotFoundError:
            pass


def sweep_stale_segments() -> list[str]:
    """Remove every ``/dev/shm/meeple-*`` segment whose server process is dead (crash leftovers
    at addresses nobody reuses, e.g. per-process default addresses). Returns their names."""
    removed = []
    for name in os.listdir(SHM_DIR) if os.path.isdir(SHM_DIR) else []:
        if not name.startswith("meeple-"):
            continue
        pid = Segment.read_server_pid(name)
        if pid and not pid_alive(pid):  # pid 0: a segment being created right now
            unlink_segment(name)
            removed.append(name)
    if removed:
        log.warning(
            "removed %d stale shared-memory segment(s) of dead servers: %s",
            len(removed),
            ", ".join(removed),
        )
    return removed


def unlink_segment(name: str) -> None:
    try:
        os.unlink(os.path.join(SHM_DIR, name))
    except FileNotFoundError:
        pass


# -- client ---------------------------------------------------------------------------------------


class ShmChannel:
    """Drives the workers of a segment: the client side of the shm data plane.

    Results are views of the segment (``transient``: the next request overwrites them).
    """

    transient = True

    def __init__(self, name: str, policy: WaitPolicy | None = None) -> None:
        self.segment = seg = Segment.attach(name)
        self.spaces = seg.layout.spaces
        self.policy = policy or WaitPolicy()
        self.workers = range(seg.layout.num_workers)
        self._pids = [seg.words[seg.word(w, W_PID)] for w in self.workers]
        self._doorbell = [seg.word(w, W_DOORBELL) for w in self.workers]
        ranges = [
            (seg.words[seg.word(w, W_FIRST)], seg.words[seg.word(w, W_COUNT)]) for w in self.workers
        ]
        self._error = [seg.word(w, W_ERROR_AT // 4) for w in self.workers]
        self._command = -1
        self._requests = 0
        self.single = seg.records[:, 0]
        # Views made once: field lookups on the slots' structured array were a few
        # microseconds of every 1-env request.
        self._actions = seg.slots["actions"]
        self._seat_actions = self._actions[:, 0] if self.spaces.num_seats == 1 else None
        self._shape = (self.spaces.num_envs,)  # of the actions of a STEP
        # per worker, what a request writes (_ring): its doorbell, its sleeping flag, and its
        # slots' req_seq: word by word for a few slots (~0.05 us each; a numpy fill ~0.4 us)
        self._lanes = [
            (
                self._doorbell[w],
                seg.word(w, W_WORKER_SLEEPING),
                seg.slot_words(first, n),
                seg.slots["req_seq"][first : first + n],
            )
            for w, (first, n) in zip(self.workers, ranges)
        ]
        self._replies = [  # waits for each worker's done word
            WordWaiter(
                seg.words,
                seg.word(w, W_DONE),
                changed=False,
                address=seg.address(seg.word(w, W_DONE)),
                sleeping=seg.word(w, W_CLIENT_SLEEPING),
                policy=self.policy,
                alive=lambda w=w: self._alive(w),
                budget=SpinBudget(),
            )
            for w in self.workers
        ]
        self._quick_step = self._one_worker_step() if self.spaces.num_seats == 1 else None
        self.sync()

    def _one_worker_step(self) -> Callable[[np.ndarray], np.ndarray] | None:
        """STEP for one worker and one seat: :meth:`request` without its branches and
        per-worker lists (what it touches is bound here once). Client time per 1-env request
        with the reply already in place: ~1.5 us, ~2.0 us through :meth:`request`."""
        if len(self.workers) != 1:
            return None
        single, seat_actions, ring, answered = (
            self.single,
            self._seat_actions,
            self._ring,
            self._answered,
        )
        (lane,) = self._lanes
        wait, only = self._replies[0].wait, range(1)

        def step(actions: np.ndarray) -> np.ndarray:
            seat_actions[...] = actions
            seq = ring(*lane)
            try:
                wait(seq)
            except (WaitTimeout, ConnectionError) as err:
                raise self._wait_error(0, err) from err
            answered(only)
            return single

        return step

    def _ring(
        self, doorbell: int, sleeping: int, slot_words: list[int] | None, req_seq: np.ndarray
    ) -> int:
        """Hand one worker the next request (its slots' req_seq, then its doorbell; a futex
        wake if it sleeps); the request's seq."""
        words = self.segment.words
        seq = (words[doorbell] + 1) & 0xFFFFFFFF
        if slot_words is not None:
            for i in slot_words:
                words[i] = seq
        else:
            req_seq[...] = seq
        words[doorbell] = seq
        if words[sleeping]:
            futex_wake(self.segment.address(doorbell))
        return seq

    def _answered(self, workers: range) -> None:
        """After the replies: the periodic look at the server, then any worker's error."""
        self._requests += 1
        if self._requests % CLIENT_LIVENESS_EVERY == 0:
            self._check_server()
        words = self.segment.words
        for worker in workers:
            if words[self._error[worker]] & 0xFFFF:  # the u16 code at byte 84 of its block
                raise ProtocolError(*self.segment.error(worker))

    def _check_server(self) -> None:
        # busy loops never reach the slow path that checks: look every so often
        if not pid_alive(self.segment.server_pid):
            raise ProtocolError(
                ErrorCode.INTERNAL, f"env server (pid {self.segment.server_pid}) died"
            )

    def sync(self) -> None:
        """Wait out a request a previous client left in flight; continue its sequence numbers."""
        for w in self.workers:
            self._wait(w, self.segment.words[self._doorbell[w]])

    def _alive(self, worker: int) -> str | None:
        seg = self.segment
        if not pid_alive(self._pids[worker]):  # first: it says which worker (and why it closes)
            return f"env server worker {worker} (pid {self._pids[worker]}) died"
        if seg.state == STATE_CLOSING:
            return "the env server is shutting down"
        if not pid_alive(seg.server_pid):
            return f"env server (pid {seg.server_pid}) died"
        return None

    def _wait(self, worker: int, seq: int) -> None:
        try:
            self._replies[worker].wait(seq)
        except (WaitTimeout, ConnectionError) as err:
            raise self._wait_error(worker, err) from err

    def _wait_error(self, worker: int, err: Exception) -> ProtocolError:
        if isinstance(err, WaitTimeout):
            return ProtocolError(
                ErrorCode.INTERNAL,
                f"env server worker {worker}: {err} (transport.timeout_s={self.policy.timeout_s})",
            )
        return ProtocolError(ErrorCode.INTERNAL, str(err))

    def request(
        self,
        command: int,
        *,
        seed: int | None = None,
        actions: np.ndarray | None = None,
        all_seats: bool = False,
    ) -> np.ndarray:
        seg = self.segment
        if actions is not None:
            n, seats = self.spaces.num_envs, self.spaces.num_seats
            expected = n * seats if command == STEP_MULTI else n
            if actions.size != expected:  # (numpy would broadcast one action to every env)
                per = "env and seat" if command == STEP_MULTI else "env"
                raise ProtocolError(
                    ErrorCode.MALFORMED,
                    f"{actions.size} actions; expected {expected} (one per {per})",
                )
            if self._seat_actions is not None and actions.ndim == 1:
                self._seat_actions[...] = actions
            else:  # STEP of a multi-seat env (every seat) or STEP_MULTI
                self._actions[...] = actions.reshape(len(self._actions), -1)
        if command == RESET:
            seg.slots["flags"] = seed is not None
            seg.slots["seed"] = 0 if seed is None else seed % 2**64
        elif all_seats:  # OBSERVE of every seat: flags bit 1, for this request only
            seg.slots["flags"] = 2
        if command != self._command:
            seg.slots["command"] = self._command = command
        seqs = [self._ring(*lane) for lane in self._lanes]
        worker = 0
        try:
            for worker, seq in enumerate(seqs):
                self._replies[worker].wait(seq)
        except (WaitTimeout, ConnectionError) as err:
            raise self._wait_error(worker, err) from err
        finally:
            if all_seats:
                seg.slots["flags"] = 0
        self._answered(self.workers)
        return seg.records if command == STEP_MULTI or all_seats else self.single

    # RecordStepper interface
    def reset(self, seed: int | None) -> np.ndarray:
        return self.request(MsgType.RESET, seed=seed)

    def step(self, actions: np.ndarray) -> np.ndarray:
        actions = np.asarray(actions, dtype=np.int32)
        if self._command == STEP and self._quick_step is not None and actions.shape == self._shape:
            return self._quick_step(actions)
        return self.request(STEP, actions=actions)

    def step_multi(self, actions: np.ndarray) -> np.ndarray:
        return self.request(MsgType.STEP_MULTI, actions=np.asarray(actions, dtype=np.int32))

    def observe(self, all_seats: bool = False) -> np.ndarray:
        return self.request(MsgType.OBSERVE, all_seats=all_seats)

    def close(self) -> None:
        self.single = None
        self.segment.close()


# -- worker ---------------------------------------------------------------------------------------


def worker_main(name: str, worker: int, env_cfg: Mapping[str, Any], policy: WaitPolicy) -> None:
    """A worker process: build its env slots, then serve doorbells until the server closes."""
    from meeple.envs.array import make_array_env
    from meeple.transport.host import EnvHost

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the server handles Ctrl-C and stops us
    seg = Segment.attach(name)
    words = seg.words
    first, count = words[seg.word(worker, W_FIRST)], words[seg.word(worker, W_COUNT)]
    try:
        env = make_array_env(env_cfg, count)
        host = EnvHost(env, first_slot=first)
    except Exception as err:
        seg.set_error(
            worker,
            ErrorCode.INTERNAL,
            f"worker {worker} could not build its env: {type(err).__name__}: {err}",
        )
        raise
    server_pid = seg.server_pid
    slots, records = seg.slots[first : first + count], seg.records[first : first + count]
    single = records[:, 0]
    doorbell, done = seg.word(worker, W_DOORBELL), seg.word(worker, W_DONE)
    worker_sleeping, client_sleeping = (
        seg.word(worker, W_WORKER_SLEEPING),
        seg.word(worker, W_CLIENT_SLEEPING),
    )
    words[seg.word(worker, W_PID)] = os.getpid()  # ready

    def alive() -> str | None:
        if seg.state == STATE_CLOSING:
            return "closing"
        if os.getppid() != server_pid:
            return "server died"
        return None

    last, last_code, served = words[doorbell], 0, 0
    requests = WordWaiter(
        words,
        doorbell,
        changed=True,
        address=seg.address(doorbell),
        sleeping=worker_sleeping,
        policy=policy,
        alive=alive,
        timeout_s=float("inf"),
        budget=SpinBudget(),
    )
    mm, head_at = seg.mm, seg.layout.slots_offset + first * seg.layout.slot_size
    slot_actions = slots["actions"][:, 0]  # a view: STEP reads the client's actions in place
    resp_seq = slots["resp_seq"]
    resp_seq_words = seg.slot_words(first, count)  # resp_seq is the u32 after req_seq
    resp_seq_words = None if resp_seq_words is None else [i + 1 for i in resp_seq_words]
    env_errors = seg.word(worker, W_ENV_ERRORS)
    steps_at = seg.layout.workers_offset + worker * WORKER_BLOCK + W_STEPS_AT
    done_address = seg.address(done)
    try:
        while True:
            try:
                seq = requests.wait(last)
            except ConnectionError:
                break
            last = seq
            served += 1
            if served % LIVENESS_EVERY == 0 and os.getppid() != server_pid:
                break  # the server died while a client kept us busy
            code, text = 0, ""
            command = mm[head_at + 8]  # every slot of a request carries the same command
            try:
                if command == STEP:
                    host.execute(command, single, records, actions=slot_actions)
                else:
                    head = slots[0]
                    if command == OBSERVE and head["flags"] & 2:
                        raise ProtocolError(ErrorCode.UNKNOWN_TYPE, OBSERVE_ALL_SEATS_UNSERVED)
                    seed = int(head["seed"]) if head["flags"] & 1 else None
                    host.execute(
                        command, single, records, seed=seed, actions=slots["actions"].copy()
                    )
            except ProtocolError as err:
                code, text = int(err.code), err.text
            except Exception as err:  # noqa: BLE001 - answered as ERROR internal
                log.exception("worker %d failed", worker)
                code, text = ErrorCode.INTERNAL, f"{type(err).__name__}: {err}"
            if code or last_code:  # the common case (ok after ok) writes nothing here
                slots["status"] = code
                seg.set_error(worker, code, text)
                last_code = code
            if resp_seq_words is not None:
                for i in resp_seq_words:
                    words[i] = seq
            else:
                resp_seq[...] = seq
            U64.pack_into(mm, steps_at, host.steps)
            words[env_errors] = host.env_errors
            words[done] = seq
            if words[client_sleeping]:
                futex_wake(done_address)
    finally:
        env.close()
