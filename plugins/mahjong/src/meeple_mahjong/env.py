"""``env=mahjong``: a TorchRL env over the native batch simulator (``meeple_native.mahjong.BatchSim``).

The env's batch is a flat list of *slots*: ``num_envs = tables * len(learner_seats)`` and
slot ``table * L + i`` is learner seat ``learner_seats[i]`` at that table. One step plays
every slot's action where its seat must act (``active``), then the native simulator runs
the bots in the other seats until each table reaches its next learner decision, so one
policy forward serves every pending decision of every table. A slot whose seat need not
act has a mask allowing only ``pass`` (a no-op whose probability under the masked policy
is one, so it carries no gradient). Rewards: the seat's score change times
``score_scale``, plus ``rank_reward[rank]`` when the game ends; the table's slots are done
together and restart on reset. docs/mahjong_env.md has the keys and the options.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch
from tensordict import TensorDict, TensorDictBase
from torchrl.data import Binary, Categorical, Composite, Unbounded
from torchrl.envs import EnvBase

from meeple.errors import ConfigError
from meeple_native import mahjong as _mj

PLANES, WIDTH, ORACLE_PLANES = (
    _mj.PUBLIC_PLANES,
    _mj.PLANE_WIDTH,
    _mj.ORACLE_PLANES,
)  # docs/mahjong_encoding.md
NUM_ACTIONS = _mj.NUM_ACTIONS
BOTS = tuple(_mj.bot_names())  # random, rule, rule-nofold (docs/mahjong_bots.md)
RULE_KEYS = (
    "red_fives", "open_tanyao", "double_yakuman", "kazoe_yakuman", "kiriage", "east_only",
    "start_points", "return_points", "agari_yame", "bust_ends", "double_ron", "triple_ron_abort",
    "nagashi_mangan", "kyuushu_kyuuhai", "suufon_renda", "suucha_riichi", "suukaikan", "pao",
)  # fmt: skip


def seat_bots(learner_seats: Sequence[int], opponents: str | Sequence[str]) -> list[str]:
    """One bot name per seat (learner seats get a placeholder the simulator ignores).

    ``opponents`` is one name for every other seat, or a list with one name per other
    seat in seat order.
    """
    others = [s for s in range(4) if s not in learner_seats]
    names = [opponents] * len(others) if isinstance(opponents, str) else list(opponents)
    if len(names) != len(others):
        raise ConfigError(
            f"env.opponents={list(names)}: give one bot name for all other seats or one per other seat "
            f"({len(others)} for learner seats {list(learner_seats)})"
        )
    for name in names:
        if name not in BOTS:
            raise ConfigError(f"env.opponents: unknown bot {name!r}; accepted: {', '.join(BOTS)}")
    bots = ["random"] * 4
    for seat, name in zip(others, names, strict=True):
        bots[seat] = name
    return bots


class MahjongEnv(EnvBase):
    """``num_envs`` learner slots over ``num_envs / len(learner_seats)`` tables (see the module doc)."""

    batch_locked = True

    def __init__(
        self,
        num_envs: int,
        *,
        learner_seats: Sequence[int] = (0,),
        opponents: str | Sequence[str] = "rule",
        rules: Mapping[str, Any] | None = None,
        threads: int = 1,
        score_scale: float = 1e-4,
        rank_reward: Sequence[float] = (0.9, 0.45, 0.0, -1.35),
        oracle: bool = False,
        device: str | torch.device = "cpu",
    ) -> None:
        learner_seats = [int(s) for s in learner_seats]
        if (
            not learner_seats
            or len(set(learner_seats)) != len(learner_seats)
            or not all(0 <= s < 4 for s in learner_seats)
        ):
            raise ConfigError(
                f"env.learner_seats={learner_seats}; accepted: 1 to 4 distinct seats in 0..3"
            )
        if num_envs < 1 or num_envs % len(learner_seats):
            raise ConfigError(
                f"env.num_envs={num_envs} must be a positive multiple of len(learner_seats)={len(learner_seats)}: "
                "each table gives one slot per learner seat"
            )
        if len(rank_reward) != 4:
            raise ConfigError(
                f"env.rank_reward={list(rank_reward)}; accepted: 4 numbers, 1st to 4th place"
            )
        rules = dict(rules or {})
        unknown = sorted(set(rules) - set(RULE_KEYS))
        if unknown:
            raise ConfigError(
                f"env.rules: unknown option(s) {unknown}; accepted: {', '.join(RULE_KEYS)}"
            )
        if threads < 1:
            raise ConfigError(f"env.threads={threads}; accepted: an integer >= 1")
        super().__init__(batch_size=torch.Size([num_envs]), device=device)
        self.learner_seats = learner_seats
        self.num_tables = num_envs // len(learner_seats)
        self._sim_args = dict(
            learner_seats=learner_seats,
            bots=seat_bots(learner_seats, opponents),
            threads=int(threads),
            score_scale=float(score_scale),
            rank_reward=[float(r) for r in rank_reward],
        )
        try:
            self._rules = _mj.Game(**rules)
        except TypeError as e:  # a value of the wrong type (nanobind lists the signature)
            raise ConfigError(f"env.rules={rules}: {e}") from None
        self.oracle = oracle
        self.sim = _mj.BatchSim(self.num_tables, self._rules, session_seed=0, **self._sim_args)
        n = num_envs
        obs = {
            "observation": Unbounded((n, PLANES, WIDTH), dtype=torch.float32),
            "action_mask": Binary(n=NUM_ACTIONS, shape=(n, NUM_ACTIONS), dtype=torch.bool),
            "active": Binary(n=1, shape=(n, 1), dtype=torch.bool),
            "rank": Unbounded((n, 1), dtype=torch.int64),
            "score": Unbounded((n, 1), dtype=torch.int64),
            "seat": Unbounded((n, 1), dtype=torch.int64),
        }
        if oracle:
            obs["oracle"] = Unbounded((n, ORACLE_PLANES, WIDTH), dtype=torch.float32)
        self.observation_spec = Composite(obs, shape=(n,))
        self.action_spec = Categorical(NUM_ACTIONS, shape=(n,), dtype=torch.int64)
        self.reward_spec = Unbounded((n, 1), dtype=torch.float32)
        self._seats = torch.tensor(learner_seats * self.num_tables, dtype=torch.int64).unsqueeze(-1)

    # -- TorchRL hooks --
    def _set_seed(self, seed: int | None) -> None:
        # Walls and bot streams derive from the session seed (docs/mahjong_engine.md): a new
        # seed is a new simulator whose tables start their games on the next reset.
        self.sim = _mj.BatchSim(
            self.num_tables, self._rules, session_seed=int(seed or 0), **self._sim_args
        )

    def _reset(self, tensordict: TensorDictBase | None = None, **kwargs) -> TensorDictBase:
        tables = None
        if tensordict is not None and "_reset" in tensordict.keys():
            slots = tensordict["_reset"].reshape(self.num_tables, len(self.learner_seats))
            tables = slots.any(-1).to(torch.uint8).cpu().numpy()
        td = self._run(lambda out: self.sim.reset(tables, **out))
        del td["reward"]  # TorchRL: no reward at reset
        return td

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        actions = tensordict["action"].reshape(-1).to(device="cpu", dtype=torch.int64).contiguous()
        return self._run(lambda out: self.sim.step(actions.numpy(), **out))

    def rand_action(self, tensordict: TensorDictBase | None = None) -> TensorDictBase:
        """A uniformly random *legal* action per slot (rollouts without a policy)."""
        if tensordict is None or "action_mask" not in tensordict.keys():
            raise ValueError(
                "MahjongEnv.rand_action needs the tensordict of the last reset/step (its action_mask)"
            )
        mask = tensordict["action_mask"].float()
        tensordict["action"] = torch.multinomial(mask.reshape(-1, NUM_ACTIONS), 1).reshape(
            self.batch_size
        )
        return tensordict

    def _run(self, call) -> TensorDictBase:
        n = self.batch_size[0]
        obs = torch.empty(n, PLANES, WIDTH)
        mask = torch.empty(n, NUM_ACTIONS, dtype=torch.uint8)
        active = torch.empty(n, dtype=torch.uint8)
        reward = torch.empty(n)
        done = torch.empty(n, dtype=torch.uint8)
        rank = torch.empty(n, dtype=torch.int8)
        score = torch.empty(n, dtype=torch.int32)
        out = dict(obs=obs.numpy(), mask=mask.numpy(), active=active.numpy(), reward=reward.numpy(),
                   done=done.numpy(), rank=rank.numpy(), score=score.numpy())  # fmt: skip
        oracle = None
        if self.oracle:
            oracle = torch.empty(n, ORACLE_PLANES, WIDTH)
            out["oracle"] = oracle.numpy()
        call(out)
        done_b = done.view(torch.bool).unsqueeze(-1)
        td = {
            "observation": obs,
            "action_mask": mask.view(torch.bool),
            "active": active.view(torch.bool).unsqueeze(-1),
            "rank": rank.to(torch.int64).unsqueeze(-1),
            "score": score.to(torch.int64).unsqueeze(-1),
            "seat": self._seats.clone(),
            "reward": reward.unsqueeze(-1),
            "done": done_b,
            "terminated": done_b.clone(),
        }
        if oracle is not None:
            td["oracle"] = oracle
        return TensorDict(td, batch_size=self.batch_size, device=self.device)


ENV_OPTIONS = (
    "learner_seats",
    "opponents",
    "rules",
    "threads",
    "score_scale",
    "rank_reward",
    "oracle",
)


class MahjongBackend:
    """Entry point ``meeple.plugins: mahjong`` (``conf/env/mahjong.yaml``)."""

    name = "mahjong"

    def batch_unit(self, env_cfg: Mapping[str, Any]) -> int:
        """Batches are whole tables: one slot per learner seat."""
        return len(env_cfg.get("learner_seats", (0,)))

    def make_env(
        self, env_cfg: Mapping[str, Any], *, num_envs: int, device: str = "cpu"
    ) -> EnvBase:
        # Options left out of the config take MahjongEnv's defaults (one place for them).
        options = {k: env_cfg[k] for k in ENV_OPTIONS if env_cfg.get(k) is not None}
        return MahjongEnv(num_envs, device=device, **options)


backend = MahjongBackend()
