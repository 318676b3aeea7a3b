"""GoalGrid in torch ops: meeple's reference packed-frame env (`meeple.envs.goal_grid` picks this
renderer or the bit-identical Warp one, `meeple.envs.goal_grid_warp`, which reuses its constants).

An agent moves on a ``GRID_W x GRID_H`` grid of 8x8-pixel cells; an episode starts at a
random cell with a random other goal cell. The observation is two packed frames, the
agent's rendered frame and the goal frame (the frame rendered with the agent on the
goal), and an episode succeeds when the two are equal, i.e. their L1 distance, computed
on packed bytes with :data:`~meeple.envs.packed.DIFF_LUT`, is 0. The reward is the drop in
that distance (scaled) minus a step cost, plus a bonus on success; episodes time out
after ``max_steps``.

A frame paints two bands, so the distance grows with the grid distance on each axis:
pixel ``(r, c)`` has shade ``(c < (x+1)*8) + 2*(r < (y+1)*8)``, and a 4x4 sprite in the
agent's cell has the other shades (xor 3). Episode starts come from a counter-based hash
of ``(seed, env, episode)``, so the Warp and torch renderers agree bit for bit, resets included.

Actions: 0 stay, 1 up, 2 down, 3 left, 4 right. All rewards are multiples of 1/2048 with
small magnitude, so they (and episode returns) are exact in float32 on both renderers.
"""

from __future__ import annotations

import functools

import torch

from meeple.envs.packed import DIFF_LUT, FRAME_BYTES, HEIGHT, ROW_BYTES, WIDTH
from meeple.envs.packed_env import check_storage, resolve_device

CELL = 4
GRID_W = WIDTH // CELL  # 10
GRID_H = HEIGHT // CELL  # 9
CELLS = GRID_W * GRID_H
SPRITE_LO, SPRITE_HI = 1, 3  # sprite pixels within the agent's cell
NUM_ACTIONS = 5
FRAMES_PER_OBS = 2  # agent frame, goal frame
DX = (0, 0, 0, -1, 1)
DY = (0, -1, 1, 0, 0)
# Reward = (d_before - d_after) / DISTANCE_SCALE - STEP_COST + SUCCESS_BONUS * success.
DISTANCE_SCALE = 2048.0
STEP_COST = 1.0 / 64.0
SUCCESS_BONUS = 1.0
MASK32 = 0xFFFFFFFF
MIX_A, MIX_B, GOLDEN = 0x7FEB352D, 0x846CA68B, 0x9E3779B1
SALT_START, SALT_GOAL = 0, 1


# -- the hash both renderers share (uint32 arithmetic; int64 tensors here) ---------------
def _mul32(x: torch.Tensor, m: int) -> torch.Tensor:
    """``x * m mod 2**32`` without int64 overflow (16-bit halves of ``m``)."""
    return (x * (m & 0xFFFF) + (((x * (m >> 16)) & 0xFFFF) << 16)) & MASK32


def mix32(x: torch.Tensor) -> torch.Tensor:
    """A 32-bit integer hash (lowbias32) of values in ``[0, 2**32)``."""
    x = x ^ (x >> 16)
    x = _mul32(x, MIX_A)
    x = x ^ (x >> 15)
    x = _mul32(x, MIX_B)
    return x ^ (x >> 16)


def draw(seed: int, env: torch.Tensor, episode: torch.Tensor, salt: int) -> torch.Tensor:
    """Uniform 32-bit value for ``(seed, env, episode, salt)``."""
    inner = mix32((_mul32(env, GOLDEN) + mix32((episode * 2 + salt) & MASK32)) & MASK32)
    return mix32(inner ^ (seed & MASK32))


