"""`MahjongEnv` (``env=mahjong``): a TorchRL env over the native batch simulator (``meeple_native.mahjong.BatchSim``).

The env's batch is a flat list of *slots*: ``num_envs = tables * len(learner_seats)`` and
slot ``table * L + i`` is learner seat ``learner_seats[i]`` at that table. One step plays
every slot's action where its seat must act (``active``), then the native simulator runs
the bots in the other seats until each table reaches its next learner decision, so one
policy forward serves every pending decision of every table. A slot whose seat need not
act has a mask allowing only ``pass`` (a no-op whose probability under the masked policy
is one, so it carries no gradient). Rewards: the seat's score change times
``score_scale``, plus ``rank_reward[rank]`` when the game ends; the table's slots are done
together and restart on reset. With ``hand_reward`` (a global reward predictor,
`meeple_mahjong.grp`) the score term is replaced by per-hand rewards: the change of the
seat's expected rank reward from one hand start to the next (`_HandRewards`). docs/mahjong_env.md
has the keys and the options.

Opponent seats may also be frozen networks (``opponents`` naming a key of
``opponent_policies`` or ``opponent_checkpoints``): the simulator then drives them from
Python like learner seats, and after each step the tables waiting only on networks are
stepped alone (the others held) until every table waits on the learner again; rewards and
done of those steps add up into the learner's step (`_play_networks`).

Internally a slot reads the simulator column ``_learner_cols[table, i]`` (the i-th learner
seat here; per game in a league, `meeple_mahjong.league_env`, which also uses the two hooks
`_start_games` and `_stepped`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch
from tensordict import TensorDict, TensorDictBase
from torchrl.data import Unbounded
from torchrl.envs import EnvBase

from meeple.errors import ConfigError
from meeple_native import mahjong as _mj

from .branch import BranchOptions, BranchValues, branch_keys
from .grp import HandPotential, hand_features
from .opponents import NetworkSeats, network_names
from .specs import (
    NUM_ACTIONS,
    ORACLE_PLANES,
    PLANES,
    SHOWN_KEY,
    TRUTH_KEY,
    TRUTH_PLANES,
    WIDTH,
    action_spec,
    observation_spec,
    opponents_in_riichi,
    rows_offering,
)
from .tables import BOTS

_ORACLE_SEED = 0x0D40  # the oracle dropout's draws: this, xor the env's seed


def _keep_range(keep: Any, oracle: bool) -> tuple[float, float]:
    """``env.oracle_keep`` as (start, end): one share, or a linear schedule [start, end] over the
    phase's rollouts (Suphx decays its oracle features to zero). Below 1 only with the oracle."""
    pair = list(keep) if isinstance(keep, Sequence) and not isinstance(keep, str) else [keep, keep]
    shares = len(pair) == 2 and all(isinstance(k, int | float) and not isinstance(k, bool) and 0.0 <= k <= 1.0
                                    for k in pair)
    if not shares or (pair != [1.0, 1.0] and not oracle):
        raise ConfigError(f"env.oracle_keep={keep!r}; accepted: a share in [0, 1] of the learner's decisions that "
                          "see the oracle planes, or [start, end] (linear over the phase's rollouts), below 1 "
                          "only with env.oracle=true")
    return float(pair[0]), float(pair[1])


RULE_KEYS = (
    "red_fives", "open_tanyao", "double_yakuman", "kazoe_yakuman", "kiriage", "east_only",
    "start_points", "return_points", "agari_yame", "bust_ends", "double_ron", "triple_ron_abort",
    "nagashi_mangan", "kyuushu_kyuuhai", "suufon_renda", "suucha_riichi", "suukaikan", "pao",
)  # fmt: skip


