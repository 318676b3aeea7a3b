"""``env=mahjong_drill``: the deal-in problem alone, in the shapes of the real env (docs/rl_diagnostics.md).

Each decision is a discard from a few legal tile kinds; an opponent waits on some of them, and
the oracle planes say which (opponent 1's winning kinds, plane :data:`~meeple_mahjong.safety.WAITS`,
exactly where the real env writes them). With ``danger_rate`` < 1 only that fraction of decisions
offers a dealing discard; in the others the opponent waits on kinds the hand does not hold (in
the real teacher's games ~17% of decisions offer one, docs/rl_diagnostics.md). Discarding a kind it waits on costs ``deal_in_reward``;
every step also pays Gaussian noise of ``reward_noise`` (the score and rank noise of a real hand
that a deal-in signal is buried in). A game is ``steps`` decisions.

It is what the oracle teacher must learn, without the rest of mahjong: a network that reads the
oracle planes through the same stem, the same :class:`~meeple_mahjong.teacher.OracleTeacherModule`,
PPO loss and data path, so a regression of the RL machinery shows here in seconds
(``+experiment=mahjong_drill``; ``plugins/mahjong/tests/test_drill.py``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from tensordict import TensorDict, TensorDictBase
from torchrl.data import Binary, Categorical, Composite, Unbounded
from torchrl.envs import EnvBase

from meeple.errors import ConfigError

from .safety import WAITS
from .specs import NUM_ACTIONS, ORACLE_PLANES, PLANES, WIDTH

HAND_PLANE = 0  # public plane 0: the legal kinds (a hand, as far as this drill goes)


class DealInDrill(EnvBase):
    """``num_envs`` independent games of ``steps`` discards each."""

    def __init__(self, num_envs: int, *, steps: int = 8, choices: int = 5, waits: int = 1,
                 deal_in_reward: float = -1.0, reward_noise: float = 0.3, danger_rate: float = 1.0,
                 device: str = "cpu") -> None:
        for name, value, low in (("steps", steps, 1), ("choices", choices, 2), ("waits", waits, 1)):
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ConfigError(f"env.{name}={value!r}; accepted: an integer >= {low}")
        if isinstance(danger_rate, bool) or not isinstance(danger_rate, int | float) or not 0 < danger_rate <= 1:
            raise ConfigError(f"env.danger_rate={danger_rate!r}; accepted: a fraction in (0, 1]")
        if waits >= choices:
            raise ConfigError(f"env.waits={waits} with env.choices={choices}; accepted: waits < choices "
                              "(some legal discard must be safe)")
        super().__init__(batch_size=torch.Size([num_envs]), device=device)
        self.steps, self.choices, self.waits = steps, choices, waits
        self.deal_in_reward, self.reward_noise = float(deal_in_reward), float(reward_noise)
        self.danger_rate = float(danger_rate)
        n = num_envs
        self.observation_spec = Composite({
            "observation": Unbounded((n, PLANES, WIDTH), dtype=torch.float32),
            "oracle": Unbounded((n, ORACLE_PLANES, WIDTH), dtype=torch.float32),
            "action_mask": Binary(n=NUM_ACTIONS, shape=(n, NUM_ACTIONS), dtype=torch.bool),
        }, shape=(n,))
        self.action_spec = Categorical(NUM_ACTIONS, shape=(n,), dtype=torch.int64)
        self.reward_spec = Unbounded((n, 1), dtype=torch.float32)
        self._generator = torch.Generator().manual_seed(0)
        self._t = torch.zeros(n, dtype=torch.int64)
        self._legal = torch.zeros(n, WIDTH, dtype=torch.bool)
        self._danger = torch.zeros(n, WIDTH, dtype=torch.bool)

    def _set_seed(self, seed: int | None) -> None:
        self._generator.manual_seed(int(seed or 0))

    def _deal(self, rows: torch.Tensor) -> TensorDict:
        """New decisions in ``rows`` (bool[n]); the observation of every row."""
        n = int(rows.sum())
        if n:
            order = torch.rand(n, WIDTH, generator=self._generator).argsort(-1)
            legal = torch.zeros(n, WIDTH, dtype=torch.bool).scatter_(1, order[:, : self.choices], True)
            # the waits: among the legal kinds, or (decisions without a dealing option) among the others
            held = torch.rand(n, generator=self._generator) < self.danger_rate
            first = torch.where(held, 0, self.choices).unsqueeze(-1) + torch.arange(self.waits)
            danger = torch.zeros(n, WIDTH, dtype=torch.bool).scatter_(1, order.gather(1, first), True)
            self._legal[rows] = legal
            self._danger[rows] = danger
        observation = torch.zeros(len(rows), PLANES, WIDTH)
        observation[:, HAND_PLANE] = self._legal.float()
        oracle = torch.zeros(len(rows), ORACLE_PLANES, WIDTH)
        oracle[:, WAITS] = self._danger.float()
        mask = torch.zeros(len(rows), NUM_ACTIONS, dtype=torch.bool)
        mask[:, :WIDTH] = self._legal
        return TensorDict({"observation": observation, "oracle": oracle, "action_mask": mask},
                          batch_size=self.batch_size, device=self.device)

    def _reset(self, tensordict: TensorDictBase | None = None, **kwargs) -> TensorDictBase:
        rows = torch.ones(self.batch_size, dtype=torch.bool)
        if tensordict is not None and "_reset" in tensordict.keys():
            rows = tensordict["_reset"].reshape(-1).cpu()
        self._t[rows] = 0
        return self._deal(rows)

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        action = tensordict["action"].reshape(-1).cpu()
        kind = action.clamp_max(WIDTH - 1)
        dealt = self._danger.gather(1, kind.unsqueeze(-1)).squeeze(-1) & (action < WIDTH)
        noise = torch.randn(len(action), generator=self._generator) * self.reward_noise
        reward = dealt.float() * self.deal_in_reward + noise
        self._t += 1
        done = self._t >= self.steps
        out = self._deal(torch.ones_like(done))
        out["reward"] = reward.unsqueeze(-1)
        out["done"] = done.unsqueeze(-1)
        out["terminated"] = done.unsqueeze(-1).clone()
        return out


OPTIONS = ("steps", "choices", "waits", "deal_in_reward", "reward_noise", "danger_rate")


class DrillBackend:
    """Entry point ``meeple.plugins: mahjong_drill`` (``conf/env/mahjong_drill.yaml``)."""

    name = "mahjong_drill"

    def make_env(self, env_cfg: Mapping[str, Any], *, num_envs: int, device: str = "cpu") -> EnvBase:
        return DealInDrill(num_envs, device=device, **{k: env_cfg[k] for k in OPTIONS if k in env_cfg})


backend = DrillBackend()
