"""League self-play as a LightningModule: PPO on the learner's own decisions while the other
seats of every table are drawn from the league (docs/league.md).

The env seats networks by name (the league protocol, below); this module owns the league:

* **Seating.** When a table starts a game, each of its other seats is drawn from the pool's
  mix (:meth:`LeaguePool.sample`): ``latest`` (a frozen copy of the learner, refreshed at every
  rollout boundary), a snapshot, or an anchor (the policy the stage started from, e.g. the
  phase-2 student, and the checkpoints ``league.anchors`` names, e.g. phase 1's gate). The
  draws come from this module's generator, saved in checkpoints.
* **Results and ratings.** At each rollout's end the finished games are rated (OpenSkill
  Plackett-Luce over the four seats) and logged: the learner's mu, sigma and conservative
  rating mu - 3 sigma (``best.pt`` monitors it), pool size, promotions, who sat where.
* **Promotion.** Every ``promote_every`` rollouts the learner's weights join the pool (FIFO on
  disk, anchors kept, the most used few built on the device).
* **PPO schedules** (``phase.schedule``): entropy coefficient decays linearly, cosine learning
  rate, and a rollout's later epochs are skipped once the approximate KL of the epochs done
  exceeds a threshold; the loss reads only rows where the learner had to act (``active``).

The env follows the league protocol (meeple.phases.league.protocol). With ``collector=ray`` the
envs live in Ray actors, which seat their tables from a per-rollout plan and report their games
back (:mod:`meeple.phases.league.remote`); ratings, promotion and the pool stay here.
"""

from __future__ import annotations

import copy
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import torch
from tensordict import TensorDictBase

from meeple.checkpoint.actor import actor_state, checkpoint_file
from meeple.checkpoint.io import CheckpointError, load_verified
from meeple.errors import ConfigError
from meeple.phases.league.pool import LeaguePool, OpponentPolicies
from meeple.phases.league.protocol import ANCHOR, LATEST, LEARNER, PROTOCOL, is_league_env
from meeple.phases.league.remote import RaySeating
from meeple.phases.league.schema import League, Schedule
from meeple.phases.ppo.data import RolloutBatch
from meeple.phases.ppo.module import PPOModule


