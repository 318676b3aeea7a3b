"""TorchRL envs over array envs: :class:`RecordEnv` (any stepper of records: an in-process
:class:`~meeple.envs.array.ArrayEnv` or a remote transport). The other direction, a TorchRL env
hosted as an array env by a server, is :mod:`meeple.envs.torchrl_array`."""

from __future__ import annotations

from typing import Protocol

import numpy as np
import torch
from tensordict import TensorDict, TensorDictBase
from torchrl.data import Binary, Categorical, Composite, Unbounded
from torchrl.envs import EnvBase

from meeple.envs.spaces import Spaces

OBS_KEY = "observation"
MASK_KEY = "action_mask"


class RecordStepper(Protocol):
    """What :class:`RecordEnv` drives: an in-process array env
    (:class:`~meeple.envs.array.LocalStepper`) or a remote transport client."""

    spaces: Spaces
    transient: bool  # records are overwritten by the next call (shared memory): copy them

    def reset(self, seed: int | None) -> np.ndarray: ...

    def step(self, actions: np.ndarray) -> np.ndarray: ...

    def close(self) -> None: ...


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
