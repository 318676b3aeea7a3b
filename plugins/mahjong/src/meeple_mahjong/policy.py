"""Learned policies in the 1v3 duplicate (docs/mahjong_bots.md): any seat may be a network.

`PolicyTable` is a duplicate `Table` whose players are built-in bot names or the names of
batched functions ``policy_fn(obs [N, 84, 34] float32, mask [N, 155] bool) -> actions [N]
int64`` given as ``policies={"a": fn_a, "b": fn_b}`` (a single function plays as ``"policy"``).
It plays each batch of `GameJob`s on the native batch simulator with *explicit games*: table t
plays exactly job t (its walls, and bot seat s on ``seat_stream_seed(policy_seed, s)`` as
``play_bots`` does), so the bots play the very games of a bot-only duplicate and only the
policies' seats differ. Jobs are grouped by which seats the policies hold (one simulator per
group) and the groups step in lockstep; each pending decision is routed to the policy that
holds its seat, so every step costs one forward per policy, whatever the number of tables.

An *oracle* policy (phase 2's teacher, which also sees the hidden tiles) is a function with
the attribute ``oracle = True``; it is called ``policy_fn(obs, mask, oracle [N, 205, 34])`` with
the oracle planes of each deciding seat (meeple_mahjong.encode_oracle). The simulators write
those planes only when some policy of the table is an oracle one.

`greedy_policy(actor)` (meeple.nets.policy_fn) turns a TorchRL actor into such a function (argmax of the masked
logits; an oracle function when the actor reads ``oracle``); `policy_from_checkpoint(path)`
rebuilds a trained actor from its checkpoint (an ``env.oracle=true`` one included).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import torch
from hydra.utils import instantiate
from omegaconf import OmegaConf
from tensordict import TensorDict
from torchrl.envs.utils import ExplorationType, set_exploration_type

from meeple.checkpoint.actor import actor_from_checkpoint, checkpoint_file, load_actor
from meeple.checkpoint.io import CheckpointError, load_verified
from meeple.nets.actor_critic import MASK_KEY, OBS_KEY
from meeple.nets.policy_fn import greedy_policy, random_policy, sampled_policy  # noqa: F401 (re-exported)
from meeple_native import mahjong as _mj

from .specs import (
    NUM_ACTIONS,
    ORACLE_PLANES,
    PLANES,
    WIDTH,
    PolicyFn,
    action_spec,
    call_policy,
    is_oracle,
    observation_spec,
    slots_per_table,
)
from .tables import BOTS, BotTable, GameJob, SeatResult, seat_results

POLICY = "policy"  # the player name PolicyTable plays with policy_fn
# fn(obs, mask) -> actions, or fn(obs, mask, oracle) -> actions when fn.oracle is true


def blind_policy(policy: PolicyFn) -> PolicyFn:
    """An oracle ``policy`` (phase 2's teacher) shown all-zero oracle planes: a public player that
    reads no hidden tile, so a table of it computes no oracle planes (``duplicate
    --blind-challenger``: what the teacher's weights are worth without the hidden tiles)."""
    if not is_oracle(policy):
        raise ValueError("blind_policy needs an oracle policy (one that reads the oracle planes)")

    def act(obs: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        zeros = torch.zeros(len(obs), ORACLE_PLANES, WIDTH)
        return call_policy(policy, obs, mask, zeros, what="the blind policy's network")

    return act


class _Group:
    """One simulator: the jobs where policies hold the same seats, one table per job.

    ``owner[slot]`` is the policy that plays the slot (slot = table * L + i plays seat
    ``seats[i]``, docs/mahjong_env.md)."""

    def __init__(self, jobs: list[int], games: list[GameJob], seats: tuple[int, ...],
                 bots: list[str], rules: Any, threads: int, names: list[str], oracle: bool) -> None:  # fmt: skip
        self.jobs = jobs
        self.sim = _mj.BatchSim(
            len(games), rules, learner_seats=list(seats), bots=bots, threads=threads,
            games=[(g.session_seed, g.game_index, g.policy_seed) for g in games],
        )  # fmt: skip
        n = self.sim.num_slots
        self.obs = torch.empty(n, PLANES, WIDTH)
        self.mask = torch.empty(n, NUM_ACTIONS, dtype=torch.uint8)
        self.active = torch.empty(n, dtype=torch.uint8)
        self.out = dict(obs=self.obs.numpy(), mask=self.mask.numpy(), active=self.active.numpy())
        self.oracle = torch.empty(n, ORACLE_PLANES, WIDTH) if oracle else None
        if self.oracle is not None:
            self.out["oracle"] = self.oracle.numpy()
        owners = [names.index(g.players[seat]) for g in games for seat in seats]
        self.owner = torch.tensor(owners, dtype=torch.int64)

    def pending(self) -> torch.Tensor:
        return self.active.view(torch.bool)


class PolicyTable:
    """Plays `GameJob`s whose players are policy names (keys of ``policies``) or bot names.

    ``policies`` is one policy_fn (played as ``"policy"``) or a mapping name -> policy_fn
    (oracle ones, `is_oracle`, get the oracle planes too); ``rules`` are engine rule options
    (as ``Game(**rules)``); ``threads`` native threads per simulator. ``decisions[name]`` counts a policy's decisions, ``forwards[name]`` its calls,
    ``steps`` the lockstep steps (each calls a policy at most once).
    """

    def __init__(self, policies: PolicyFn | Mapping[str, PolicyFn], *, threads: int = 1,
                 **rules: Any) -> None:  # fmt: skip
        if threads < 1:
            raise ValueError(f"threads must be >= 1, got {threads}")
        self.policies = dict(policies) if isinstance(policies, Mapping) else {POLICY: policies}
        clash = sorted(set(self.policies) & set(BOTS))
        if not self.policies or clash:
            raise ValueError(
                f"policy names {clash or '(none)'} are not allowed; accepted: at least one name that "
                f"is not a bot's ({', '.join(BOTS)})"
            )
        self.names = list(self.policies)
        # Oracle planes cost an encoding per decision: the simulators write them only if read.
        self.oracle = any(is_oracle(fn) for fn in self.policies.values())
        self.threads = threads
        self._rules = _mj.Game(**rules)
        self._bots = BotTable(**rules)
        self.decisions = dict.fromkeys(self.names, 0)
        self.forwards = dict.fromkeys(self.names, 0)
        self.steps = 0

    def play(self, jobs: Sequence[GameJob]) -> list[list[SeatResult]]:
        out: list[list[SeatResult] | None] = [None] * len(jobs)
        by_seats: dict[tuple[tuple[int, ...], tuple[str, ...]], list[int]] = {}
        bot_only = []
        for i, job in enumerate(jobs):
            for p in job.players:
                if p not in self.policies and p not in BOTS:
                    raise ValueError(
                        f"unknown player '{p}'; accepted: {', '.join(self.names)}, {', '.join(BOTS)}"
                    )
            seats = tuple(s for s, p in enumerate(job.players) if p in self.policies)
            # The simulator ignores the bot named at a learner seat: any valid name will do.
            bots = tuple("random" if p in self.policies else p for p in job.players)
            (by_seats.setdefault((seats, bots), []) if seats else bot_only).append(i)
        for i, res in zip(bot_only, self._bots.play([jobs[i] for i in bot_only]), strict=True):
            out[i] = res
        groups = [
            _Group(idx, [jobs[i] for i in idx], seats, list(bots), self._rules, self.threads, self.names,
                   self.oracle)
            for (seats, bots), idx in by_seats.items()
        ]
        self._run(groups)
        for g in groups:
            for t, i in enumerate(g.jobs):
                out[i] = seat_results(g.sim.table_stats(t))
        return out  # type: ignore[return-value]

    def _run(self, groups: list[_Group]) -> None:
        """Steps every group until all their games are over, one call per policy per step."""
        for g in groups:
            g.sim.reset(None, **g.out)
        while True:
            live = [g for g in groups if g.pending().any()]
            if not live:  # an unfinished table always waits on a policy seat
                return
            self.steps += 1
            pending = [g.pending() for g in live]
            obs = torch.cat([g.obs[p] for g, p in zip(live, pending, strict=True)])
            mask = torch.cat([g.mask[p] for g, p in zip(live, pending, strict=True)]).view(torch.bool)
            owner = torch.cat([g.owner[p] for g, p in zip(live, pending, strict=True)])
            oracle = None
            if self.oracle:
                oracle = torch.cat([g.oracle[p] for g, p in zip(live, pending, strict=True)])
            acts = torch.empty(len(obs), dtype=torch.int64)
            for k, name in enumerate(self.names):
                mine = (owner == k).nonzero().squeeze(-1)
                if len(mine):
                    planes = None if oracle is None else oracle[mine]
                    acts[mine] = self._act(name, obs[mine], mask[mine], planes)
            k = 0
            for g, sel in zip(live, pending, strict=True):
                actions = torch.full((len(sel),), _mj.PASS_ACTION, dtype=torch.int64)
                n = int(sel.sum())
                actions[sel] = acts[k : k + n]
                k += n
                try:
                    g.sim.step(actions.numpy(), **g.out)
                except ValueError as err:
                    raise ValueError(f"a policy chose an illegal action: {err}") from err

    def _act(self, name: str, obs: torch.Tensor, mask: torch.Tensor,
             oracle: torch.Tensor | None) -> torch.Tensor:  # fmt: skip
        actions = call_policy(self.policies[name], obs, mask, oracle, what=f"policy '{name}'")
        self.decisions[name] += len(obs)
        self.forwards[name] += 1
        return actions


def _mahjong_specs(config: dict[str, Any]) -> tuple[Any, Any]:
    env_cfg = config.get("env") or {}
    if env_cfg.get("backend") != "mahjong":
        raise CheckpointError(
            f"the checkpoint was trained on env backend {env_cfg.get('backend')!r}; "
            "only env=mahjong policies play mahjong"
        )
    # The env's own specs (meeple_mahjong.specs), without building an env: a league's batch unit
    # is one table, an oracle env adds the oracle planes the teacher's stem reads.
    n = slots_per_table(env_cfg)
    return observation_spec(n, oracle=bool(env_cfg.get("oracle", False))), action_spec(n)


def load_policy_actor(
    path: str | os.PathLike, *, device: str = "cpu"
) -> tuple[torch.nn.Module, dict[str, Any]]:
    """The actor of an ``env=mahjong`` PPO checkpoint (file or run directory) and what
    `meeple.checkpoint.actor.load_actor` says of it (file, global_step, timestamp, config).

    The specs come from the saved env config, so an ``env.oracle=true`` checkpoint gets the
    ``oracle`` observation its ``model.oracle_planes`` stem reads."""
    return load_actor(path, _mahjong_specs, map_location=device)


def policy_from_checkpoint(path: str | os.PathLike, *, device: str = "cpu") -> PolicyFn:
    """The greedy policy of an ``env=mahjong`` PPO checkpoint (file or run directory)."""
    actor, _ = load_policy_actor(path, device=device)
    return greedy_policy(actor, device=device)


class PolicyHeads:
    """What a network thinks of a batch of decisions: the actor's probabilities over the 155
    actions (softmax of the masked logits) and, with a critic, its value estimate.

    An actor that reads the ``oracle`` planes (phase 2's teacher) is given them: ``oracle`` is
    true then and the caller passes the deciding seats' planes."""

    def __init__(self, actor: torch.nn.Module, critic: torch.nn.Module | None = None, *,
                 device: str | torch.device = "cpu") -> None:  # fmt: skip
        self.actor = actor.eval()
        self.critic = critic.eval() if critic is not None else None
        self.device = torch.device(device)
        self.oracle = "oracle" in getattr(actor, "in_keys", ())

    @torch.no_grad()
    def __call__(self, obs: torch.Tensor, mask: torch.Tensor,
                 oracle: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:  # fmt: skip
        """``(probs [N, 155], values [N] or None)`` on the CPU."""
        inputs = {OBS_KEY: obs.to(self.device), MASK_KEY: mask.to(self.device)}
        if self.oracle:
            inputs["oracle"] = oracle.to(self.device)
        td = TensorDict(inputs, batch_size=[len(obs)])
        with set_exploration_type(ExplorationType.DETERMINISTIC):
            logits = self.actor(td.clone(False))["logits"].float().cpu()
            values = None
            if self.critic is not None:
                values = self.critic(td.clone(False))["state_value"].float().cpu().reshape(len(obs))
        probs = logits.masked_fill(~mask.cpu(), float("-inf")).softmax(-1)
        return probs, values


def load_policy_heads(path: str | os.PathLike, *, device: str = "cpu") -> tuple[PolicyHeads, dict[str, Any]]:
    """`PolicyHeads` of an ``env=mahjong`` checkpoint (file or run directory, resolved as
    `load_policy_actor` does) and what the loader says of it (file, global_step, config).
    The critic comes along when the checkpoint holds its weights (``critic.*``)."""
    file = checkpoint_file(path)
    ckpt = load_verified(file, map_location=device)
    actor, info = actor_from_checkpoint(ckpt, file, _mahjong_specs)
    critic = _critic(ckpt, file, info["config"])
    actor.to(device)
    if critic is not None:
        critic.to(device)
    return PolicyHeads(actor, critic, device=device), info


def _part_state(ckpt: dict[str, Any], prefix: str) -> dict[str, torch.Tensor]:
    """The weights a checkpoint saved under ``prefix`` (e.g. ``critic.``), named as in the part."""
    return {k[len(prefix):].replace("._orig_mod", ""): v
            for k, v in (ckpt.get("model_state_dict") or {}).items() if k.startswith(prefix)}  # fmt: skip


def _load_part(part: torch.nn.Module, state: dict[str, torch.Tensor], file: os.PathLike, name: str) -> torch.nn.Module:
    try:
        part.load_state_dict(state, strict=True)
    except RuntimeError as err:
        raise CheckpointError(f"{file}: the {name} weights do not fit the saved model "
                              f"({' '.join(str(err).split())[:300]})") from err  # fmt: skip
    return part


def _critic(ckpt: dict[str, Any], file: os.PathLike, config: dict[str, Any]) -> torch.nn.Module | None:
    """The checkpoint's critic, rebuilt like its actor (a second build of the model, whose
    actor is dropped); None when it saved no critic weights."""
    state = _part_state(ckpt, "critic.")
    if not state:
        return None
    _, critic = instantiate(OmegaConf.create(config["model"]))(*_mahjong_specs(config))
    return _load_part(critic, state, file, "critic")


def load_aux_heads(path: str | os.PathLike, *, device: str = "cpu") -> torch.nn.Module | None:
    """The auxiliary module BC trained beside a checkpoint's policy (trunk + the heads of
    :data:`meeple_mahjong.net.AUX_OUTPUTS`, in eval mode), or None when it saved none (``aux.*``)."""
    file = checkpoint_file(path)
    ckpt = load_verified(file, map_location=device)
    state = _part_state(ckpt, "aux.")
    if not state:
        return None
    config = ckpt.get("config") or {}
    _, _, aux = instantiate(OmegaConf.create(config["model"]))(*_mahjong_specs(config), with_aux=True)
    return _load_part(aux, state, file, "auxiliary").to(device).eval()
