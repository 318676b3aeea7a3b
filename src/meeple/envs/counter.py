"""A deterministic array env for transport tests and benchmarks (it costs almost nothing, so
timings show the transport). Serve it with ``env.array_env=meeple.envs.counter:CounterEnv``.

Env ``i`` seeded with ``s`` starts its counter at ``s + i``. Observation: ``[t, last action,
start, 0...]``; reward: the action taken; an episode ends after ``episode_length`` steps
(``truncate=True``: as a time limit). Action ``t % num_actions`` is illegal (masks matter);
``fail_action`` makes the env raise (server fault tests).

Cheap on purpose: every env of the batch resets and steps together, so ``t`` is one Python
int; the record fields' views are kept while the caller hands the same buffer (servers do),
and a batch of a few envs in such a buffer is written record by record with ``struct`` into
its bytes (a numpy call costs ~0.4 us on a tiny array). One 1-env step took 13-18 us with a
numpy call per field and a field lookup per call, which hid the transports it measures; now
~1.4 us. Larger batches and fresh buffers are written with numpy; both write the same bytes.
"""

from __future__ import annotations

import struct

import numpy as np

from meeple.envs.spaces import Spaces

ROWWISE_MAX = 4  # batches up to this size are written record by record


class CounterEnv:
    def __init__(
        self,
        num_envs: int,
        obs_size: int = 4,
        num_actions: int = 4,
        episode_length: int = 5,
        truncate: bool = False,
        fail_action: int | None = None,
    ) -> None:
        self.spaces = Spaces(
            num_envs,
            num_actions,
            (max(obs_size, 3),),
            np.float32,
            info=(("t", np.int32),),
            env_name="counter",
        )
        self.episode_length, self.truncate, self.fail_action = episode_length, truncate, fail_action
        self.t = 0  # steps into the episode, the same for every env
        self.last = [0] * num_envs  # the last action of each env
        self._rows = np.arange(num_envs)
        self._set_start(np.zeros(num_envs, dtype=np.int64))
        # [c]: the mask bytes while action c is the illegal one
        masks = np.ones((num_actions, num_actions), dtype=np.uint8)
        np.fill_diagonal(masks, 0)
        self._masks, self._mask_rows = masks, [row.tobytes() for row in masks]
        fields = self.spaces.record_dtype().fields
        at = {name: fields[name][1] for name in ("reward", "done", "truncated", "info_t", "obs")}
        # reward, done, truncated, info t, obs[0:3]: one pack per record (the record head's
        # layout, docs/protocol.md section 3, with the info field before the observation)
        assert at["done"] == 4 and at["truncated"] == 5 and 6 <= at["info_t"] < at["obs"] - 3
        self._head = struct.Struct(f"<fBB{at['info_t'] - 6}xi{at['obs'] - at['info_t'] - 4}xfff")
        self._mask_at = fields["mask"][1]
        self._rowwise = num_envs <= ROWWISE_MAX
        self._out: np.ndarray | None = None  # the buffer the cached views belong to
        self._fields: tuple[np.ndarray, ...] = ()
        self._records: list[memoryview] = []

    def _set_start(self, start: np.ndarray) -> None:
        self.start = start
        # float32 as numpy rounds it, for the row-wise writer (a Python float rounds twice)
        self._start_obs = start.astype(np.float32).tolist()

    def reset(self, seed: int | None, out: np.ndarray) -> None:
        if seed is not None:
            self._set_start(seed + self._rows)
        self.t = 0
        self.last = [0] * len(self.last)
        self.observe(out)

    def step(self, actions: np.ndarray, out: np.ndarray) -> None:
        if self.fail_action is not None and (actions == self.fail_action).any():
            raise RuntimeError(f"action {self.fail_action} is configured to fail")
        self.t += 1
        self.last = actions.tolist()
        done = self.t >= self.episode_length
        if done:
            self.t = 0
            self._set_start(self.start + 1000)  # a new episode, visibly different
        self._write(out, actions, done, done and self.truncate)

    def observe(self, out: np.ndarray) -> None:
        self._write(out, None, False, False)

    def _write(
        self, out: np.ndarray, actions: np.ndarray | None, done: bool, truncated: bool
    ) -> None:
        """Write every field (array envs may be handed fresh buffers each call); the reward
        is the action after a step (``actions``), else 0."""
        t = self.t
        mask = t % len(self._mask_rows)
        if out is self._out and self._rowwise:  # servers hand the same buffer every step
            if not self._records:  # the buffer came back: worth its row views now
                raw = out[:, None].view(np.uint8)  # [n, record bytes]; each row contiguous
                self._records = [memoryview(raw[i]) for i in range(len(out))]
            at, pack, mask_bytes = self._mask_at, self._head.pack_into, self._mask_rows[mask]
            stepped = actions is not None
            for record, last, start in zip(self._records, self.last, self._start_obs):
                pack(record, 0, last if stepped else 0, done, truncated, t, t, last, start)
                record[at : at + len(mask_bytes)] = mask_bytes
            return
        if out is not self._out:
            names = ("reward", "done", "truncated", "obs", "mask", "info_t")
            self._out, self._fields, self._records = out, tuple(out[n] for n in names), []
        reward_out, done_out, truncated_out, obs, mask_out, info_t = self._fields
        reward_out[:] = 0 if actions is None else actions
        done_out[:], truncated_out[:] = done, truncated
        obs[:, 0], obs[:, 1], obs[:, 2] = t, self.last if actions is None else actions, self.start
        mask_out[...] = self._masks[mask]
        info_t[:] = t

    def close(self) -> None:
        pass
