"""1v3 duplicate evaluation of the training policy as a Lightning callback.

Any stage whose module has a mahjong ``policy`` (a TorchRL actor over the 84 x 34 planes and
the 155-action mask, and the 205 x 34 ``oracle`` planes for phase 2's teacher) can add it to
its phase's ``callbacks``. It plays ``games`` game indices x 4 rotations of the greedy policy
against three copies of an opponent on the native batch simulator
(meeple_mahjong.policy.PolicyTable, meeple_mahjong.duplicate), either at every
``every_n_validations``-th validation (BC: the checkpoint a validation saves, and so the
stage's gate file, then records the evaluation of those very weights) or every
``every_n_epochs`` epochs and after the last one (PPO). The opponent is one of

- a built-in bot (``opponent: rule``, the default; ``random``, ``rule-nofold``);
- ``opponent: start``: a frozen copy of the module's policy taken at ``on_train_start``,
  before any step (in a stage that carries weights from a gate, the gate's policy). The copy
  is saved with the callback's state (a resumed run plays the same start policy; it adds one
  actor's weights to every checkpoint). ``start_rules: false`` plays the copy without the
  actor's fixed logits rule (phase 2's teacher: ``model.oracle_safety``), i.e. the network the
  stage's weights came from (the phase-1 student);
- ``opponent_checkpoint: <file or run directory>``: the actor of an ``env=mahjong`` checkpoint
  (meeple_mahjong.policy.load_policy_actor; oracle ones included), loaded at ``on_train_start``.

Metrics are logged under ``prefix`` (default ``eval/``); several instances with their own
prefixes measure against several opponents, e.g. ``duplicate`` (``eval/``, rule bots) and
``duplicate_start`` (``prefix: eval/vs_start_``, ``opponent: start``):

- ``<prefix>avg_rank`` (1 = always first, 2.5 = as good as the opponents) with its 95% interval
  ``<prefix>avg_rank_ci_low`` / ``<prefix>avg_rank_ci_high`` over game indices (the four
  rotations of one index share walls, so the index is the independent sample);
- ``<prefix>rank_points`` (mean of 90 / 45 / 0 / -135 by placement), ``<prefix>first_rate``;
- per hand: ``<prefix>win_rate``, ``<prefix>deal_in_rate``, ``<prefix>riichi_rate``,
  ``<prefix>call_rate``; ``<prefix>win_per_deal_in`` (hands won per hand dealt into);
  ``<prefix>games`` (game indices);
- against a network (``start`` or a checkpoint) also ``<prefix>effect`` = 2.5 - avg_rank
  (> 0: the policy is better) and ``<prefix>p_value``, the two-sided one-sample t-test of the
  per-index average ranks against 2.5 (`even_metrics`; the duplicate makes 2.5 the null of a
  player against copies of an equal one). When every index has the same average rank the
  variance is 0 and there is no t statistic: the p-value is then 1.0 if that rank is 2.5 (a
  policy against copies of itself, e.g. ``start`` before the first step) and 0.0 otherwise
  (the paired_comparison convention); with a single game index it is nan.

Each evaluation also keeps ``replays`` games (default 1; 0 keeps none) as self-contained HTML
pages (meeple.viewer): game k is the duplicate's game index ``first_game + k`` with the policy at
seat k % 4 against the same opponents, replayed on the engine with its MJAI stream
(meeple_mahjong.recorded) and annotated at each of the policy's decisions with its top actions,
their probabilities and the critic's value. They go to ``<run dir>/replays/phase<N>/`` and, when
the run is tracked, to the MLflow run's artifacts under the same path
(meeple.viewer.artifacts.publish_replays). A replay that fails is a warning, never a failed run.

Against a bot, before the first step the untrained network is measured once
(``<prefix>untrained_*``, the baseline a learning claim is read against, and recorded with
every later evaluation as ``<prefix>untrained_avg_rank`` / ``<prefix>untrained_rank_points``).
Against a network it is skipped by default (``baseline: null``): against ``start`` it is 2.5 by
construction; ``baseline: true`` measures it against a checkpoint.

The metrics are logged before the checkpoint callback runs, so the checkpoint (and a stage's
gate file) records them: a transition gate can require e.g. ``eval/avg_rank <= 2.55``, or
``eval/vs_start_avg_rank <= 2.45`` and ``eval/vs_start_p_value <= 0.05``. Walls and bot
streams come from ``seed`` and the game indices, the same at every evaluation, so successive
numbers differ only by the policy. A greedy policy against copies of itself ranks exactly 2.5
on the CPU; on a GPU the two networks run in batches of different sizes, and kernels whose
rounding depends on the batch may flip a near-tied argmax.
"""