def seat_players(
    learner_seats: Sequence[int], opponents: str | Sequence[str], networks: Sequence[str] = ()
) -> dict[int, str]:
    """The player (bot or network name) at each non-learner seat.

    ``opponents`` is one name for every other seat, or a list with one name per other
    seat in seat order; a name is a bot (`BOTS`) or one of ``networks``.
    """
    others = [s for s in range(4) if s not in learner_seats]
    names = [opponents] * len(others) if isinstance(opponents, str) else list(opponents)
    if len(names) != len(others):
        raise ConfigError(
            f"env.opponents={list(names)}: give one name for all other seats or one per other seat "
            f"({len(others)} for learner seats {list(learner_seats)})"
        )
    for name in names:
        if name not in BOTS and name not in networks:
            nets = (
                f", or a network: {', '.join(networks)}"
                if networks
                else " (networks: none configured in env.opponent_checkpoints)"
            )
            raise ConfigError(
                f"env.opponents: unknown bot {name!r}; accepted: {', '.join(BOTS)}{nets}"
            )
    return dict(zip(others, names, strict=True))


def check_options(rules: Mapping[str, Any] | None, threads: int, rank_reward: Sequence[float]) -> dict[str, Any]:
    """The options every mahjong env shares, checked; returns ``rules`` as a dict."""
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
    return rules


