"""Record demonstrations from any policy through the env.

A policy is either a scripted controller (any callable ``td -> action`` named by ``_target_``,
e.g. a plugin's scripted expert) or a TorchRL module that writes ``action``
(a trained actor from :func:`meeple.checkpoint.actor.load_actor`). ``num_envs`` seeded envs from
:func:`meeple.env_factory.make_env` (the training env config) play until ``episodes`` episodes
have ended; the first ``episodes`` to end are kept, in the order they ended (ties: env index).

Command line (``conf/record.yaml``)::

    python -m meeple.phases.bc.record env=<name> +policy._target_=<module.Expert> \
        episodes=50 out=outputs/demonstrations/<name>
    python -m meeple.phases.bc.record env=<name> checkpoint=outputs/runs/<run id> episodes=50 out=...
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import torch
from tensordict import TensorDict, TensorDictBase
from torchrl.envs import EnvBase, ExplorationType, set_exploration_type

from meeple.phases.bc.dataset import DemoMeta, episode_return_summary, write_demonstrations

log = logging.getLogger(__name__)

Policy = Callable[[TensorDictBase], Any]


@dataclass
class Recording:
    """Records (batch size [N]) and what meta.json says about them, before they are written."""

    records: TensorDict
    meta: DemoMeta


def act(policy: Policy, td: TensorDictBase) -> torch.Tensor:
    """The action ``policy`` takes in ``td``: a returned tensor, or the ``action`` a module wrote."""
    out = policy(td.clone(False))
    action = out.get("action") if isinstance(out, TensorDictBase) else out
    if not isinstance(action, torch.Tensor):
        raise TypeError(
            f"policy {policy!r} returned {type(out).__name__}; accepted: an action tensor or a "
            "TensorDict with an 'action' entry"
        )
    return action


def discounted_returns(rewards: torch.Tensor, gamma: float) -> torch.Tensor:
    """Return-to-go of one episode: G_t = r_t + gamma * G_{t+1}, G_T = 0."""
    returns = torch.empty_like(rewards, dtype=torch.float32)
    running = 0.0
    for t in range(rewards.numel() - 1, -1, -1):
        running = float(rewards[t]) + gamma * running
        returns[t] = running
    return returns


@torch.no_grad()
def play_episodes(
    env: EnvBase,
    policy: Policy,
    *,
    episodes: int,
    max_steps: int,
    gamma: float,
    deterministic: bool = True,
    progress: bool = True,
) -> tuple[TensorDict, torch.Tensor]:
    """Records of the first ``episodes`` episodes to end in ``env`` (batch of envs), and their
    undiscounted returns. An episode longer than ``max_steps`` is cut there (the env's own
    truncation, e.g. a 500-step limit, ends episodes first)."""
    n = env.batch_size.numel()
    has_mask = "action_mask" in env.observation_spec.keys()
    steps: list[dict[str, torch.Tensor]] = []  # one entry per batched step, all envs
    start = [0] * n  # step at which each env's current episode began
    skipping = [False] * n  # cut episodes: wait for the env's own end before recording again
    finished: list[tuple[int, int, int]] = []  # (env, first step, last step)
    exploration = ExplorationType.DETERMINISTIC if deterministic else ExplorationType.RANDOM
    bar = _progress_bar(episodes) if progress else None
    try:
        with set_exploration_type(exploration):
            td = env.reset()
            while len(finished) < episodes:
                td["action"] = act(policy, td).reshape(env.batch_size).to(env.action_spec.dtype)
                step = {
                    "observation": td["observation"]
                    .reshape(n, *td["observation"].shape[env.batch_dims :])
                    .clone(),
                    "action": td["action"].reshape(n).clone(),
                }
                if has_mask:
                    step["action_mask"] = td["action_mask"].reshape(n, -1).clone()
                td, td_next = env.step_and_maybe_reset(td)
                step["reward"] = td["next", "reward"].reshape(n).float()
                done = td["next", "done"].reshape(n)
                t = len(steps)
                steps.append(step)
                for i in range(n):
                    if skipping[i]:
                        if done[i]:
                            skipping[i], start[i] = False, t + 1
                        continue
                    cut = t - start[i] + 1 >= max_steps
                    if (done[i] or cut) and len(finished) < episodes:
                        finished.append((i, start[i], t))
                        if bar is not None:
                            bar[0].advance(bar[1])
                    if done[i]:
                        start[i] = t + 1
                    elif cut:
                        skipping[i] = True
                td = td_next
    finally:
        if bar is not None:
            bar[0].stop()
    return _assemble(steps, finished, gamma, has_mask)


def _assemble(steps, finished, gamma, has_mask) -> tuple[TensorDict, torch.Tensor]:
    stacked = {key: torch.stack([s[key] for s in steps]) for key in steps[0]}  # [T, n, ...]
    parts, returns = [], []
    for episode, (i, first, last) in enumerate(finished):
        part = {key: value[first : last + 1, i] for key, value in stacked.items()}
        rewards = part.pop("reward")
        part["return"] = discounted_returns(rewards, gamma)
        part["episode"] = torch.full((last - first + 1,), episode, dtype=torch.int64)
        part["action"] = part["action"].long()
        parts.append(part)
        returns.append(rewards.double().sum())
    keys = ["observation", "action", "episode", "return", *(["action_mask"] if has_mask else [])]
    records = TensorDict(
        {k: torch.cat([p[k] for p in parts]) for k in keys},
        batch_size=[sum(len(p["action"]) for p in parts)],
    )
    return records, torch.stack(returns)


def _progress_bar(total: int):
    from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn

    from meeple.cli_progress import task_progress

    bar = task_progress(
        TextColumn("recording demonstrations"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("episodes"),
        TimeElapsedColumn(),
        transient=False,
    )
    task = bar.add_task("recording demonstrations (episodes)", total=total)
    bar.start()
    return bar, task


def record(
    env_cfg: Mapping[str, Any],
    policy: Policy,
    *,
    recorded_by: str,
    episodes: int,
    seed: int,
    num_envs: int = 8,
    max_steps: int = 1000,
    gamma: float = 0.99,
    deterministic: bool = True,
    transport: Mapping[str, Any] | None = None,
    progress: bool = True,
) -> Recording:
    """Play ``episodes`` episodes of ``policy`` on ``num_envs`` envs seeded with ``seed``."""
    from meeple.env_factory import make_env

    env = make_env(env_cfg, num_envs=num_envs, seed=seed, transport=transport)
    try:
        obs_spec = env.observation_spec["observation"]
        records, returns = play_episodes(
            env,
            policy,
            episodes=episodes,
            max_steps=max_steps,
            gamma=gamma,
            deterministic=deterministic,
            progress=progress,
        )
        num_actions = int(env.action_spec.space.n)
    finally:
        env.close()
    meta = DemoMeta(
        env={k: env_cfg[k] for k in ("backend", "id", "name") if k in env_cfg},
        observation_shape=list(obs_spec.shape[len(env.batch_size) :]),
        observation_dtype=str(obs_spec.dtype).removeprefix("torch."),
        num_actions=num_actions,
        keys=sorted(records.keys()),
        episodes=episodes,
        records=records.batch_size[0],
        recorded_by=recorded_by,
        seed=seed,
        gamma=gamma,
        episode_return=episode_return_summary(returns),
    )
    return Recording(records=records, meta=meta)


def record_to(path, env_cfg: Mapping[str, Any], policy: Policy, **kwargs) -> DemoMeta:
    """:func:`record` and write the dataset at ``path`` (crash-safe); returns its meta."""
    recording = record(env_cfg, policy, **kwargs)
    write_demonstrations(path, recording.records, recording.meta)
    ret = recording.meta.episode_return
    log.info(
        "recorded %d episodes (%d records, return %.1f mean, %.0f..%.0f) from %s into %s",
        recording.meta.episodes,
        recording.meta.records,
        ret["mean"],
        ret["min"],
        ret["max"],
        recording.meta.recorded_by,
        path,
    )
    return recording.meta


# -- policies from config -------------------------------------------------------------------
def scripted_policy(node: Mapping[str, Any]) -> tuple[Policy, str]:
    """A controller from a ``_target_`` node (classes are instantiated; functions are used as they are)."""
    from hydra.utils import instantiate
    from omegaconf import OmegaConf

    target = str(node["_target_"])
    policy = instantiate(OmegaConf.create(dict(node)))
    if not callable(policy):
        from meeple.errors import ConfigError

        raise ConfigError(
            f"policy._target_={target!r} built a {type(policy).__name__}; accepted: a callable "
            "td -> action (a function, a controller class, or a TorchRL module)"
        )
    return policy, f"scripted:{target}"


def checkpoint_policy(path: str, env_cfg: Mapping[str, Any], transport=None) -> tuple[Policy, str]:
    """The trained actor of a checkpoint, rebuilt for this env (its env must be the same one)."""
    from meeple.checkpoint.actor import load_actor
    from meeple.env_factory import make_env
    from meeple.errors import ConfigError

    def make_specs(config: dict[str, Any]):
        saved = {k: config.get("env", {}).get(k) for k in ("backend", "id")}
        wanted = {k: env_cfg.get(k) for k in ("backend", "id")}
        if saved != wanted:
            raise ConfigError(
                f"checkpoint {path} was trained on env {saved}; this recording plays {wanted}; "
                "accepted: a checkpoint of the same env"
            )
        probe = make_env(env_cfg, num_envs=1, seed=0, transport=transport)
        try:
            return probe.observation_spec, probe.action_spec
        finally:
            probe.close()

    actor, info = load_actor(path, make_specs)
    return actor, f"checkpoint:{info['file']}@step{info['global_step']}"


def main(argv: list[str] | None = None) -> int:
    """``python -m meeple.phases.bc.record <overrides>`` (conf/record.yaml)."""
    from omegaconf import OmegaConf

    from meeple.config.compose import compose_config
    from meeple.errors import MeepleError

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        cfg = compose_config(argv, config_name="record")
        env_cfg = OmegaConf.to_container(cfg.env, resolve=True)
        transport = OmegaConf.to_container(cfg.transport, resolve=True)
        node = (
            OmegaConf.to_container(cfg.policy, resolve=True)
            if cfg.get("policy") is not None
            else None
        )
        if (node is None) == (cfg.checkpoint is None):
            raise MeepleError(
                "give exactly one policy: +policy._target_=<callable td -> action> or "
                "checkpoint=<checkpoint file or run directory>"
            )
        if cfg.out is None:
            raise MeepleError("out=<folder> is required: where the dataset is written")
        policy, recorded_by = (
            scripted_policy(node)
            if node is not None
            else checkpoint_policy(str(cfg.checkpoint), env_cfg, transport)
        )
        record_to(
            cfg.out,
            env_cfg,
            policy,
            recorded_by=recorded_by,
            episodes=int(cfg.episodes),
            seed=int(cfg.seed),
            num_envs=int(cfg.num_envs),
            max_steps=int(cfg.max_steps),
            gamma=float(cfg.gamma),
            deterministic=bool(cfg.deterministic),
            transport=transport,
        )
    except MeepleError as err:
        print(f"meeple.phases.bc.record: error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