from __future__ import annotations

import copy
import logging
import math
import os
import time
from collections.abc import Sequence
from typing import Any

import lightning as L
import torch

from meeple.callbacks.evaluation import evaluation_due
from meeple.nets.actor_critic import without_logits_transforms

from .duplicate import DuplicateStats, even_test, run_duplicate
from .policy import POLICY, PolicyHeads, PolicyTable, greedy_policy, load_policy_actor
from .tables import BOTS

log = logging.getLogger(__name__)

RANK_POINTS = (90.0, 45.0, 0.0, -135.0)
PREFIX = "eval/"
UNTRAINED = "untrained_"  # after the prefix: eval/untrained_avg_rank
START = "start"  # opponent: a frozen copy of the policy at on_train_start
CHECKPOINT = "checkpoint"  # what self.opponent says when opponent_checkpoint is set
OPPONENT = "opponent"  # the player name of a network opponent on the PolicyTable
EVEN = 2.5  # the average rank of a player against copies of an equal one


def duplicate_metrics(stats: DuplicateStats) -> dict[str, float]:
    """The logged numbers of one duplicate evaluation (keys without the ``eval/`` prefix)."""
    summary = stats.summary()
    ch = summary["challenger"]
    low, high = ch["avg_rank_ci95"] or (float("nan"), float("nan"))
    return {
        "avg_rank": ch["avg_rank"],
        "avg_rank_ci_low": low,
        "avg_rank_ci_high": high,
        "rank_points": sum(p * r for p, r in zip(RANK_POINTS, ch["rank_rates"], strict=True)),
        "first_rate": ch["first_rate"],
        "win_rate": ch["win_rate"],
        "deal_in_rate": ch["deal_in_rate"],
        "win_per_deal_in": ch["win_per_deal_in"],
        "riichi_rate": ch["riichi_rate"],
        "call_rate": ch["call_rate"],
        "games": float(summary["game_indices"]),
    }


def even_metrics(per_index: Sequence[float]) -> dict[str, float]:
    """``effect`` = 2.5 - mean and ``p_value`` of the t-test of the per-index average ranks
    against 2.5 (duplicate.even_test). No variance (every index alike): 1.0 at 2.5, 0.0
    elsewhere; fewer than 2 indices: nan."""
    xs = list(per_index)
    if not xs:
        raise ValueError("even_metrics needs the average rank of at least one game index")
    effect = EVEN - sum(xs) / len(xs)
    test = even_test(xs)
    if test is not None:
        p = test["p"]
    elif len(xs) < 2:
        p = math.nan
    else:  # the same rank at every index: the t statistic is 0/0 or +-inf
        p = 1.0 if effect == 0 else 0.0
    return {"effect": effect, "p_value": p}


def _device(module: torch.nn.Module) -> torch.device:
    param = next(iter(module.parameters()), None)
    return param.device if param is not None else torch.device("cpu")