def require_held_steps(what: str) -> None:
    """Networks in the simulator's seats need ``BatchSim.step(tables=...)`` (held tables)."""
    if "tables:" not in (_mj.BatchSim.step.__doc__ or ""):
        raise ConfigError(
            f"{what} seats networks, which needs BatchSim.step(tables=...): rebuild "
            "meeple_native from this checkout (pip install ./native)"
        )


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
        oracle_keep: float | Sequence[float] = 1.0,
        hand_reward: str | None = None,
        opponent_policies: Mapping[str, Callable[..., torch.Tensor]] | None = None,
        opponent_checkpoints: Mapping[str, Any] | None = None,
        branch: Mapping[str, Any] | None = None,
        guide: str | None = None,
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
        rules = check_options(rules, threads, rank_reward)
        players = seat_players(
            learner_seats, opponents, network_names(opponent_policies, opponent_checkpoints, BOTS)
        )
        tables, L = num_envs // len(learner_seats), len(learner_seats)
        # The simulator's Python-driven seats: the learner's, then the networks' (if any).
        net_players = {s: n for s, n in players.items() if n not in BOTS}
        if net_players:
            require_held_steps("env.opponents")
        nets = (
            NetworkSeats.seat(tables, L, net_players, opponent_policies, opponent_checkpoints)
            if net_players
            else None
        )
        bots = [players[s] if players.get(s) in BOTS else "random" for s in range(4)]  # others ignored
        self._build(learner_seats + list(net_players), torch.arange(L).expand(tables, -1), bots, nets,
                    rules=rules, threads=threads, score_scale=score_scale, rank_reward=rank_reward,
                    oracle=oracle, hand_reward=hand_reward, device=device)  # fmt: skip
        self.learner_seats = learner_seats
        if guide is not None:
            if guide not in BOTS:
                raise ConfigError(f"env.guide={guide!r}; accepted: null or a built-in bot, one of {list(BOTS)}")
            self.guide = guide
            self._red_fives = bool(rules.get("red_fives", True))
        if branch is not None:
            if net_players:
                raise ConfigError("env.branch with network opponents: branches are played with bots only; "
                                  "accepted: env.branch=null, or bot opponents (rule, rule-nofold, random)")
            if hand_reward:
                raise ConfigError("env.branch with env.hand_reward: a branch's value is the hand's score "
                                  "reward; accepted: one of the two")
            self._branch_options = BranchOptions.parse(branch)
            self._branch = BranchValues(self._branch_options, self._rules, self._sim_args)
            self._branch_gen = torch.Generator().manual_seed(0)
        start, end = _keep_range(oracle_keep, oracle)
        if (start, end) != (1.0, 1.0):
            self._oracle_dropout, self._oracle_keep = True, start
            if end != start:  # the learner steers it per rollout (OracleTeacherModule.prepare_env)
                self.oracle_keep_range = (start, end)
            self._oracle_gen = torch.Generator().manual_seed(_ORACLE_SEED)
        self.observation_spec = observation_spec(num_envs, oracle=oracle, branch=branch is not None,
                                                 guide=guide is not None, oracle_dropout=self._oracle_dropout,
                                                 device=self.device)  # fmt: skip

    # -- the guide's choices (env.guide, meeple_mahjong.guide_ppo) --
    guide: str | None = None

    # -- oracle dropout (env.oracle_keep < 1, or [start, end]) --
    _oracle_dropout = False
    _oracle_keep = 1.0
    oracle_keep_range: tuple[float, float] | None = None  # a schedule, until the learner steers it
    _keep_steered = False

    def set_oracle_keep(self, keep: float) -> None:
        """The share of the learner's decisions that see the oracle planes from the next step on
        (the teacher module sets it per rollout when ``env.oracle_keep`` is a [start, end] schedule)."""
        if not self._oracle_dropout or not 0.0 <= keep <= 1.0:
            raise ConfigError(f"set_oracle_keep({keep!r}); accepted: a share in [0, 1], on an env with "
                              "oracle dropout (env.oracle_keep below 1 or [start, end])")
        self._oracle_keep, self._keep_steered = float(keep), True

    def _drop_oracle(self, td: dict[str, torch.Tensor]) -> None:
        """Zero the oracle planes of a ``1 - oracle_keep`` share of the slots (one draw per slot and
        step): those decisions are played from the public planes, so PPO on them trains the
        network's public play (Suphx's oracle dropout, all or none per decision). The opponents'
        planes stay, unmasked, in ``oracle_truth``: the teacher module's dealing labels."""
        full = td["oracle"]
        shown = torch.rand(len(full), 1, generator=self._oracle_gen) < self._oracle_keep
        td[SHOWN_KEY] = shown
        td[TRUTH_KEY] = full[:, :TRUTH_PLANES].clone()
        td["oracle"] = full * shown.unsqueeze(-1)

    def _guide_actions(self, mask: torch.Tensor, active: torch.Tensor, seat: torch.Tensor) -> torch.Tensor:
        """``guide_action`` per slot: the action index the guide bot would take in the slot's
        ``seat`` now, where the slot has a choice (two or more legal actions); -1 elsewhere."""
        out = torch.full((len(mask),), -1, dtype=torch.int64)
        rows = (active.reshape(-1) & (mask.sum(-1) >= 2)).nonzero().squeeze(-1).tolist()
        seats = seat.reshape(-1).tolist()
        L = self._learner_cols.shape[1]
        for r in rows:
            action = _mj.bot_action(self.sim.game(r // L), seats[r], self.guide, 0)
            out[r] = _mj.action_index(action, self._red_fives)
        return out

    # -- branched rollouts (env.branch, meeple_mahjong.branch) --
    _branch: BranchValues | None = None

    def set_branch_policy(self, fn: Callable[..., torch.Tensor]) -> None:
        """The learner's policy as ``fn(obs, mask[, oracle]) -> masked logits``: what plays the
        learner's seats in the branches (the phase's module hands in its own actor)."""
        if self._branch is None:
            raise ConfigError("set_branch_policy on an env without branches; accepted: env.branch={prob: ..., candidates: ...}")
        self._branch.set_policy(fn)

    def _branch_rows(self, buf: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """The branch keys of this call's decisions (see branch_keys)."""
        b, o = self._branch, self._branch_options
        mask = buf["mask"].view(torch.bool)
        eligible = buf["active"].view(torch.bool) & (mask.sum(-1) >= 2)
        if o.kinds is not None:
            eligible &= rows_offering(mask, o.kinds)
        if o.under_riichi:
            eligible &= opponents_in_riichi(buf["obs"]).any(-1)
        chosen = eligible & (torch.rand(len(mask), generator=self._branch_gen) < o.prob)
        logits = torch.full(mask.shape, float("-inf"))
        rows = torch.nonzero(chosen).squeeze(-1)
        if len(rows):
            logits[rows] = b.logits(buf["obs"][rows], mask[rows], buf["oracle"][rows] if "oracle" in buf else None)
        L = self._cols
        return branch_keys(lambda r, cand: b.values(self.sim, r // L, r % L, cand), logits, chosen, o.candidates)

    @property
    def branch_counts(self) -> dict[str, int]:
        """Branches played, those cut at ``max_steps``, and the policy calls they made."""
        b = self._branch
        return {} if b is None else {"copies": b.copies, "truncated": b.truncated, "forwards": b.forwards}

    def _build(self, columns: list[int], learner_cols: torch.Tensor, bots: list[str],
               nets: NetworkSeats | None, *, rules: dict[str, Any], threads: int, score_scale: float,
               rank_reward: Sequence[float], oracle: bool, hand_reward: str | None,
               device: str | torch.device) -> None:  # fmt: skip
        """The simulator (Python-driven ``columns``, seats in column order; ``bots`` per seat)
        and the specs. ``learner_cols[table, i]`` is the simulator column of slot ``table * L + i``
        (a league rewrites it per game); the env's rows are those columns' rows."""
        tables, L = learner_cols.shape
        super().__init__(batch_size=torch.Size([tables * L]), device=device)
        self.num_tables = tables
        self.nets = nets
        self._cols = len(columns)
        self._col_seat = torch.tensor(columns, dtype=torch.int64)
        self._learner_cols = learner_cols.to(torch.int64).clone()
        self._rows = torch.arange(tables).unsqueeze(-1)
        self.sim_steps = 0  # BatchSim.step calls (one per env step plus network-only steps)
        self._sim_args = dict(
            learner_seats=list(columns),
            bots=bots,
            threads=int(threads),
            score_scale=0.0 if hand_reward else float(score_scale),  # per-hand rewards replace it
            rank_reward=[float(r) for r in rank_reward],
        )
        self._hand_rewards = (
            _HandRewards(HandPotential.load(hand_reward, rank_reward), tables, L) if hand_reward else None
        )
        try:
            self._rules = _mj.Game(**rules)
        except TypeError as e:  # a value of the wrong type (nanobind lists the signature)
            raise ConfigError(f"env.rules={rules}: {e}") from None
        self.oracle = oracle
        self.sim = _mj.BatchSim(tables, self._rules, session_seed=0, **self._sim_args)
        n = tables * L
        self.observation_spec = observation_spec(n, oracle=oracle, device=self.device)
        self.action_spec = action_spec(n, device=self.device)
        self.reward_spec = Unbounded((n, 1), dtype=torch.float32)
        self._last: dict[str, torch.Tensor] | None = None  # the simulator's rows after the last call

    # -- TorchRL hooks --
    def _set_seed(self, seed: int | None) -> None:
        # Walls and bot streams derive from the session seed (docs/mahjong_engine.md): a new
        # seed is a new simulator whose tables start their games on the next reset.
        self.sim = _mj.BatchSim(
            self.num_tables, self._rules, session_seed=int(seed or 0), **self._sim_args
        )
        self._last = None
        if self._branch is not None:  # which decisions branch, and the branches' own draws
            self._branch_gen.manual_seed(int(seed or 0) ^ 0xB4A7C4)
            self._branch.gen.manual_seed(int(seed or 0) ^ 0xC4B7)
        if self._oracle_dropout:
            self._oracle_gen.manual_seed(int(seed or 0) ^ _ORACLE_SEED)

    def _reset(self, tensordict: TensorDictBase | None = None, **kwargs) -> TensorDictBase:
        # checked at resets, not per step: a learner steers before the first one
        if self.oracle_keep_range is not None and not self._keep_steered:
            raise ConfigError(f"env.oracle_keep={list(self.oracle_keep_range)}: a schedule needs a learner that "
                              "steers it per rollout; accepted: phase.module=meeple_mahjong.teacher."
                              "OracleTeacherModule with an in-process collector (env.num_workers=1), or one share")
        tables = None
        if tensordict is not None and "_reset" in tensordict.keys():
            slots = tensordict["_reset"].reshape(self.num_tables, -1)
            tables = slots.any(-1).to(torch.uint8).cpu().numpy()
        self._start_games(tables)
        if self._hand_rewards is not None:
            self._hand_rewards.forget(tables)
        td = self._run(lambda out: self.sim.reset(tables, **out))
        del td["reward"]  # TorchRL: no reward at reset (nor for network-only steps before it)
        return td

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        learner = tensordict["action"].reshape(self.num_tables, -1).to(device="cpu", dtype=torch.int64)
        actions = torch.full((self.num_tables, self._cols), _mj.PASS_ACTION, dtype=torch.int64)
        actions.scatter_(1, self._learner_cols, learner)
        actions = actions.reshape(-1)
        if self.nets is not None and self._last is not None:
            # Network decisions due with the learner's (calls on the same discard) go together.
            due = self._last["active"].view(torch.bool).view(self.num_tables, -1) & ~self._learner_mask()
            self.nets.act(due, self._last["obs"], self._last["mask"], self._last.get("oracle"), actions)
        return self._run(lambda out: self.sim.step(actions.numpy(), **out), step=True)

    # -- what a league (meeple_mahjong.league_env) adds; nothing here --
    def _start_games(self, tables: Any) -> None:
        """Before ``sim.reset(tables)`` (uint8 per table, None = all): seat the new games."""

    def _stepped(self, buf: dict[str, torch.Tensor]) -> None:
        """After every ``sim.step`` with its rows (all columns): e.g. collect finished games."""

    def _learner_mask(self) -> torch.Tensor:
        """[tables, columns] bool: the learner's columns."""
        mask = torch.zeros(self.num_tables, self._cols, dtype=torch.bool)
        return mask.scatter_(1, self._learner_cols, True)

    def _learner_rows(self, v: torch.Tensor) -> torch.Tensor:
        """The learner columns' rows of a simulator array (a copy), in slot order."""
        v = v.view(self.num_tables, self._cols, *v.shape[1:])
        return v[self._rows, self._learner_cols].reshape(-1, *v.shape[2:])

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

    def _run(self, call, step: bool = False) -> TensorDictBase:
        n = self.num_tables * self._cols
        buf = {
            "obs": torch.empty(n, PLANES, WIDTH),
            "mask": torch.empty(n, NUM_ACTIONS, dtype=torch.uint8),
            "active": torch.empty(n, dtype=torch.uint8),
            "reward": torch.empty(n),
            "done": torch.empty(n, dtype=torch.uint8),
            "rank": torch.empty(n, dtype=torch.int8),
            "score": torch.empty(n, dtype=torch.int32),
        }
        if self.oracle or (self.nets is not None and self.nets.oracle):
            buf["oracle"] = torch.empty(n, ORACLE_PLANES, WIDTH)
        out = {k: v.numpy() for k, v in buf.items()}
        call(out)
        if step:
            self.sim_steps += 1
            self._stepped(buf)
        if self.nets is not None:
            reward, done = self._play_networks(buf, out)
            self._last = buf
            # The learner's columns (a copy; the networks' rows stay behind in self._last).
            buf = {k: self._learner_rows(v) for k, v in buf.items()}
            buf["reward"], buf["done"] = reward, done
        if self._hand_rewards is not None:
            seats = self._col_seat[self._learner_cols]  # [tables, L]
            buf["reward"] = buf["reward"] + self._hand_rewards.step(self.sim, seats, buf["done"].view(torch.bool))
        done_b = buf["done"].view(torch.bool).unsqueeze(-1)
        td = {
            "observation": buf["obs"],
            "action_mask": buf["mask"].view(torch.bool),
            "active": buf["active"].view(torch.bool).unsqueeze(-1),
            "rank": buf["rank"].to(torch.int64).unsqueeze(-1),
            "score": buf["score"].to(torch.int64).unsqueeze(-1),
            "seat": self._col_seat[self._learner_cols].reshape(-1, 1),
            "reward": buf["reward"].unsqueeze(-1),
            "done": done_b,
            "terminated": done_b.clone(),
        }
        if self.oracle:
            td["oracle"] = buf["oracle"]
            if self._oracle_dropout:
                self._drop_oracle(td)
        if self._branch is not None:
            td.update(self._branch_rows(buf))
        if self.guide is not None:
            td["guide_action"] = self._guide_actions(td["action_mask"], td["active"], td["seat"])
        return TensorDict(td, batch_size=self.batch_size, device=self.device)

    def _play_networks(self, buf: dict[str, torch.Tensor], out: dict[str, Any]):
        """Steps the tables that wait only on network seats (the others held) until every
        table waits on a learner seat or its game is over. Returns the learner columns'
        reward and done summed over those steps."""
        T, C = self.num_tables, self._cols
        learner = self._learner_mask()
        reward, done = self._learner_rows(buf["reward"]), self._learner_rows(buf["done"])
        while True:
            active = buf["active"].view(torch.bool).view(T, C)
            go = (active & ~learner).any(1) & ~(active & learner).any(1)
            if not go.any():
                return reward, done
            actions = torch.full((T * C,), _mj.PASS_ACTION, dtype=torch.int64)
            self.nets.act(active & go.unsqueeze(1), buf["obs"], buf["mask"], buf.get("oracle"), actions)
            tables = go.to(torch.uint8).numpy()
            try:
                self.sim.step(actions.numpy(), **out, tables=tables)
            except ValueError as err:
                raise ValueError(f"an opponent network chose an illegal action: {err}") from err
            self.sim_steps += 1
            self._stepped(buf)
            reward += self._learner_rows(buf["reward"])
            done |= self._learner_rows(buf["done"])

    @property
    def decisions(self) -> dict[str, int]:
        """Decisions each opponent network has made (empty without networks)."""
        return dict(self.nets.decisions) if self.nets else {}

    @property
    def forwards(self) -> dict[str, int]:
        """Calls of each opponent network: at most one per simulator step (`sim_steps`)."""
        return dict(self.nets.forwards) if self.nets else {}


class _HandRewards:
    """Potential-based per-hand rewards: each learner slot gets Phi(now) - Phi(before) added,
    where Phi is the GRP's expected rank reward at the start of the slot's current hand and 0
    once its game is over (the simulator then pays ``rank_reward[rank]``, and its score term
    is off). Phi changes only when a table starts a new hand, so a hand's reward arrives at
    the step that crosses its end; over a game the rewards add up to the rank reward minus
    Phi at the game's start."""

    def __init__(self, potential: HandPotential, tables: int, slots_per_table: int) -> None:
        self.potential = potential
        self.hand = [-1] * tables  # hands_played when phi was last computed (-1: a new game)
        self.phi = torch.zeros(tables, slots_per_table)  # Phi of each slot's current hand start

    def forget(self, tables: Any) -> None:
        """Tables about to be reset (uint8 per table, None = all) start new games."""
        for t in range(len(self.hand)):
            if tables is None or tables[t]:
                self.hand[t] = -1

    def step(self, sim: Any, seats: torch.Tensor, done: torch.Tensor) -> torch.Tensor:
        """The shaping term per learner slot (flat, slot order) after a reset or step."""
        T, L = seats.shape
        new = self.phi.clone()
        rows, where = [], []
        done = done.view(T, L).any(1)
        for t in range(T):
            if done[t]:
                new[t] = 0.0
                self.hand[t] = -1
                continue
            g = sim.game(t)
            if g.hands_played == self.hand[t]:
                continue
            self.hand[t] = g.hands_played
            scores = g.scores
            for i in range(L):
                rows.append(hand_features(g.kyoku, g.honba, g.riichi_sticks, scores, int(seats[t, i])))
                where.append((t, i))
        if rows:
            phi = self.potential(torch.tensor(rows, dtype=torch.float32))
            for (t, i), v in zip(where, phi.tolist()):
                new[t, i] = v
        delta, self.phi = new - self.phi, new
        return delta.reshape(-1)
