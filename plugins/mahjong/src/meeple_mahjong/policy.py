"""A learned policy in the 1v3 duplicate evaluation (docs/mahjong_bots.md).

`PolicyTable` is a duplicate `Table` whose player ``"policy"`` is a batched function
``policy_fn(obs [N, 84, 34] float32, mask [N, 155] bool) -> actions [N] int64``. It plays
each batch of `GameJob`s on the native batch simulator with *explicit games*: table t plays
exactly job t (its walls, and bot seat s on ``seat_stream_seed(policy_seed, s)`` as
``play_bots`` does), so the bots play the very games of a bot-only duplicate and only the
policy's seats differ. Jobs are grouped by which seats the policy holds (one simulator per
group, the four rotations give four groups) and the groups step in lockstep, so one forward
serves every pending decision of every table of the batch.

`greedy_policy(actor)` turns a TorchRL actor into such a function (argmax of the masked
logits); `policy_from_checkpoint(path)` rebuilds a trained PPO actor from its checkpoint.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

import torch
from tensordict import TensorDict
from torchrl.envs.utils import ExplorationType, set_exploration_type

from meeple.checkpoint.actor import load_actor
from meeple.checkpoint.io import CheckpointError
from meeple.nets.actor_critic import MASK_KEY, OBS_KEY
from meeple_native import mahjong as _mj

from .duplicate import BOT_NAMES, BotTable, GameJob, SeatResult, seat_results
from .env import NUM_ACTIONS, PLANES, WIDTH, backend

POLICY = "policy"  # the player name PolicyTable plays with policy_fn
PolicyFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


class _Group:
    """One simulator: the jobs where the policy holds the same seats, one table per job."""

    def __init__(self, jobs: list[int], games: list[GameJob], seats: tuple[int, ...],
                 bots: list[str], rules: Any, threads: int) -> None:  # fmt: skip
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

    def pending(self) -> torch.Tensor:
        return self.active.view(torch.bool)


class PolicyTable:
    """Plays `GameJob`s whose players are ``"policy"`` (policy_fn) or built-in bot names.

    ``rules`` are engine rule options (as ``Game(**rules)``); ``threads`` native threads per
    simulator. ``decisions`` counts the policy's decisions, ``forwards`` its calls.
    """

    def __init__(self, policy_fn: PolicyFn, *, threads: int = 1, **rules: Any) -> None:
        if threads < 1:
            raise ValueError(f"threads must be >= 1, got {threads}")
        self.policy_fn = policy_fn
        self.threads = threads
        self._rules = _mj.Game(**rules)
        self._bots = BotTable(**rules)
        self.decisions = 0
        self.forwards = 0

    def play(self, jobs: Sequence[GameJob]) -> list[list[SeatResult]]:
        out: list[list[SeatResult] | None] = [None] * len(jobs)
        by_seats: dict[tuple[tuple[int, ...], tuple[str, ...]], list[int]] = {}
        bot_only = []
        for i, job in enumerate(jobs):
            for p in job.players:
                if p != POLICY and p not in BOT_NAMES:
                    raise ValueError(
                        f"unknown player '{p}'; accepted: {POLICY}, {', '.join(BOT_NAMES)}"
                    )
            seats = tuple(s for s, p in enumerate(job.players) if p == POLICY)
            # The simulator ignores the bot named at a learner seat: any valid name will do.
            bots = tuple("random" if p == POLICY else p for p in job.players)
            (by_seats.setdefault((seats, bots), []) if seats else bot_only).append(i)
        for i, res in zip(bot_only, self._bots.play([jobs[i] for i in bot_only]), strict=True):
            out[i] = res
        groups = [
            _Group(idx, [jobs[i] for i in idx], seats, list(bots), self._rules, self.threads)
            for (seats, bots), idx in by_seats.items()
        ]
        self._run(groups)
        for g in groups:
            for t, i in enumerate(g.jobs):
                out[i] = seat_results(g.sim.table_stats(t))
        return out  # type: ignore[return-value]

    def _run(self, groups: list[_Group]) -> None:
        """Steps every group until all their games are over, one policy call per step."""
        for g in groups:
            g.sim.reset(None, **g.out)
        while True:
            live = [g for g in groups if g.pending().any()]
            if not live:  # an unfinished table always waits on a policy seat
                return
            obs = torch.cat([g.obs[g.pending()] for g in live])
            mask = torch.cat([g.mask[g.pending()] for g in live]).view(torch.bool)
            acts = self._act(obs, mask)
            k = 0
            for g in live:
                sel = g.pending()
                actions = torch.full((len(sel),), _mj.PASS_ACTION, dtype=torch.int64)
                n = int(sel.sum())
                actions[sel] = acts[k : k + n]
                k += n
                try:
                    g.sim.step(actions.numpy(), **g.out)
                except ValueError as err:
                    raise ValueError(f"policy_fn chose an illegal action: {err}") from err

    def _act(self, obs: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        actions = self.policy_fn(obs, mask)
        if not isinstance(actions, torch.Tensor) or actions.shape != (len(obs),):
            got = (
                tuple(actions.shape)
                if isinstance(actions, torch.Tensor)
                else type(actions).__name__
            )
            raise ValueError(
                f"policy_fn must return an int64 tensor of shape ({len(obs)},) (one action index "
                f"per observation), got {got}"
            )
        self.decisions += len(obs)
        self.forwards += 1
        return actions.to(device="cpu", dtype=torch.int64)


def greedy_policy(actor: torch.nn.Module, *, device: str | torch.device | None = None) -> PolicyFn:
    """A TorchRL actor (reads ``observation``, ``action_mask``; writes ``logits``) as a
    deterministic policy_fn: the legal action with the highest logit."""
    if device is None:
        param = next(iter(actor.parameters()), None)
        device = param.device if param is not None else torch.device("cpu")
    actor.eval()

    @torch.no_grad()
    def act(obs: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        td = TensorDict({OBS_KEY: obs.to(device), MASK_KEY: mask.to(device)}, batch_size=[len(obs)])
        with set_exploration_type(ExplorationType.DETERMINISTIC):
            td = actor(td)
        if "logits" not in td.keys():
            return td["action"].cpu()
        return td["logits"].masked_fill(~td[MASK_KEY], float("-inf")).argmax(-1).cpu()

    return act


def random_policy(seed: int = 0) -> PolicyFn:
    """A uniformly random legal action (a baseline; its own generator, seeded)."""
    gen = torch.Generator().manual_seed(seed)

    def act(obs: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return torch.multinomial(mask.float(), 1, generator=gen).squeeze(-1)

    return act


def _mahjong_specs(config: dict[str, Any]) -> tuple[Any, Any]:
    env_cfg = dict(config.get("env") or {})
    if env_cfg.get("backend") != "mahjong":
        raise CheckpointError(
            f"the checkpoint was trained on env backend {env_cfg.get('backend')!r}; "
            "only env=mahjong policies play mahjong"
        )
    env = backend.make_env(env_cfg, num_envs=backend.batch_unit(env_cfg))
    try:
        return env.observation_spec, env.action_spec
    finally:
        env.close()


def load_policy_actor(
    path: str | os.PathLike, *, device: str = "cpu"
) -> tuple[torch.nn.Module, dict[str, Any]]:
    """The actor of an ``env=mahjong`` PPO checkpoint (file or run directory) and what
    `meeple.checkpoint.actor.load_actor` says of it (file, global_step, timestamp, config)."""
    return load_actor(path, _mahjong_specs, map_location=device)


def policy_from_checkpoint(path: str | os.PathLike, *, device: str = "cpu") -> PolicyFn:
    """The greedy policy of an ``env=mahjong`` PPO checkpoint (file or run directory)."""
    actor, _ = load_policy_actor(path, device=device)
    return greedy_policy(actor, device=device)
