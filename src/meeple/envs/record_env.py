"""TorchRL envs over array envs: :class:`RecordEnv` (any stepper of records: an in-process
:class:`~meeple.envs.array.ArrayEnv` or a remote transport) and :class:`TorchRLArrayEnv`
(any TorchRL env hosted as an array env by a server)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

import numpy as np
import torch
from tensordict import TensorDict, TensorDictBase
from torchrl.data import Binary, Categorical, Composite, Unbounded
from torchrl.envs import EnvBase

from meeple.envs.spaces import Spaces
from meeple.errors import ConfigError

if TYPE_CHECKING:  # annotations only: meeple.envs.array builds TorchRLArrayEnv from this module
    from meeple.envs.array import ArrayEnv

OBS_KEY = "observation"
MASK_KEY = "action_mask"


class TorchRLArrayEnv:
    """Hosts any TorchRL env with a discrete action and an ``observation`` key.

    Finished envs are reset right after the step (partial reset with ``_reset``), so the
    records follow the auto-reset contract. An ``action_mask`` key, if the env has one,
    becomes the mask; otherwise every action is legal.
    """

    def __init__(self, env: EnvBase, name: str = "") -> None:
        self.env = env
        (num_envs,) = env.batch_size
        obs_spec = env.observation_spec[OBS_KEY]
        n = getattr(getattr(env.action_spec, "space", None), "n", None)
        if n is None:
            raise ConfigError(
                f"env {name!r} has a {type(env.action_spec).__name__} action; servers host discrete actions"
            )
        dtype = torch.empty((), dtype=obs_spec.dtype).numpy().dtype
        self.spaces = Spaces(num_envs, int(n), tuple(obs_spec.shape[1:]), dtype, env_name=name)
        self._has_mask = MASK_KEY in env.observation_spec.keys()
        self._td: TensorDictBase | None = None

    def _write_obs(
        self, td: TensorDictBase, out: np.ndarray, rows: np.ndarray | slice = slice(None)
    ) -> None:
        out["obs"][rows] = td[OBS_KEY][rows].numpy()
        out["mask"][rows] = td[MASK_KEY][rows].numpy() if self._has_mask else 1

    def reset(self, seed: int | None, out: np.ndarray) -> None:
        if seed is not None:
            self.env.set_seed(int(seed))
        self._td = self.env.reset()
        out["reward"], out["done"], out["truncated"] = 0, 0, 0
        self._write_obs(self._td, out)

    def step(self, actions: np.ndarray, out: np.ndarray) -> None:
        td = self._td.clone(False)
        td["action"] = torch.tensor(actions, dtype=torch.int64)  # a copy: actions may be read-only
        nxt = self.env.step(td)["next"]
        done = nxt["done"].reshape(-1)
        truncated = nxt.get("truncated", torch.zeros_like(done)).reshape(-1)
        out["reward"] = nxt["reward"].reshape(-1).numpy()
        out["done"], out["truncated"] = done.numpy(), truncated.numpy()
        state = nxt.exclude("reward", "done", "terminated", "truncated")
        if done.any():
            reset = state.clone(False)
            reset["_reset"] = done.unsqueeze(-1)
            state = self.env.reset(reset)
        self._td = state
        self._write_obs(state, out)

    def observe(self, out: np.ndarray) -> None:
        out["reward"], out["done"], out["truncated"] = 0, 0, 0
        self._write_obs(self._td, out)

    def close(self) -> None:
        self.env.close()


class RecordStepper(Protocol):
    """What :class:`RecordEnv` drives: an in-process array env or a remote transport client."""

    spaces: Spaces
    transient: bool  # records are overwritten by the next call (shared memory): copy them

    def reset(self, seed: int | None) -> np.ndarray: ...

    def step(self, actions: np.ndarray) -> np.ndarray: ...

    def close(self) -> None: ...


class LocalStepper:
    """An :class:`ArrayEnv` in this process, behind the :class:`RecordStepper` interface."""

    transient = False

    def __init__(self, env: ArrayEnv) -> None:
        self.env, self.spaces = env, env.spaces

    def reset(self, seed: int | None) -> np.ndarray:
        out = self.spaces.new_records(self.spaces.num_envs)
        self.env.reset(seed, out)
        return out

    def step(self, actions: np.ndarray) -> np.ndarray:
        out = self.spaces.new_records(self.spaces.num_envs)
        self.env.step(np.asarray(actions, dtype=np.int32), out)
        return out

    def close(self) -> None:
        self.env.close()


def _torch_dtype(dtype: np.dtype) -> torch.dtype:
    return torch.from_numpy(np.zeros(0, dtype=dtype.newbyteorder("="))).dtype


class RecordEnv(EnvBase):
    """A batched TorchRL env (batch ``[num_envs]``) over a :class:`RecordStepper`.

    One call steps every env. The server auto-resets finished envs, so TorchRL's partial
    resets are answered from the last records without a round trip; a full reset sends RESET.
    The action mask is ``action_mask`` (bool) and info fields are ``info_<name>``.
    """

    def __init__(self, stepper: RecordStepper, device: str | torch.device = "cpu") -> None:
        spaces = stepper.spaces
        super().__init__(batch_size=torch.Size([spaces.num_envs]), device=device)
        self.stepper, self.spaces = stepper, spaces
        n = spaces.num_envs
        obs = {
            OBS_KEY: Unbounded(
                (n, *spaces.obs_shape), dtype=_torch_dtype(spaces.obs_dtype), device=device
            ),
            MASK_KEY: Binary(
                n=spaces.num_actions, shape=(n, spaces.num_actions), dtype=torch.bool, device=device
            ),
        }
        for name, dtype in spaces.info:
            obs["info_" + name] = Unbounded((n,), dtype=_torch_dtype(dtype), device=device)
        self.observation_spec = Composite(obs, shape=(n,))
        self.action_spec = Categorical(
            spaces.num_actions, shape=(n,), dtype=torch.int64, device=device
        )
        self.reward_spec = Unbounded((n, 1), dtype=torch.float32, device=device)
        flag = Categorical(2, (n, 1), dtype=torch.bool, device=device)
        self.done_spec = Composite(
            done=flag, terminated=flag.clone(), truncated=flag.clone(), shape=(n,)
        )
        self._seed: int | None = None
        self._last: np.ndarray | None = None
        self._autoreset = np.zeros(n, dtype=bool)
        # EnvBase starts "closed" unless a subclass says otherwise; collectors close only an open
        # env at shutdown, so without this a served env's server outlived an in-process run.
        self.is_closed = False

    def _tensor(self, array: np.ndarray) -> torch.Tensor:
        # Shared-memory records are overwritten by the next request; TorchRL keeps tensors longer.
        return torch.from_numpy(np.array(array) if self.stepper.transient else array)

    def _observation(self, records: np.ndarray) -> dict[str, torch.Tensor]:
        out = {
            OBS_KEY: self._tensor(records["obs"]),
            MASK_KEY: self._tensor(records["mask"]).bool(),
        }
        for name, _ in self.spaces.info:
            out["info_" + name] = self._tensor(records["info_" + name])
        return out

    def _reset(self, tensordict: TensorDictBase | None = None, **kwargs) -> TensorDictBase:
        mask = None if tensordict is None else tensordict.get("_reset", None)
        partial = mask is not None and self._last is not None and self._seed is None
        if partial:
            wanted = mask.reshape(-1).cpu().numpy()
            partial = not wanted.all() or self._autoreset.all()
            partial = partial and bool((~wanted | self._autoreset).all())
        if not partial:
            self._last = self.stepper.reset(self._seed)
            self._seed = None
        self._autoreset[:] = False
        zeros = torch.zeros(self.batch_size + (1,), dtype=torch.bool)
        obs = self._observation(self._last)
        return TensorDict(
            {**obs, "done": zeros, "terminated": zeros.clone(), "truncated": zeros.clone()},
            batch_size=self.batch_size,
            device=self.device,
        )

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        actions = tensordict["action"].reshape(-1).to(torch.int32).cpu().numpy()
        records = self.stepper.step(actions)
        self._last = records
        done = records["done"].astype(bool)
        truncated = records["truncated"].astype(bool)
        self._autoreset = done.copy()
        out = self._observation(records)
        out["reward"] = self._tensor(records["reward"]).reshape(-1, 1)
        out["done"] = torch.from_numpy(done).unsqueeze(-1)
        out["terminated"] = torch.from_numpy(done & ~truncated).unsqueeze(-1)
        out["truncated"] = torch.from_numpy(truncated).unsqueeze(-1)
        return TensorDict(out, batch_size=self.batch_size, device=self.device)

    def _set_seed(self, seed: int | None) -> None:
        self._seed = seed

    def close(self, *, raise_if_closed: bool = True) -> None:
        if self.is_closed:  # a second close (the collector's, then ours) does nothing
            return
        try:
            self.stepper.close()
        finally:
            super().close(raise_if_closed=raise_if_closed)
