"""The packed-frame env -> Lightning bridge: synchronous or asynchronous double-buffered PPO.

One Lightning epoch trains on one rollout (``ppo_epochs`` shuffled passes of minibatches
over its ``T*N`` samples). ``policy_version`` counts the learner's finished updates; every
rollout is stamped with the version that collected it, and ``perf/policy_lag`` is the
difference when it is trained on.

- ``sync``: the learner's own network acts; collect, then train, in turn.
- ``async``: two :class:`PackedRolloutBuffer`\\ s and a separate actor copy of the network.
  While the learner trains on one buffer, an actor thread fills the other with the weights
  it was last given (lag 1); at each rollout boundary the learner's weights are copied into
  the actor explicitly. On CUDA the actor runs on its own stream and CUDA events order
  the two (weights copied after the learner's step, the learner reads a buffer after the
  actor wrote it, the actor reuses a buffer after the learner read it); the host never
  waits on the device inside the loop. ``max_policy_lag=0`` collects each rollout with the
  fresh weights before training on it, which equals ``sync`` exactly.
"""

from __future__ import annotations

import copy
import logging
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

import lightning as L
import torch
from torch.utils.data import DataLoader, IterableDataset

from meeple.envs.packed import rollout_bytes
from meeple.envs.packed_env import PackedEnv
from meeple.phases.packed_ppo.actor import collect_rollout
from meeple.phases.packed_ppo.buffer import PackedRolloutBuffer
from meeple.seeding import Component, PhaseSeeds
from meeple.tracking.keys import FRAMES_PER_S, TRAIN_RETURN

log = logging.getLogger(__name__)

MODES = ("sync", "async")
TRAIN_SUCCESS = "train/success_rate"
POLICY_LAG = "perf/policy_lag"


def _identity(x):
    return x


@dataclass(frozen=True)
class PackedLearner:
    """The learner's side of collection, as the phase's builder wires it (the datamodule does
    not reach into the LightningModule)."""

    net: torch.nn.Module  # the learner's network (the module's own, moved with it): acts in sync mode
    # (buffer, lag, chunk=): proximal log-probs and advantages of a rollout collected `lag` updates ago
    prepare_rollout: Callable[..., None]

    @property
    def device(self) -> torch.device:
        """Where the network sits now (Lightning moves the module before the first rollout)."""
        return next(self.net.parameters()).device


