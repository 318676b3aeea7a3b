"""GoalGrid in NVIDIA Warp kernels (CPU or CUDA), bit-identical to :class:`TorchGoalGrid`.

The env's state lives in torch tensors with Warp views built once; the caller's
storages (actions, rewards, dones, the rollout's observations) get one Warp view
each on first use (:class:`~meeple.envs.packed_env.ViewCache`) and are then addressed
by offset, so a step costs kernel launches only. On CUDA the kernels go on the
caller's current torch stream (an actor stream, say), never on Warp's own.
"""

from __future__ import annotations

import torch
import warp as wp

from meeple.envs import goal_grid_torch as ref
from meeple.envs.packed import DIFF_LUT, FRAME_BYTES, ROW_BYTES
from meeple.envs.packed_env import ViewCache, check_storage
from meeple.envs.warp_init import init_warp

wp.set_module_options({"enable_backward": False})

CELL = wp.constant(ref.CELL)
GRID_W = wp.constant(ref.GRID_W)
GRID_H = wp.constant(ref.GRID_H)
CELLS = wp.constant(ref.CELLS)
SPRITE_LO = wp.constant(ref.SPRITE_LO)
SPRITE_HI = wp.constant(ref.SPRITE_HI)
ROW = wp.constant(ROW_BYTES)
FRAME = wp.constant(FRAME_BYTES)
OBS = wp.constant(ref.FRAMES_PER_OBS * FRAME_BYTES)
MIX_A = wp.constant(wp.uint32(ref.MIX_A))
MIX_B = wp.constant(wp.uint32(ref.MIX_B))
GOLDEN = wp.constant(wp.uint32(ref.GOLDEN))
INV_SCALE = wp.constant(1.0 / ref.DISTANCE_SCALE)  # a power of two: exact, like torch's division
STEP_COST = wp.constant(ref.STEP_COST)
SUCCESS_BONUS = wp.constant(ref.SUCCESS_BONUS)


@wp.func
def mix32(x: wp.uint32) -> wp.uint32:
    x = x ^ (x >> wp.uint32(16))
    x = x * MIX_A
    x = x ^ (x >> wp.uint32(15))
    x = x * MIX_B
    return x ^ (x >> wp.uint32(16))


@wp.func
def draw(seed: wp.uint32, env: int, episode: int, salt: int, modulus: int) -> int:
    """Uniform in ``[0, modulus)``; the remainder is taken in uint32, as torch takes it in int64."""
    inner = mix32(wp.uint32(env) * GOLDEN + mix32(wp.uint32(episode * 2 + salt)))
    return int(mix32(inner ^ seed) % wp.uint32(modulus))


@wp.func
def packed_byte(row: int, byte_col: int, x: int, y: int) -> int:
    """Byte ``byte_col`` of row ``row`` of the frame with the agent at ``(x, y)``."""
    value = int(0)  # noqa: UP018 (Warp: a mutable loop variable needs a typed constructor)
    for i in range(4):
        col = byte_col * 4 + i
        shade = int(col < (x + 1) * CELL) + 2 * int(row < (y + 1) * CELL)
        dc = col - x * CELL
        dr = row - y * CELL
        if dc >= SPRITE_LO and dc < SPRITE_HI and dr >= SPRITE_LO and dr < SPRITE_HI:
            shade = shade ^ 3
        value = value | (shade << (2 * i))
    return value