def episode_start(seed: int, env: torch.Tensor, episode: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """``(x, y, goal_x, goal_y)`` of an episode; the goal is never the start cell."""
    start = draw(seed, env, episode, SALT_START) % CELLS
    goal = (start + 1 + draw(seed, env, episode, SALT_GOAL) % (CELLS - 1)) % CELLS
    return start % GRID_W, start // GRID_W, goal % GRID_W, goal // GRID_W


# -- the torch renderer ------------------------------------------------------------------
@functools.cache
def _coords(device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """Pixel columns ``(1, 80)`` and rows ``(72, 1)``, made once per device: a CPU tensor moved
    to the GPU at every render would be a synchronous host-to-device copy."""
    return (torch.arange(WIDTH, device=device).view(1, WIDTH),
            torch.arange(HEIGHT, device=device).view(HEIGHT, 1))


def render_frames(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Packed frames ``(N, 72, 20)`` uint8 with the agent at ``(x, y)`` (int64 ``(N,)``).

    Bands and sprite are built per row and per column and broadcast, in uint8.
    """
    cols, rows = _coords(x.device)
    x, y = x.view(-1, 1, 1), y.view(-1, 1, 1)
    col_band = (cols < (x + 1) * CELL).to(torch.uint8)  # (N, 1, 80)
    row_band = (rows < (y + 1) * CELL).to(torch.uint8) * 2  # (N, 72, 1)
    dc, dr = cols - x * CELL, rows - y * CELL
    sprite = ((dc >= SPRITE_LO) & (dc < SPRITE_HI)) & (
        (dr >= SPRITE_LO) & (dr < SPRITE_HI)
    )  # (N, 72, 80)
    shade = (col_band + row_band) ^ (sprite.to(torch.uint8) * 3)
    quads = shade.view(-1, HEIGHT, ROW_BYTES, 4)
    return quads[..., 0] | (quads[..., 1] << 2) | (quads[..., 2] << 4) | (quads[..., 3] << 6)


def frame_distance(
    x: torch.Tensor, y: torch.Tensor, gx: torch.Tensor, gy: torch.Tensor, diff_lut: torch.Tensor
) -> torch.Tensor:
    """L1 distance (int64) between the agent's frame and the goal frame, on packed bytes."""
    a, b = render_frames(x, y), render_frames(gx, gy)
    return diff_lut.view(-1)[a.int() * 256 + b.int()].sum(dim=(-2, -1))


class TorchGoalGrid:
    """GoalGrid in plain torch ops (any device); the fallback and the reference for Warp."""

    renderer = "torch"
    frames_per_obs = FRAMES_PER_OBS
    num_actions = NUM_ACTIONS

    def __init__(
        self, num_envs: int, *, max_steps: int = 40, device: str | torch.device = "cpu"
    ) -> None:
        _check_args(num_envs, max_steps)
        self.num_envs = num_envs
        self.max_steps = max_steps
        self.device = resolve_device(device)
        self._diff = DIFF_LUT.to(self.device, torch.int64)
        self._ids = torch.arange(num_envs, device=self.device)
        self._dx = torch.tensor(DX, device=self.device)
        self._dy = torch.tensor(DY, device=self.device)
        self.seed = 0
        zeros = lambda dtype: torch.zeros(num_envs, dtype=dtype, device=self.device)  # noqa: E731
        self.x, self.y, self.gx, self.gy = (zeros(torch.int64) for _ in range(4))
        self.t, self.episode, self.distance = (
            zeros(torch.int64),
            zeros(torch.int64),
            zeros(torch.int64),
        )
        self.ep_return = zeros(torch.float32)
        self.last_success = zeros(
            torch.bool
        )  # envs whose episode ended in success at the last step
        self._stats = {k: zeros(torch.int64) for k in ("episodes", "successes", "length_sum")}
        self._stats["return_sum"] = zeros(torch.float32)

    def reset(self, seed: int) -> None:
        self.seed = int(seed) & MASK32
        self.episode.zero_()
        self._start(torch.ones(self.num_envs, dtype=torch.bool, device=self.device))
        for value in self._stats.values():
            value.zero_()

    def _start(self, fresh: torch.Tensor) -> None:
        """New episodes where ``fresh`` (no host sync: every env is recomputed, then selected)."""
        x, y, gx, gy = episode_start(self.seed, self._ids, self.episode)
        for name, value in (("x", x), ("y", y), ("gx", gx), ("gy", gy)):
            getattr(self, name).copy_(torch.where(fresh, value, getattr(self, name)))
        self.t.masked_fill_(fresh, 0)
        self.ep_return.masked_fill_(fresh, 0.0)
        self.distance.copy_(frame_distance(self.x, self.y, self.gx, self.gy, self._diff))

    def step(
        self, actions: torch.Tensor, rewards: torch.Tensor, dones: torch.Tensor, offset: int
    ) -> None:
        n = self.num_envs
        for name, tensor, dtype in (
            ("actions", actions, torch.int64),
            ("rewards", rewards, torch.float32),
            ("dones", dones, torch.bool),
        ):
            check_storage(name, tensor, dtype, self.device, offset + n)
        action = actions.view(-1)[offset : offset + n].clamp(0, NUM_ACTIONS - 1)
        self.x.copy_((self.x + self._dx[action]).clamp(0, GRID_W - 1))
        self.y.copy_((self.y + self._dy[action]).clamp(0, GRID_H - 1))
        self.t += 1
        before = self.distance
        after = frame_distance(self.x, self.y, self.gx, self.gy, self._diff)
        success = after == 0
        done = success | (self.t >= self.max_steps)
        reward = (
            (before - after).float() / DISTANCE_SCALE - STEP_COST + success.float() * SUCCESS_BONUS
        )
        rewards.view(-1)[offset : offset + n] = reward
        dones.view(-1)[offset : offset + n] = done
        self.last_success.copy_(success)
        self.ep_return += reward
        self.distance.copy_(after)
        stats = self._stats
        stats["episodes"] += done
        stats["successes"] += success
        stats["length_sum"] += torch.where(done, self.t, 0)
        stats["return_sum"] += torch.where(done, self.ep_return, 0.0)
        self.episode += done
        self._start(done)

    def render_packed_into(self, out: torch.Tensor, base_offset: int) -> None:
        n = self.num_envs * FRAMES_PER_OBS * FRAME_BYTES
        check_storage("out", out, torch.uint8, self.device, base_offset + n)
        frames = torch.stack(
            (render_frames(self.x, self.y), render_frames(self.gx, self.gy)), dim=1
        )
        out.view(-1)[base_offset : base_offset + n] = frames.view(-1)

    def episode_stats(self) -> dict[str, torch.Tensor]:
        stats = {k: v.sum() for k, v in self._stats.items()}
        for value in self._stats.values():
            value.zero_()
        return stats

    def state_dict(self) -> dict[str, torch.Tensor | int]:
        return {"seed": self.seed, **{k: getattr(self, k).clone() for k in _STATE}}

    def load_state_dict(self, state: dict) -> None:
        self.seed = int(state["seed"])
        for k in _STATE:
            getattr(self, k).copy_(state[k])


_STATE = ("x", "y", "gx", "gy", "t", "episode", "distance", "ep_return")


def _check_args(num_envs: int, max_steps: int) -> None:
    if num_envs < 1:
        raise ValueError(f"num_envs={num_envs}: accepted: an integer >= 1")
    if max_steps < 1:
        raise ValueError(f"max_steps={max_steps}: accepted: an integer >= 1")
