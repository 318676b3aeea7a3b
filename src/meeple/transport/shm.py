"""Shared-memory transport: the segment layout of docs/protocol.md section 4, its client
(:class:`ShmChannel`) and its worker loop (:func:`worker_main`).

The client writes actions into each env's slot and rings each worker's doorbell; each
worker steps the slots it owns and writes results in place; the client reads observations
and masks as views of the segment. No serialisation, no system call while both sides spin.
"""

from __future__ import annotations

import functools
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

from meeple.envs.array import make_array_env
from meeple.transport.host import EnvHost
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
from meeple.transport.waiting import (
    SpinBudget,
    WaitPolicy,
    WordWaiter,
    futex_wake,
    native_shm,
)

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
LOOP_SERVER_GONE = 2  # meeple_native.shm.StepLoop.serve's kind kServerGone


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
        try:
            return cls(name, mm, _checked_layout(path, mm))
        except BaseException:
            mm.close()
            raise

    def check_workers(self) -> None:
        """The workers' slot ranges tile the slots in order (a client trusts them to index
        the segment: a corrupted count would make it build a list of 4 billion offsets)."""
        path, n, expected = os.path.join(SHM_DIR, self.name), self.layout.spaces.num_envs, 0
        for w in range(self.layout.num_workers):
            first, count = self.words[self.word(w, W_FIRST)], self.words[self.word(w, W_COUNT)]
            if first != expected or not 1 <= count <= n - first:
                raise ProtocolError(
                    ErrorCode.MALFORMED,
                    f"{path}: worker {w} claims slots {first}..{first + count - 1}; expected "
                    f"slots from {expected}, within the segment's {n} "
                    "(a corrupted or foreign segment)",
                )
            expected = first + count
        if expected != n:
            raise ProtocolError(
                ErrorCode.MALFORMED,
                f"{path}: the workers serve {expected} of the segment's {n} slots "
                "(a corrupted or foreign segment)",
            )

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

    def slot_offsets(self, first: int, count: int, field_at: int) -> list[int]:
        """Byte offsets of one field (``field_at`` bytes into the slot) of slots ``first..``."""
        size, base = self.layout.slot_size, self.layout.slots_offset + field_at
        return [base + i * size for i in range(first, first + count)]

    def waiter(
        self,
        index: int,
        sleeping: int,
        *,
        changed: bool,
        policy: WaitPolicy,
        alive: Callable[[], str | None],
        timeout_s: float | None = None,
        native: Any = None,
    ) -> Any:
        """A waiter on ``words[index]`` (:class:`WordWaiter`, or its native twin from
        ``native``, :func:`native_shm`): ``.wait(value)`` returns the word once ready and
        raises ``TimeoutError`` or ``ConnectionError``."""
        timeout_s = policy.timeout_s if timeout_s is None else timeout_s
        if native is not None:
            return native.WordWaiter(
                self.mm, 4 * index, 4 * sleeping, changed, policy.spin_us, policy.yield_us,
                timeout_s, alive,
            )  # fmt: skip
        return WordWaiter(
            self.words,
            index,
            changed=changed,
            address=self.address(index),
            sleeping=sleeping,
            policy=policy,
            alive=alive,
            timeout_s=timeout_s,
            budget=SpinBudget(),
        )

    def set_error(self, worker: int, code: int, text: str) -> None:
        at = self.layout.workers_offset + worker * WORKER_BLOCK
        raw = text.encode()[:ERROR_TEXT]
        self.mm[at + W_TEXT_AT : at + W_TEXT_AT + len(raw)] = raw
        struct.pack_into("<HH", self.mm, at + W_ERROR_AT, code, len(raw))

    def error(self, worker: int) -> tuple[int, str]:
        at = self.layout.workers_offset + worker * WORKER_BLOCK
        code, n = struct.unpack_from("<HH", self.mm, at + W_ERROR_AT)
        return code, bytes(self.mm[at + W_TEXT_AT : at + W_TEXT_AT + n]).decode(errors="replace")

    def raise_worker_errors(self, workers: range) -> None:
        """The error of the first of ``workers`` whose last answer was one, raised."""
        words = self.words
        for worker in workers:
            if words[self.word(worker, W_ERROR_AT // 4)] & 0xFFFF:  # the u16 code at byte 84
                raise ProtocolError(*self.error(worker))

    def check_server(self) -> None:
        # busy clients never reach the slow path that checks: they look every so often
        if not pid_alive(self.server_pid):
            raise ProtocolError(ErrorCode.INTERNAL, f"env server (pid {self.server_pid}) died")

    def steps_at(self, worker: int) -> int:
        """Byte offset of a worker's u64 count of env steps served."""
        return self.layout.workers_offset + worker * WORKER_BLOCK + W_STEPS_AT

    def steps(self) -> int:
        return sum(
            U64.unpack_from(self.mm, self.steps_at(w))[0] for w in range(self.layout.num_workers)
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


def _checked_layout(path: str, mm: mmap.mmap) -> Layout:
    """The layout a segment's control block describes, each field checked against the file
    and against what its SPACES block implies: one clear error, never an index out of it."""

    def refuse(what: str) -> ProtocolError:
        return ProtocolError(
            ErrorCode.MALFORMED, f"{path}: {what} (a corrupted or foreign segment)"
        )

    size = len(mm)
    if size < CONTROL.size:
        raise refuse(f"{size} bytes, shorter than its {CONTROL.size}-byte control block")
    fields = CONTROL.unpack_from(mm, 0)
    if fields[0] != SHM_MAGIC or fields[1] != SHM_VERSION:
        raise ProtocolError(
            ErrorCode.VERSION,
            f"{path}: magic 0x{fields[0]:08X} version {fields[1]}; "
            f"expected 0x{SHM_MAGIC:08X} version {SHM_VERSION}",
        )
    num_envs, num_workers = fields[3], fields[11]
    if not 1 <= num_workers <= num_envs:
        raise refuse(f"num_workers={num_workers} with num_envs={num_envs}")
    spaces_offset, spaces_len = fields[13], fields[14]
    if fields[12] != Layout.workers_offset or spaces_offset != (
        Layout.workers_offset + num_workers * WORKER_BLOCK
    ):
        raise refuse(f"workers_offset={fields[12]}, spaces_offset={spaces_offset}")
    if spaces_offset + spaces_len > size:
        raise refuse(f"a SPACES block of {spaces_len} bytes at {spaces_offset} in {size} bytes")
    try:
        spaces = Spaces.decode(mm[spaces_offset : spaces_offset + spaces_len])
    except (ProtocolError, struct.error, ValueError) as err:
        raise refuse(f"its SPACES block does not decode ({err})") from None
    layout = Layout(spaces, num_workers)
    found = dict(zip(("num_seats", "num_envs", "num_actions", "obs_bytes", "record_size",
                      "slot_size", "slots_offset"), fields[2:9]))  # fmt: skip
    implied = dict(
        num_seats=spaces.num_seats, num_envs=spaces.num_envs, num_actions=spaces.num_actions,
        obs_bytes=spaces.obs_bytes, record_size=spaces.record_size,
        slot_size=layout.slot_size, slots_offset=layout.slots_offset,
    )  # fmt: skip
    wrong = [f"{k}={found[k]} (its SPACES imply {v})" for k, v in implied.items() if found[k] != v]
    if wrong:
        raise refuse(", ".join(wrong))
    if layout.size > size:
        raise refuse(f"{size} bytes; its layout needs {layout.size}")
    return layout


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


def _peer_gone(seg: Segment, worker: int, pid: int) -> str | None:
    """Why a client's wait on ``worker`` cannot be answered, or None (its liveness check)."""
    if not pid_alive(pid):  # first: it says which worker (and why it closes)
        return f"env server worker {worker} (pid {pid}) died"
    if seg.state == STATE_CLOSING:
        return "the env server is shutting down"
    if not pid_alive(seg.server_pid):
        return f"env server (pid {seg.server_pid}) died"
    return None


def _wait_error(worker: int, err: Exception, timeout_s: float) -> ProtocolError:
    if isinstance(err, TimeoutError):
        return ProtocolError(
            ErrorCode.INTERNAL,
            f"env server worker {worker}: {err} (transport.timeout_s={timeout_s})",
        )
    return ProtocolError(ErrorCode.INTERNAL, str(err))


class ShmChannel:
    """Drives the workers of a segment: the client side of the shm data plane.

    Results are views of the segment (``transient``: the next request overwrites them).
    """

    transient = True

    def __init__(self, name: str, policy: WaitPolicy | None = None) -> None:
        self.segment = seg = Segment.attach(name)
        seg.check_workers()
        self.spaces = seg.layout.spaces
        self.policy = policy or WaitPolicy()
        self.workers = range(seg.layout.num_workers)
        self._pids = [seg.words[seg.word(w, W_PID)] for w in self.workers]
        self._doorbell = [seg.word(w, W_DOORBELL) for w in self.workers]
        ranges = [
            (seg.words[seg.word(w, W_FIRST)], seg.words[seg.word(w, W_COUNT)]) for w in self.workers
        ]
        self._command = -1
        self._requests = 0
        self._reset = False  # this client sent RESET (it may step: protocol.md's not_ready)
        self.single = seg.records[:, 0]
        # Views made once: field lookups on the slots' structured array were a few
        # microseconds of every 1-env request.
        self._actions = seg.slots["actions"]
        self._seat_actions = self._actions[:, 0] if self.spaces.num_seats == 1 else None
        self._shape = (self.spaces.num_envs,)  # of the actions of a STEP
        native = native_shm()
        self.native = native is not None
        self._rings = [  # per worker: hand it the next request, return its seq
            self._native_ring(native, w, first, n) if native else self._python_ring(w, first, n)
            for w, (first, n) in zip(self.workers, ranges)
        ]
        self._replies = [  # waits for each worker's done word
            seg.waiter(
                seg.word(w, W_DONE),
                seg.word(w, W_CLIENT_SLEEPING),
                changed=False,
                policy=self.policy,
                alive=functools.partial(_peer_gone, seg, w, self._pids[w]),  # no cycle via self
                native=native,
            )
            for w in self.workers
        ]
        self._quick_step = None
        if self.spaces.num_seats == 1 and len(self.workers) == 1:
            self._quick_step = self._native_step(native) if native else self._python_step()
        self.sync()

    def _native_ring(self, native: Any, worker: int, first: int, count: int) -> Callable[[], int]:
        seg = self.segment
        return native.Ring(
            seg.mm,
            seg.slot_offsets(first, count, 0),  # req_seq
            4 * self._doorbell[worker],
            4 * seg.word(worker, W_WORKER_SLEEPING),
        )

    def _python_ring(self, worker: int, first: int, count: int) -> Callable[[], int]:
        """The ring of one worker: its slots' req_seq, then its doorbell (a futex wake if
        it sleeps). A handful of slots are written word by word (~0.05 us each; a numpy
        fill ~0.4 us)."""
        seg = self.segment
        words, doorbell = seg.words, self._doorbell[worker]
        sleeping, address = seg.word(worker, W_WORKER_SLEEPING), seg.address(doorbell)
        slot_words = seg.slot_words(first, count)
        req_seq = seg.slots["req_seq"][first : first + count]

        def ring() -> int:
            seq = (words[doorbell] + 1) & 0xFFFFFFFF
            if slot_words is not None:
                for i in slot_words:
                    words[i] = seq
            else:
                req_seq[...] = seq
            words[doorbell] = seq
            if words[sleeping]:
                futex_wake(address)
            return seq

        return ring

    def _native_step(self, native: Any) -> Callable[[np.ndarray], np.ndarray]:
        """STEP for one worker and one seat, its write, ring and wait in native code
        (``OneWorkerStep``, one call); Python only looks further when it says to."""
        seg, single, timeout_s = self.segment, self.single, self.policy.timeout_s
        fast = native.OneWorkerStep(
            seg.mm,
            seg.slot_offsets(0, self.spaces.num_envs, 24),  # each slot's (one) action
            self._rings[0],
            self._replies[0],
            4 * seg.word(0, W_ERROR_AT // 4),
            CLIENT_LIVENESS_EVERY,
        )

        def step(actions: np.ndarray) -> np.ndarray:  # refers to no channel: no cycle
            try:
                look = fast(actions)
            except (TimeoutError, ConnectionError) as err:
                raise _wait_error(0, err, timeout_s) from err
            if look:  # a worker error, or the periodic look at the server
                seg.check_server()
                seg.raise_worker_errors(range(1))
            return single

        return step

    def _python_step(self) -> Callable[[np.ndarray], np.ndarray]:
        """STEP for one worker and one seat: :meth:`request` without its branches and
        per-worker lists (what it touches is bound here once). Client time per 1-env request
        with the reply already in place: ~1.5 us, ~2.0 us through :meth:`request`."""
        single, seat_actions, ring, answered = (
            self.single,
            self._seat_actions,
            self._rings[0],
            self._answered,
        )
        wait, only = self._replies[0].wait, range(1)

        def step(actions: np.ndarray) -> np.ndarray:
            seat_actions[...] = actions
            seq = ring()
            try:
                wait(seq)
            except (TimeoutError, ConnectionError) as err:
                raise self._wait_error(0, err) from err
            answered(only)
            return single

        return step

    def _answered(self, workers: range) -> None:
        """After the replies: the periodic look at the server, then any worker's error."""
        self._requests += 1
        if self._requests % CLIENT_LIVENESS_EVERY == 0:
            self.segment.check_server()
        self.segment.raise_worker_errors(workers)

    def sync(self) -> None:
        """Wait out a request a previous client left in flight; continue its sequence numbers."""
        for w in self.workers:
            self._wait(w, self.segment.words[self._doorbell[w]])

    def _wait(self, worker: int, seq: int) -> None:
        try:
            self._replies[worker].wait(seq)
        except (TimeoutError, ConnectionError) as err:
            raise self._wait_error(worker, err) from err

    def _wait_error(self, worker: int, err: Exception) -> ProtocolError:
        return _wait_error(worker, err, self.policy.timeout_s)

    def request(
        self,
        command: int,
        *,
        seed: int | None = None,
        actions: np.ndarray | None = None,
        all_seats: bool = False,
    ) -> np.ndarray:
        seg = self.segment
        if command != RESET and not self._reset:
            self._refuse(command)
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
        seqs = [ring() for ring in self._rings]
        worker = 0
        try:
            for worker, seq in enumerate(seqs):
                self._replies[worker].wait(seq)
        except (TimeoutError, ConnectionError) as err:
            raise self._wait_error(worker, err) from err
        finally:
            if all_seats:
                seg.slots["flags"] = 0
        self._answered(self.workers)
        self._reset = True
        return seg.records if command == STEP_MULTI or all_seats else self.single

    def _refuse(self, command: int) -> None:
        """Before this client's first RESET, STEP and STEP_MULTI are ``not_ready``: the data
        plane has no connection to tell clients apart, so the client keeps the rule."""
        if command in (STEP, STEP_MULTI):
            raise ProtocolError(
                ErrorCode.NOT_READY,
                f"{MsgType(command).name} before RESET; send RESET first (a connection steps "
                "only after its own RESET: the envs may hold another client's episodes)",
            )

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

    def waits_ended(self) -> list[int] | None:
        """How many of this client's waits ended while spinning, yielding and on the futex
        (over all workers; native path only, else None)."""
        if not self.native:
            return None
        return [sum(n) for n in zip(*(reply.ended for reply in self._replies))]

    def close(self) -> None:
        # the native objects hold the mapping (and their waiters the channel, via alive)
        self.single = self._quick_step = None
        self._rings, self._replies = [], []
        self.segment.close()


# -- worker ---------------------------------------------------------------------------------------


def worker_main(name: str, worker: int, env_cfg: Mapping[str, Any], policy: WaitPolicy) -> None:
    """A worker process: build its env slots, then serve doorbells until the server closes."""
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

    def alive() -> str | None:
        if seg.state == STATE_CLOSING:
            return "closing"
        if os.getppid() != server_pid:
            return "server died"
        return None

    native = native_shm()
    last, last_code, served = words[doorbell], 0, 0
    requests = seg.waiter(
        doorbell,
        worker_sleeping,
        changed=True,
        policy=policy,
        alive=alive,
        timeout_s=float("inf"),
        native=native,
    )
    mm, head_at = seg.mm, seg.layout.slots_offset + first * seg.layout.slot_size
    slot_actions = slots["actions"][:, 0]  # a view: STEP reads the client's actions in place
    if native is None:
        publish = _python_publisher(seg, worker, first, count)
    else:  # STEPs wait, check, step and publish in native code
        publish = native.Publisher(
            mm,
            seg.slot_offsets(first, count, 4),  # resp_seq
            seg.steps_at(worker),
            4 * seg.word(worker, W_ENV_ERRORS),
            4 * done,
            4 * client_sleeping,
        )
        mask_at = seg.layout.spaces.record_dtype().fields["mask"][1]  # in a seat's record
        loop = native.StepLoop(
            mm,
            requests,
            publish,
            head_at + 8,  # the command byte
            seg.slot_offsets(first, count, 24),  # each slot's seat-0 action
            seg.slot_offsets(first, count, seg.layout.records_offset + mask_at),
            seg.layout.spaces.num_actions,
            functools.partial(env.step, slot_actions, single),
            server_pid,
            LIVENESS_EVERY,
        )
    # Ready only now: a client may ring as soon as it sees every pid, and a ring before
    # ``last`` was read above would be waited past for ever (the lost first request).
    words[seg.word(worker, W_PID)] = os.getpid()
    try:
        while True:
            error = None
            try:
                if native is not None:
                    kind, seq, host.steps, error = loop.serve(
                        last, host.steps, host.env_errors, not last_code and host.masks_in(single),
                        STEP,
                    )  # fmt: skip
                    if kind == LOOP_SERVER_GONE:
                        break  # the server died while a client kept us busy
                else:
                    seq = requests.wait(last)
                    served += 1
                    if served % LIVENESS_EVERY == 0 and os.getppid() != server_pid:
                        break  # the server died while a client kept us busy
            except ConnectionError:
                break
            last = seq
            code, text = 0, ""
            command = mm[head_at + 8]  # every slot of a request carries the same command
            try:
                if error is not None:  # the native loop's env step raised
                    raise host.contain(error, single)
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
            publish(seq, host.steps, host.env_errors)
    finally:
        env.close()


def _python_publisher(seg: Segment, worker: int, first: int, count: int) -> Callable:
    """A worker's answer to request ``seq`` (the Python path of ``native_shm().Publisher``):
    its slots' resp_seq, its step and env-error counters, then its done word (a futex wake
    if the client sleeps)."""
    words, mm = seg.words, seg.mm
    resp_seq = seg.slots["resp_seq"][first : first + count]
    resp_seq_words = seg.slot_words(first, count)  # resp_seq is the u32 after req_seq
    resp_seq_words = None if resp_seq_words is None else [i + 1 for i in resp_seq_words]
    steps_at = seg.steps_at(worker)
    env_errors, done = seg.word(worker, W_ENV_ERRORS), seg.word(worker, W_DONE)
    client_sleeping, done_address = seg.word(worker, W_CLIENT_SLEEPING), seg.address(done)

    def publish(seq: int, steps: int, errors: int) -> None:
        if resp_seq_words is not None:
            for i in resp_seq_words:
                words[i] = seq
        else:
            resp_seq[...] = seq
        U64.pack_into(mm, steps_at, steps)
        words[env_errors] = errors
        words[done] = seq
        if words[client_sleeping]:
            futex_wake(done_address)

    return publish
