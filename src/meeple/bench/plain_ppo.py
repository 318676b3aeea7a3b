"""PPO on a Gymnasium env in plain PyTorch (no TorchRL, no Lightning): the floor.

A single-file, CleanRL-style loop with meeple's hyperparameters and evaluation
protocol. It computes the same quantities as TorchRL's ``ClipPPOLoss`` + ``GAE``
as meeple configures them:

- GAE bootstraps from the value of the true next observation unless the
  episode *terminated* (time-limit truncation bootstraps), and the recursion
  stops at every episode end. The vector env auto-resets in the same step and
  hands back the final observation in ``info["final_obs"]``, so no frame is
  spent on reset steps;
- advantages are standardised per minibatch (unbiased std);
- loss = -min(r A, clip(r) A) + critic_coef * (V - target)^2 - entropy_coef * H.
"""

from __future__ import annotations

import math
import time
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch import nn
from torch.distributions import Categorical

from meeple.bench.common import PPOHparams, RunClock, eval_seeds
from meeple.nets.mlp import mlp  # same init as meeple's model, so all three start alike


def make_envs(env_id: str, num_envs: int) -> gym.vector.SyncVectorEnv:
    return gym.make_vec(
        env_id,
        num_envs=num_envs,
        vectorization_mode="sync",
        vector_kwargs={"autoreset_mode": gym.vector.AutoresetMode.SAME_STEP},
    )


@torch.no_grad()
def greedy_episode_returns(envs: gym.vector.VectorEnv, actor: nn.Module, max_steps: int, seed: int) -> np.ndarray:
    """Return of the first episode of each env, acting with the argmax action.

    Same protocol as :func:`meeple.callbacks.evaluation.greedy_episode_returns`:
    envs that finish early keep stepping but only their first episode counts;
    episodes still running after ``max_steps`` count as they stand.
    """
    obs, _ = envs.reset(seed=seed)
    returns = np.zeros(envs.num_envs)
    finished = np.zeros(envs.num_envs, dtype=bool)
    for _ in range(max_steps):
        action = actor(torch.as_tensor(obs)).argmax(-1)
        obs, reward, terminated, truncated, _ = envs.step(action.numpy())
        returns += np.where(finished, 0.0, reward)
        finished |= terminated | truncated
        if finished.all():
            break
    return returns


@torch.no_grad()
def gae(
    rewards: torch.Tensor,
    values: torch.Tensor,
    next_values: torch.Tensor,
    terminated: torch.Tensor,
    done: torch.Tensor,
    gamma: float,
    lam: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Advantages and value targets; all inputs are ``[steps, envs]``."""
    advantages = torch.zeros_like(rewards)
    running = torch.zeros_like(rewards[0])
    not_terminated = 1.0 - terminated.float()
    not_done = 1.0 - done.float()
    for t in reversed(range(rewards.shape[0])):
        delta = rewards[t] + gamma * next_values[t] * not_terminated[t] - values[t]
        running = delta + gamma * lam * not_done[t] * running
        advantages[t] = running
    return advantages, advantages + values


def train(hp: PPOHparams, seed: int) -> dict[str, Any]:
    """Train until greedy evaluation reaches ``hp.stop_return`` or ``hp.total_frames`` run out."""
    torch.manual_seed(seed)
    np.random.seed(seed)

    envs = make_envs(hp.env_id, hp.num_envs)
    eval_envs = make_envs(hp.env_id, hp.eval_episodes)
    n_obs = envs.single_observation_space.shape[0]
    n_actions = int(envs.single_action_space.n)
    actor = mlp(n_obs, n_actions, hp.hidden, hp.activation, 0.01)
    critic = mlp(n_obs, 1, hp.hidden, hp.activation, 1.0)
    params = [*actor.parameters(), *critic.parameters()]
    optimizer = torch.optim.Adam(params, lr=hp.lr, eps=hp.adam_eps)
    seeds = eval_seeds(seed)

    T, N = hp.rollout_steps, hp.num_envs
    obs_buf = torch.zeros(T, N, n_obs)
    next_obs_buf = torch.zeros(T, N, n_obs)
    actions = torch.zeros(T, N, dtype=torch.long)
    logprobs = torch.zeros(T, N)
    rewards = torch.zeros(T, N)
    terminated = torch.zeros(T, N, dtype=torch.bool)
    done = torch.zeros(T, N, dtype=torch.bool)

    obs = torch.as_tensor(envs.reset(seed=seed)[0])
    clock = RunClock(hp.stop_return)
    clock.start()
    for rollout in range(hp.num_rollouts):
        # 1. collect (env steps + policy inference)
        start = time.perf_counter()
        with torch.no_grad():
            for t in range(T):
                dist = Categorical(logits=actor(obs))
                action = dist.sample()
                obs_buf[t] = obs
                actions[t] = action
                logprobs[t] = dist.log_prob(action)
                next_obs, reward, term, trunc, info = envs.step(action.numpy())
                rewards[t] = torch.as_tensor(reward)
                terminated[t] = torch.as_tensor(term)
                done[t] = torch.as_tensor(term | trunc)
                obs = torch.as_tensor(next_obs)
                next_obs_buf[t] = obs
                if "_final_obs" in info:  # envs that ended here: the true last observation
                    ended = np.flatnonzero(info["_final_obs"])
                    next_obs_buf[t, ended] = torch.as_tensor(np.stack(info["final_obs"][ended]))
        clock.add_collect(time.perf_counter() - start, T * N)

        # 2. advantages once per rollout, then minibatch SGD
        with torch.no_grad():
            values = critic(obs_buf).squeeze(-1)
            next_values = critic(next_obs_buf).squeeze(-1)
        advantages, targets = gae(rewards, values, next_values, terminated, done, hp.gamma, hp.gae_lambda)
        b_obs, b_actions, b_logprobs = obs_buf.reshape(-1, n_obs), actions.reshape(-1), logprobs.reshape(-1)
        b_advantages, b_targets = advantages.reshape(-1), targets.reshape(-1)
        for group in optimizer.param_groups:
            group["lr"] = hp.lr_at(rollout)
        for _ in range(hp.ppo_epochs):
            order = torch.randperm(T * N)
            for i in range(hp.minibatches_per_epoch):
                idx = order[i * hp.minibatch_size : (i + 1) * hp.minibatch_size]
                dist = Categorical(logits=actor(b_obs[idx]))
                log_ratio = dist.log_prob(b_actions[idx]) - b_logprobs[idx]
                adv = b_advantages[idx]
                if hp.normalize_advantage:
                    adv = (adv - adv.mean()) / adv.std().clamp_min(1e-6)
                ratio = log_ratio.exp()
                clipped = log_ratio.clamp(math.log1p(-hp.clip_epsilon), math.log1p(hp.clip_epsilon)).exp()
                policy_loss = -torch.min(ratio * adv, clipped * adv).mean()
                value_loss = (critic(b_obs[idx]).squeeze(-1) - b_targets[idx]).pow(2).mean()
                entropy = dist.entropy().mean()
                loss = policy_loss + hp.critic_coef * value_loss - hp.entropy_coef * entropy
                optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(params, hp.max_grad_norm)
                optimizer.step()

        # 3. greedy evaluation and the stop rule
        if hp.is_eval_rollout(rollout + 1):
            start = time.perf_counter()
            returns = greedy_episode_returns(eval_envs, actor, hp.eval_max_steps, next(seeds))
            if clock.add_eval(time.perf_counter() - start, float(returns.mean())):
                break
    clock.finish()
    envs.close()
    eval_envs.close()
    return clock.result()