class LeagueModule(PPOModule):
    def __init__(self, actor: torch.nn.Module, critic: torch.nn.Module, *, league: League, schedule: Schedule,
                 seating_seed: int, **ppo: Any) -> None:
        super().__init__(actor, critic, **ppo)
        self.league, self.schedule = league, schedule
        self.entropy_start = float(ppo["entropy_coef"])
        self.seating = torch.Generator().manual_seed(seating_seed)
        self.opponent_fns = OpponentPolicies(league.greedy_opponents, seating_seed)
        self.folder: Path | None = None
        self.stage_index = 0
        self.pool: LeaguePool | None = None
        self.env: Any = None
        self.latest: torch.nn.Module | None = None
        self._saved: dict[str, Any] | None = None  # league state from a checkpoint, until the pool opens
        self.promotions = 0
        self.seats: Counter[str] = Counter()  # category -> seats drawn (latest / pool / anchor)
        self.games = 0
        self.remote_builds = 0  # networks built by Ray actors (collector=ray)
        self._results: list[dict[str, Any]] = []  # finished games reported by Ray actors, not yet rated
        self._rollout_ranks: list[int] = []  # the learner's ranks in the rollout's finished games
        self._epochs_done = 0  # PPO epochs the last rollout took (kl_epochs may stop early)

    # -- where the pool lives, and the env ----------------------------------------------------
    def use_run_folder(self, folder: Path, stage_index: int) -> None:
        """The stage's folder of the run directory (the pool goes to ``opponent_pool/``)."""
        self.folder, self.stage_index = Path(folder), stage_index

    def on_fit_start(self) -> None:
        folder = self.folder or Path(tempfile.mkdtemp(prefix="league-", dir=self.trainer.default_root_dir))
        mix = self.league.mix
        self.pool = LeaguePool(folder / "opponent_pool", self._make_policy, max_on_disk=self.league.max_on_disk,
                               device_slots=self.league.device_slots, sigma_widen=self.league.sigma_widen,
                               mix={"self": mix.latest, "pool": mix.pool, "anchor": mix.anchor},
                               learner=LEARNER, self_name=LATEST)
        if self._saved is not None:
            state = self._saved
            self.pool.load_state_dict(state["pool"])
            self.seating.set_state(state["seating"])
            self.promotions, self.games = state["promotions"], state["games"]
            self.seats = Counter(state["seats"])
            self.remote_builds = int(state.get("remote_builds", 0))
        else:  # the starting policy (a carried gate) is the league's anchor, beside phase.league.anchors
            self.pool.add_anchor(ANCHOR, self._actor_weights(), step=self.global_step, phase=self.stage_index)
            for name, path in self.league.anchors.items():
                self.pool.add_anchor(name, anchor_weights(self.actor, name, path), phase=self.stage_index)
        self._saved = None
        self.latest = copy.deepcopy(self.actor).requires_grad_(False)
        self._set_entropy()

    def prepare_env(self, env: Any) -> None:
        """Called by the datamodule on the env it builds, before its first reset."""
        if not is_league_env(env):
            raise ConfigError(f"phase=league needs an env that seats networks (league_seats, {', '.join(PROTOCOL)}); "
                              f"{type(env).__name__} does not (an env option turns it on, e.g. env.league=true)")
        if self.pool is None:
            raise RuntimeError("LeagueModule.prepare_env before on_fit_start: the pool is not open")
        self.env = env
        env.set_league({LATEST: self.opponent_fns(self.latest)}, self.seat)

    def seat(self, table: int, game: int) -> list[str]:
        """The other seats of ``table``'s next game, drawn from the league."""
        return self.pool.seat_mix().seat(self.seating, self.env, self.pool.policy, self.seats)

    def remote_env_hook(self) -> RaySeating:
        """``collector=ray``: the learner's side of seating tables in Ray actors (the datamodule
        hands it to the collector instead of calling :meth:`prepare_env`)."""
        if self.pool is None:
            raise RuntimeError("LeagueModule.remote_env_hook before on_fit_start: the pool is not open")
        return RaySeating(self)

    def take_report(self, report: dict[str, Any]) -> None:
        """One Ray actor's rollout: its finished games (rated at the rollout's end), seats, builds."""
        self._results.extend(report["results"])
        self.seats.update(report["seats"])
        self.remote_builds += int(report["builds"])

    def _actor_weights(self) -> dict[str, torch.Tensor]:
        return {k: v.detach().to("cpu", copy=True) for k, v in self.actor.state_dict().items()}

    def _make_policy(self, weights: dict[str, torch.Tensor]):
        network = copy.deepcopy(self.actor).requires_grad_(False)
        network.load_state_dict(weights)
        return self.opponent_fns(network)

    # -- PPO with the league's schedules ------------------------------------------------------
    def loss_terms(self, batch: TensorDictBase):
        """Only the learner's decisions count: rows where it had no choice (``active`` false)
        carry no policy gradient but would weigh in the value and entropy means."""
        if "active" in batch.keys():
            active = batch["active"].reshape(-1)
            if not active.all():
                batch = batch[active]
        return super().loss_terms(batch)

    def training_step(self, batch: RolloutBatch, batch_idx: int) -> None:
        """``ppo_epochs`` passes, stopped after ``kl_epochs.after`` when the approx KL is too high."""
        stop = self.schedule.kl_epochs
        per_epoch = max(len(batch) // max(self.trainer.datamodule.ppo_epochs, 1), 1)
        kl, done = [], 0
        for i, minibatch in enumerate(batch):
            if len(minibatch) == 0:
                continue
            metrics = self.minibatch_step(minibatch)
            if "train/kl_approx" in metrics:
                kl.append(metrics["train/kl_approx"].detach())
            if (i + 1) % per_epoch == 0:
                done += 1
                if stop.threshold is not None and done >= stop.after and kl and torch.stack(kl).mean() > stop.threshold:
                    break
        self._epochs_done = done
        self.log_at_optimizer_steps()

    def _set_entropy(self) -> None:
        final = self.schedule.entropy_final
        if final is None or not hasattr(self.loss_module, "entropy_coeff"):
            return
        progress = min(self.current_epoch / max(int(self.trainer.max_epochs or 1), 1), 1.0)
        self.loss_module.entropy_coeff.fill_(self.entropy_start + (final - self.entropy_start) * progress)

    def configure_optimizers(self):
        return self.with_lr_schedule(self.make_optimizer(), self.schedule.lr)

    # -- the rollout boundary: ratings, promotion, the latest copy ----------------------------
    def on_train_epoch_end(self) -> None:
        ranks = []
        results, self._results = self._results, []
        if self.env is not None:
            results += self.env.pop_results()
        for result in results:
            self.pool.record(result)
            ranks.append(result["ranks"][result["players"].index(LEARNER)])
        self.games += len(ranks)
        self._rollout_ranks = ranks
        self.latest.load_state_dict(self.actor.state_dict())
        if (self.current_epoch + 1) % self.league.promote_every == 0:
            self.pool.promote(self._actor_weights(), step=self.global_step, phase=self.stage_index)
            self.promotions += 1
        super().on_train_epoch_end()  # publishes (rollout_metrics below) and steps the LR
        self._set_entropy()  # for the next rollout

    def rollout_metrics(self) -> dict[str, float]:
        ratings = self.pool.ratings
        mu, sigma = ratings.rating(LEARNER)
        seats = sum(self.seats.values()) or 1
        metrics = {
            "league/learner_mu": mu, "league/learner_sigma": sigma,
            "league/learner_conservative": ratings.conservative(LEARNER),
            "league/anchor_conservative": ratings.conservative(ANCHOR),
            # the pool's anchors, not the config's: a resumed league keeps the ones it started with
            **{f"league/anchor_{name}_conservative": ratings.conservative(name) for name in self.pool.anchors()
               if name != ANCHOR},
            "league/pool_size": float(len(self.pool.snapshots())), "league/promotions": float(self.promotions),
            "league/games": float(self.games), "league/builds": float(self.pool.builds + self.remote_builds),
            "league/ppo_epochs": float(self._epochs_done),
            "train/entropy_coef": float(self.loss_module.entropy_coeff) if hasattr(self.loss_module, "entropy_coeff")
            else 0.0,
        }
        metrics.update({f"league/seats_{k}": self.seats[k] / seats for k in ("latest", "pool", "anchor")})
        if self._rollout_ranks:
            metrics["league/learner_avg_rank"] = 1.0 + sum(self._rollout_ranks) / len(self._rollout_ranks)
        return metrics

    # -- checkpoints: the league resumes exactly ---------------------------------------------
    # ``latest`` is the actor at every rollout boundary (where checkpoints are written) and is built
    # again from the restored actor in on_fit_start, which runs after the restore: it is never saved,
    # and checkpoints written before that rule have their copy dropped before the weights load.
    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        _drop_latest(checkpoint["state_dict"])
        checkpoint["league"] = {"pool": self.pool.state_dict(), "seating": self.seating.get_state(),
                                "promotions": self.promotions, "games": self.games, "seats": dict(self.seats),
                                "remote_builds": self.remote_builds}

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        if "league" not in checkpoint:
            raise ConfigError("this checkpoint has no league state (it was not written by phase=league); "
                              "resume a league run from its own checkpoints")
        self._saved = checkpoint["league"]
        _drop_latest(checkpoint["state_dict"])


def _drop_latest(state_dict: dict[str, torch.Tensor]) -> None:
    for key in [k for k in state_dict if k.startswith("latest.")]:
        del state_dict[key]


def anchor_weights(actor: torch.nn.Module, name: str, path: str) -> dict[str, torch.Tensor]:
    """The actor of checkpoint ``path`` (a file or a run directory) for ``phase.league.anchors.<name>``,
    checked to fit the learner's network ``actor`` now rather than when a table first seats it."""
    where = f"phase.league.anchors.{name}={path}"
    try:
        file = checkpoint_file(path)
        saved = actor_state(load_verified(file, map_location="cpu").get("model_state_dict") or {}, str(file))
        own = {k.replace("._orig_mod", ""): k for k in actor.state_dict()}  # the learner may be compiled
        weights = {own.get(k, k): v for k, v in saved.items()}
        copy.deepcopy(actor).load_state_dict(weights, strict=True)
    except CheckpointError as err:
        raise ConfigError(f"{where}: {err}; accepted: a checkpoint of the learner's network") from None
    except RuntimeError as err:
        raise ConfigError(f"{where}: its weights do not fit the learner's network "
                          f"({' '.join(str(err).split())[:300]}); accepted: a checkpoint of the same model") from None
    return weights