class PackedRolloutDataModule(L.LightningDataModule):
    def __init__(
        self,
        *,
        learner: PackedLearner,
        env_factory: Callable[..., PackedEnv],
        seeds: PhaseSeeds,
        num_envs: int,
        frames_per_obs: int,
        rollout_steps: int,
        ppo_epochs: int,
        minibatch_size: int,
        mode: str = "sync",
        max_policy_lag: int = 1,
    ) -> None:
        """``env_factory(num_envs=, device=)`` builds the env batch on the learner's device."""
        super().__init__()
        if mode not in MODES:
            raise ValueError(f"mode={mode!r}; accepted: {', '.join(MODES)}")
        if max_policy_lag not in (0, 1):
            raise ValueError(
                f"max_policy_lag={max_policy_lag}; accepted: 0 or 1 (two rollout buffers)"
            )
        self.learner = learner
        self.env_factory = env_factory
        self.seeds = seeds
        self.num_envs = num_envs
        self.frames_per_obs = frames_per_obs
        self.rollout_steps = rollout_steps
        self.ppo_epochs = ppo_epochs
        self.minibatch_size = minibatch_size
        self.mode = mode
        self.max_policy_lag = max_policy_lag if mode == "async" else 0
        self.frames_per_batch = num_envs * rollout_steps
        self.minibatches_per_epoch = self.frames_per_batch // minibatch_size
        self.memory_report = rollout_bytes(rollout_steps, num_envs, frames_per_obs)
        self.policy_version = 0
        self.frames = 0
        self.env: PackedEnv | None = None
        self.buffers: list[PackedRolloutBuffer] = []
        self.actor_net: torch.nn.Module | None = None
        self._pending: Future | None = None
        self._executor: ThreadPoolExecutor | None = None
        self._actor_stream = None
        self._device_stats: tuple[dict[str, torch.Tensor], int] | None = None
        self._stats: dict[str, float] = {}
        self._last_time: float | None = None
        self._saved: dict | None = None

    # -- lifecycle -------------------------------------------------------------
    def start(self) -> None:
        """Env, buffers, generators and (async) the actor, on the module's device (idempotent)."""
        if self.env is not None:
            return
        device = self.learner.device
        self.env = self.env_factory(num_envs=self.num_envs, device=device)
        self.env.reset(self.seeds.seed(Component.ENV))
        actor_seed, shuffle_seed = self.seeds.worker_seeds(Component.DATA, 2)
        self.actor_generator = torch.Generator(device).manual_seed(actor_seed)
        self.shuffle_generator = torch.Generator(device).manual_seed(shuffle_seed)
        count = 2 if self.mode == "async" else 1
        self.buffers = [
            PackedRolloutBuffer(self.rollout_steps, self.num_envs, self.frames_per_obs, device)
            for _ in range(count)
        ]
        if self.mode == "async":
            self.actor_net = copy.deepcopy(self.learner.net).requires_grad_(False)
            self._executor = ThreadPoolExecutor(1, thread_name_prefix="meeple-actor")
            if device.type == "cuda":
                self._actor_stream = torch.cuda.Stream(device)
        if self._saved is not None:
            self._restore(self._saved)
            self._saved = None

    def teardown(self, stage: str) -> None:
        if self._pending is not None:
            self._pending.result()
            self._pending = None
        if self._executor is not None:
            self._executor.shutdown()
            self._executor = None
        self.env = None
        self.buffers = []

    def train_dataloader(self) -> DataLoader:
        return DataLoader(PackedRolloutDataset(self), batch_size=None, collate_fn=_identity)

    # -- one rollout -----------------------------------------------------------
    def next_rollout(self) -> PackedRolloutBuffer:
        """The rollout to train on now, with proximal log-probs and advantages attached."""
        self.start()
        version = self.policy_version
        if self.mode == "sync":
            buffer = self.buffers[0]
            collect_rollout(self.env, self.learner.net, buffer, self.actor_generator)
            buffer.policy_version = version
        else:
            buffer = self._next_async(version)
        lag = version - buffer.policy_version
        if not 0 <= lag <= self.max_policy_lag:
            raise RuntimeError(
                f"policy lag {lag} outside 0..{self.max_policy_lag} (a bug in the actor schedule)"
            )
        self.learner.prepare_rollout(buffer, lag, chunk=self.minibatch_size)
        self._device_stats = (buffer.stats, lag)
        self.frames += buffer.samples
        self.policy_version += 1  # the learner's update on this rollout follows
        return buffer

    def _next_async(self, version: int) -> PackedRolloutBuffer:
        if self._pending is None:  # first rollout, or lag 0: collect now with fresh weights
            self._sync_actor()
            buffer = self._collect(self.buffers[version % 2], version)
        else:
            buffer, self._pending = self._pending.result(), None
        if self._actor_stream is not None:  # the learner reads the buffer after the actor wrote it
            torch.cuda.current_stream(buffer.obs.device).wait_event(buffer.ready)
        last = self.trainer.max_epochs is not None and version + 1 >= self.trainer.max_epochs
        if self.max_policy_lag >= 1 and not last:
            self._sync_actor()  # weights of version `version` act on the next rollout while we train
            self._pending = self._executor.submit(
                self._collect, self.buffers[(version + 1) % 2], version
            )
        return buffer

    def _collect(self, buffer: PackedRolloutBuffer, version: int) -> PackedRolloutBuffer:
        if self._actor_stream is None:
            collect_rollout(self.env, self.actor_net, buffer, self.actor_generator)
        else:
            with torch.cuda.stream(self._actor_stream):
                collect_rollout(self.env, self.actor_net, buffer, self.actor_generator)
                buffer.ready = torch.cuda.Event()
                buffer.ready.record(self._actor_stream)
        buffer.policy_version = version
        return buffer

    @torch.no_grad()
    def _sync_actor(self) -> None:
        """Learner weights -> actor weights (explicit copy; ordered by events on CUDA)."""
        learner = self.learner.net
        pairs = list(zip(self.actor_net.state_dict().values(), learner.state_dict().values()))
        if self._actor_stream is None:
            for actor, source in pairs:
                actor.copy_(source)
            return
        learner_stream = torch.cuda.current_stream(self._actor_stream.device)
        learned = torch.cuda.Event()
        learned.record(
            learner_stream
        )  # all learner work so far (its last step, its reads of old buffers)
        with torch.cuda.stream(self._actor_stream):
            self._actor_stream.wait_event(learned)
            for actor, source in pairs:
                actor.copy_(source)
            copied = torch.cuda.Event()
            copied.record(self._actor_stream)
        learner_stream.wait_event(copied)  # the next optimiser step must not race the copy

    # -- per-rollout statistics (one device -> host transfer per rollout) -----
    @property
    def stats(self) -> dict[str, float]:
        if self._device_stats is not None:
            device_stats, lag = self._device_stats
            self._device_stats = None
            keys = ("episodes", "successes", "return_sum", "length_sum")
            episodes, successes, return_sum, length_sum = torch.stack(
                [device_stats[k].double() for k in keys]
            ).tolist()
            now = time.perf_counter()
            stats = {
                "train/frames": float(self.frames),
                "train/episodes": episodes,
                POLICY_LAG: float(lag),
            }
            if self._last_time is not None:
                stats[FRAMES_PER_S] = self.frames_per_batch / max(now - self._last_time, 1e-9)
            self._last_time = now
            if episodes > 0:
                stats.update(
                    {
                        TRAIN_RETURN: return_sum / episodes,
                        TRAIN_SUCCESS: successes / episodes,
                        "train/episode_length": length_sum / episodes,
                    }
                )
            self._stats = {**self._stats, **stats}
        return self._stats

    # -- checkpoint state ------------------------------------------------------
    def state_dict(self) -> dict:
        state = {
            "policy_version": self.policy_version,
            "frames": self.frames,
            "stats": dict(self.stats),
        }
        if self.env is not None:
            state["generators"] = [
                self.actor_generator.get_state(),
                self.shuffle_generator.get_state(),
            ]
            if hasattr(self.env, "state_dict"):
                state["env"] = self.env.state_dict()
        return state

    def load_state_dict(self, state: dict) -> None:
        self.policy_version, self.frames = state["policy_version"], state["frames"]
        self._stats = dict(state["stats"])
        self._saved = state
        if self.env is not None:
            self._restore(state)
            self._saved = None

    def _restore(self, state: dict) -> None:
        if "generators" in state:
            self.actor_generator.set_state(state["generators"][0])
            self.shuffle_generator.set_state(state["generators"][1])
        if "env" in state and hasattr(self.env, "load_state_dict"):
            self.env.load_state_dict(state["env"])


class PackedRolloutDataset(IterableDataset):
    """Each iteration is one rollout's minibatches: ``ppo_epochs`` shuffled passes."""

    def __init__(self, datamodule: PackedRolloutDataModule) -> None:
        self.dm = datamodule

    def __len__(self) -> int:
        return self.dm.ppo_epochs * self.dm.minibatches_per_epoch

    def __iter__(self) -> Iterator[dict]:
        dm = self.dm
        buffer = dm.next_rollout()
        yield from buffer.minibatches(dm.minibatch_size, dm.ppo_epochs, dm.shuffle_generator)