class DuplicateEvaluation(L.Callback):
    """Duplicate evaluation of ``pl_module.policy`` against three copies of an opponent: a bot,
    ``start`` (the policy as training started) or ``opponent_checkpoint``; see the module doc."""

    def __init__(self, *, games: int, opponent: str | None = None, opponent_checkpoint: str | os.PathLike | None = None,
                 prefix: str = PREFIX, seed: int = 0, every_n_epochs: int = 1, every_n_validations: int | None = None,
                 first_game: int = 0, chunk: int = 32, threads: int = 1, baseline: bool | None = None,
                 rules: dict[str, Any] | None = None, start_rules: bool = True, replays: int = 1) -> None:  # fmt: skip
        if games < 1:
            raise ValueError(f"duplicate evaluation games={games}; accepted: an integer >= 1")
        if every_n_epochs < 1:
            raise ValueError(f"duplicate evaluation every_n_epochs={every_n_epochs}; accepted: an integer >= 1")
        if every_n_validations is not None and every_n_validations < 1:
            raise ValueError(f"duplicate evaluation every_n_validations={every_n_validations}; accepted: "
                             "null (evaluate at epoch ends) or an integer >= 1")
        if not isinstance(replays, int) or replays < 0:
            raise ValueError(f"duplicate evaluation replays={replays!r}; accepted: an integer >= 0 (games kept as "
                             "HTML replays per evaluation, 0 = none)")
        if not isinstance(prefix, str) or not prefix:
            raise ValueError(f"duplicate evaluation prefix={prefix!r}; accepted: a non-empty metric key prefix "
                             "such as eval/ or eval/vs_start_")
        if opponent_checkpoint is not None:
            if opponent is not None:
                raise ValueError(f"duplicate evaluation opponent={opponent!r} and opponent_checkpoint="
                                 f"{str(opponent_checkpoint)!r}; accepted: one of them")
            opponent = CHECKPOINT
        elif opponent is None:
            opponent = "rule"
        elif opponent not in (*BOTS, START):
            raise ValueError(f"unknown duplicate evaluation opponent '{opponent}'; accepted: "
                             f"{', '.join(BOTS)} (bots), {START} (the policy as training started), "
                             "or opponent_checkpoint=<checkpoint file or run directory>")
        if not start_rules and opponent != START:
            raise ValueError("duplicate evaluation start_rules=false applies to opponent=start only")
        self.opponent = opponent
        self.start_rules = start_rules
        self.opponent_checkpoint = opponent_checkpoint
        self.network = opponent in (START, CHECKPOINT)
        self.prefix = prefix
        self.every_n_validations = every_n_validations
        self.validations = 0
        self.games, self.seed, self.first_game = games, seed, first_game
        self.every_n_epochs, self.chunk, self.threads = every_n_epochs, chunk, threads
        # The untrained baseline: by default against bots only (against start it is 2.5).
        self.baseline = (not self.network if baseline is None else baseline) and opponent != START
        self.rules = dict(rules or {})
        self.replays = replays
        self.history: list[dict[str, float]] = []  # every evaluation's metrics, with its global step
        self.untrained: dict[str, float] | None = None  # the baseline measured before the first step
        self.opponent_actor: torch.nn.Module | None = None  # the network opponent, once prepared
        self._start_state: dict[str, torch.Tensor] | None = None  # start weights from a resumed state

    @property
    def state_key(self) -> str:
        # Several instances in one trainer need their own keys; the default one keeps the
        # class name so checkpoints of earlier versions restore into it.
        if self.prefix == PREFIX:
            return super().state_key
        return self._generate_state_key(prefix=self.prefix)

    def _describe(self) -> str:
        return f"checkpoint {self.opponent_checkpoint}" if self.opponent == CHECKPOINT else self.opponent

    def prepare_opponent(self, pl_module: L.LightningModule, global_step: int = 0) -> None:
        """Freeze the start copy or load the checkpoint's actor (network opponents only)."""
        if not self.network or self.opponent_actor is not None:
            return
        policy = pl_module.policy
        if self.opponent == START:
            actor = copy.deepcopy(policy).requires_grad_(False)
            if self._start_state is not None:  # a resumed run: the policy its first start copied
                actor.load_state_dict(self._start_state)
                self._start_state = None
            elif global_step > 0:
                log.warning("duplicate opponent=start: resumed at step %d from a checkpoint without the "
                            "start copy; the opponent is the resumed policy", global_step)
            if not self.start_rules:  # the network the stage started from, without its fixed rule
                without_logits_transforms(actor)
        else:
            actor, info = load_policy_actor(self.opponent_checkpoint, device=str(_device(policy)))
            log.info("duplicate opponent: %s (global step %s)", info["file"], info["global_step"])
        self.opponent_actor = actor.eval()

    def evaluate(self, pl_module: L.LightningModule) -> dict[str, float]:
        """One duplicate evaluation of the module's current greedy policy."""
        policy = pl_module.policy
        if self.network and self.opponent_actor is None:
            if self.opponent == START:  # a copy taken now would be of trained weights
                raise RuntimeError("duplicate evaluation opponent=start: the start copy is taken at "
                                   "on_train_start, which has not run")
            self.prepare_opponent(pl_module)
        was_training = policy.training
        started = time.perf_counter()
        try:
            policies = {POLICY: greedy_policy(policy)}
            opponent = self.opponent
            if self.opponent_actor is not None:
                policies[OPPONENT] = greedy_policy(self.opponent_actor.to(_device(policy)))
                opponent = OPPONENT
            table = PolicyTable(policies, threads=self.threads, **self.rules)
            with torch.no_grad():
                stats = run_duplicate(table, POLICY, opponent, self.games, self.seed,
                                      first_game=self.first_game, chunk=self.chunk)
        finally:
            policy.train(was_training)
        metrics = duplicate_metrics(stats)
        if self.network:
            metrics.update(even_metrics(list(stats.per_index().values())))
        log.info("duplicate vs 3x %s, %d game indices: avg rank %.3f [%.3f, %.3f] (%.1f s)", self._describe(),
                 self.games, metrics["avg_rank"], metrics["avg_rank_ci_low"], metrics["avg_rank_ci_high"],
                 time.perf_counter() - started)
        return metrics

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.prepare_opponent(pl_module, trainer.global_step)
        if self.baseline and trainer.global_step == 0 and not self.history:
            metrics = self.evaluate(pl_module)
            self.history.append({"step": 0.0, "untrained": 1.0, **metrics})
            for logger in trainer.loggers:  # outside an epoch: straight to the loggers
                logger.log_metrics({self.prefix + UNTRAINED + k: v for k, v in metrics.items()}, step=0)
            self.untrained = metrics

    def on_validation_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self.every_n_validations is None or trainer.sanity_checking:
            return
        self.validations += 1
        if self.validations % self.every_n_validations == 0:
            self._evaluate_and_log(trainer, pl_module)

    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self.every_n_validations is None and (evaluation_due(trainer, self.every_n_epochs) or trainer.should_stop):
            self._evaluate_and_log(trainer, pl_module)

    def _evaluate_and_log(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        metrics = self.evaluate(pl_module)
        self.history.append({"step": float(trainer.global_step), **metrics})
        for key, value in metrics.items():
            pl_module.log(self.prefix + key, value, on_step=False, on_epoch=True, prog_bar=key == "avg_rank")
        if self.untrained is not None:
            # Recorded with each evaluation so the gate file says what training started from.
            for key in ("avg_rank", "rank_points"):
                pl_module.log(self.prefix + UNTRAINED + key, self.untrained[key], on_step=False, on_epoch=True)
        if self.replays:
            self.save_replays(trainer, pl_module)

    def save_replays(self, trainer: L.Trainer, pl_module: L.LightningModule) -> list:
        """Plays and publishes this evaluation's ``replays`` games (see the module doc); returns the
        files written in the run directory."""
        from meeple.viewer.artifacts import publish_replays

        from .recorded import evaluation_replays

        policy, critic = pl_module.policy, getattr(pl_module, "critic", None)
        modes = [(m, m.training) for m in (policy, critic) if isinstance(m, torch.nn.Module)]
        started = time.perf_counter()
        try:
            device = _device(policy)
            heads = PolicyHeads(policy, critic if isinstance(critic, torch.nn.Module) else None, device=device)
            opponent_fn = None
            if self.opponent_actor is not None:
                opponent_fn = greedy_policy(self.opponent_actor.to(device))
            with torch.no_grad():
                replays = evaluation_replays(
                    heads, greedy_policy(policy), self._describe(), opponent_fn, games=self.replays,
                    seed=self.seed, first_game=self.first_game, rules=self.rules,
                    title=f"{self.prefix}step {trainer.global_step}: ")  # fmt: skip
            paths = publish_replays(trainer, replays)
        except Exception as err:  # a page is a view of the run: it must never fail it
            log.warning("duplicate evaluation replays not recorded: %s: %s", type(err).__name__, err)
            return []
        finally:
            for module, training in modes:
                module.train(training)
        log.info("duplicate evaluation: %d replay(s) in %.1f s", len(replays), time.perf_counter() - started)
        return paths

    def state_dict(self) -> dict[str, Any]:
        state: dict[str, Any] = {"history": list(self.history), "untrained": self.untrained,
                                 "validations": self.validations}  # fmt: skip
        if self.opponent == START:
            actor = self.opponent_actor
            start = self._start_state if actor is None else {k: v.detach().cpu() for k, v in actor.state_dict().items()}
            state["start_policy"] = start
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.history = list(state["history"])
        self.untrained = state.get("untrained")
        self.validations = int(state.get("validations", 0))
        if self.opponent == START and state.get("start_policy") is not None:
            self._start_state = dict(state["start_policy"])
            self.opponent_actor = None  # rebuilt from these weights at on_train_start


__all__ = ["BOTS", "RANK_POINTS", "DuplicateEvaluation", "duplicate_metrics", "even_metrics"]