@wp.func
def frame_distance(x: int, y: int, gx: int, gy: int, lut: wp.array(dtype=wp.int32)) -> int:
    total = int(0)  # noqa: UP018
    for j in range(FRAME):
        a = packed_byte(j // ROW, j % ROW, x, y)
        b = packed_byte(j // ROW, j % ROW, gx, gy)
        total += int(lut[a * 256 + b])
    return total


@wp.func
def start_episode(
    n: int,
    seed: wp.uint32,
    episode: wp.array(dtype=wp.int64),
    x: wp.array(dtype=wp.int64),
    y: wp.array(dtype=wp.int64),
    gx: wp.array(dtype=wp.int64),
    gy: wp.array(dtype=wp.int64),
    distance: wp.array(dtype=wp.int64),
    lut: wp.array(dtype=wp.int32),
):
    e = int(episode[n])
    start = draw(seed, n, e, 0, CELLS)
    goal = (start + 1 + draw(seed, n, e, 1, CELLS - 1)) % CELLS
    x[n] = wp.int64(start % GRID_W)
    y[n] = wp.int64(start // GRID_W)
    gx[n] = wp.int64(goal % GRID_W)
    gy[n] = wp.int64(goal // GRID_W)
    distance[n] = wp.int64(
        frame_distance(start % GRID_W, start // GRID_W, goal % GRID_W, goal // GRID_W, lut)
    )


@wp.kernel
def reset_kernel(
    seed: wp.uint32,
    episode: wp.array(dtype=wp.int64),
    x: wp.array(dtype=wp.int64),
    y: wp.array(dtype=wp.int64),
    gx: wp.array(dtype=wp.int64),
    gy: wp.array(dtype=wp.int64),
    distance: wp.array(dtype=wp.int64),
    t: wp.array(dtype=wp.int64),
    ep_return: wp.array(dtype=wp.float32),
    lut: wp.array(dtype=wp.int32),
):
    n = wp.tid()
    start_episode(n, seed, episode, x, y, gx, gy, distance, lut)
    t[n] = wp.int64(0)
    ep_return[n] = 0.0


@wp.kernel
def move_kernel(
    actions: wp.array(dtype=wp.int64),
    offset: int,
    dx: wp.array(dtype=wp.int32),
    dy: wp.array(dtype=wp.int32),
    x: wp.array(dtype=wp.int64),
    y: wp.array(dtype=wp.int64),
    t: wp.array(dtype=wp.int64),
    after: wp.array(dtype=wp.int32),
):
    n = wp.tid()
    a = wp.clamp(int(actions[offset + n]), 0, 4)
    x[n] = wp.int64(wp.clamp(int(x[n]) + dx[a], 0, GRID_W - 1))
    y[n] = wp.int64(wp.clamp(int(y[n]) + dy[a], 0, GRID_H - 1))
    t[n] = t[n] + wp.int64(1)
    after[n] = 0


@wp.kernel
def distance_kernel(
    x: wp.array(dtype=wp.int64),
    y: wp.array(dtype=wp.int64),
    gx: wp.array(dtype=wp.int64),
    gy: wp.array(dtype=wp.int64),
    lut: wp.array(dtype=wp.int32),
    after: wp.array(dtype=wp.int32),
):
    n, j = wp.tid()
    row = j // ROW
    col = j % ROW
    a = packed_byte(row, col, int(x[n]), int(y[n]))
    b = packed_byte(row, col, int(gx[n]), int(gy[n]))
    wp.atomic_add(after, n, lut[a * 256 + b])  # integer sums: the same in any order


@wp.kernel
def finish_kernel(
    seed: wp.uint32,
    max_steps: int,
    offset: int,
    after: wp.array(dtype=wp.int32),
    rewards: wp.array(dtype=wp.float32),
    dones: wp.array(dtype=wp.bool),
    last_success: wp.array(dtype=wp.bool),
    episode: wp.array(dtype=wp.int64),
    x: wp.array(dtype=wp.int64),
    y: wp.array(dtype=wp.int64),
    gx: wp.array(dtype=wp.int64),
    gy: wp.array(dtype=wp.int64),
    distance: wp.array(dtype=wp.int64),
    t: wp.array(dtype=wp.int64),
    ep_return: wp.array(dtype=wp.float32),
    episodes: wp.array(dtype=wp.int64),
    successes: wp.array(dtype=wp.int64),
    length_sum: wp.array(dtype=wp.int64),
    return_sum: wp.array(dtype=wp.float32),
    lut: wp.array(dtype=wp.int32),
):
    n = wp.tid()
    d = int(after[n])
    success = d == 0
    done = success or int(t[n]) >= max_steps
    reward = float(int(distance[n]) - d) * INV_SCALE - STEP_COST
    if success:
        reward = reward + SUCCESS_BONUS
    rewards[offset + n] = reward
    dones[offset + n] = done
    last_success[n] = success
    ep_return[n] = ep_return[n] + reward
    distance[n] = wp.int64(d)
    if done:
        episodes[n] = episodes[n] + wp.int64(1)
        if success:
            successes[n] = successes[n] + wp.int64(1)
        length_sum[n] = length_sum[n] + t[n]
        return_sum[n] = return_sum[n] + ep_return[n]
        episode[n] = episode[n] + wp.int64(1)
        start_episode(n, seed, episode, x, y, gx, gy, distance, lut)
        t[n] = wp.int64(0)
        ep_return[n] = 0.0


@wp.kernel
def render_kernel(
    out: wp.array(dtype=wp.uint8),
    base: int,
    x: wp.array(dtype=wp.int64),
    y: wp.array(dtype=wp.int64),
    gx: wp.array(dtype=wp.int64),
    gy: wp.array(dtype=wp.int64),
):
    i = wp.tid()
    n = i // OBS
    j = i % FRAME
    px = int(x[n])
    py = int(y[n])
    if (i % OBS) >= FRAME:  # frame 1: the goal
        px = int(gx[n])
        py = int(gy[n])
    out[base + i] = wp.uint8(packed_byte(j // ROW, j % ROW, px, py))


class WarpGoalGrid(ref.TorchGoalGrid):
    """Same state, contract and results as :class:`TorchGoalGrid`; the work runs in Warp kernels."""

    renderer = "warp"

    def __init__(
        self, num_envs: int, *, max_steps: int = 40, device: str | torch.device = "cpu"
    ) -> None:
        super().__init__(num_envs, max_steps=max_steps, device=device)
        init_warp()
        self.wp_device = wp.device_from_torch(self.device)
        view = lambda t: wp.from_torch(t)  # noqa: E731
        self._lut = view(DIFF_LUT.to(self.device, torch.int32).reshape(-1).contiguous())
        self._dxy = (
            view(torch.tensor(ref.DX, dtype=torch.int32, device=self.device)),
            view(torch.tensor(ref.DY, dtype=torch.int32, device=self.device)),
        )
        self._after = torch.zeros(num_envs, dtype=torch.int32, device=self.device)
        self._w = {k: view(getattr(self, k)) for k in (*ref._STATE, "_after", "last_success")}
        self._w.update({k: view(v) for k, v in self._stats.items()})
        self._out_views = ViewCache(view)
        self._streams: dict[int, wp.Stream] = {}

    def _launch(self, kernel, dim, inputs) -> None:
        stream = None
        if self.device.type == "cuda":  # the caller's current torch stream, by its handle
            current = torch.cuda.current_stream(self.device)
            stream = self._streams.get(current.cuda_stream)
            if stream is None:
                stream = self._streams[current.cuda_stream] = wp.stream_from_torch(current)
        wp.launch(kernel, dim=dim, inputs=inputs, device=self.wp_device, stream=stream)

    def reset(self, seed: int) -> None:
        self.seed = int(seed) & ref.MASK32
        self.episode.zero_()
        for value in self._stats.values():
            value.zero_()
        w = self._w
        self._launch(
            reset_kernel,
            self.num_envs,
            [
                wp.uint32(self.seed),
                w["episode"],
                w["x"],
                w["y"],
                w["gx"],
                w["gy"],
                w["distance"],
                w["t"],
                w["ep_return"],
                self._lut,
            ],
        )

    def step(
        self, actions: torch.Tensor, rewards: torch.Tensor, dones: torch.Tensor, offset: int
    ) -> None:
        n, w = self.num_envs, self._w
        for name, tensor, dtype in (
            ("actions", actions, torch.int64),
            ("rewards", rewards, torch.float32),
            ("dones", dones, torch.bool),
        ):
            check_storage(name, tensor, dtype, self.device, offset + n)
        views = self._out_views
        self._launch(
            move_kernel,
            n,
            [views(actions), offset, *self._dxy, w["x"], w["y"], w["t"], w["_after"]],
        )
        self._launch(
            distance_kernel,
            (n, FRAME_BYTES),
            [w["x"], w["y"], w["gx"], w["gy"], self._lut, w["_after"]],
        )
        self._launch(
            finish_kernel,
            n,
            [
                wp.uint32(self.seed),
                self.max_steps,
                offset,
                w["_after"],
                views(rewards),
                views(dones),
                w["last_success"],
                w["episode"],
                w["x"],
                w["y"],
                w["gx"],
                w["gy"],
                w["distance"],
                w["t"],
                w["ep_return"],
                w["episodes"],
                w["successes"],
                w["length_sum"],
                w["return_sum"],
                self._lut,
            ],
        )

    def render_packed_into(self, out: torch.Tensor, base_offset: int) -> None:
        total = self.num_envs * ref.FRAMES_PER_OBS * FRAME_BYTES
        check_storage("out", out, torch.uint8, self.device, base_offset + total)
        w = self._w
        self._launch(
            render_kernel,
            total,
            [self._out_views(out), base_offset, w["x"], w["y"], w["gx"], w["gy"]],
        )
