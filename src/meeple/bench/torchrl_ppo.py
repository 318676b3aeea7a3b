"""PPO on a Gymnasium env with plain TorchRL: no Lightning, no Hydra.

The baseline meeple is measured against. It is the loop TorchRL's PPO tutorial
teaches, with meeple's hyperparameters and evaluation protocol:

1. ``Collector`` fills one rollout of ``num_envs * rollout_steps`` frames from
   a ``GymWrapper`` around one synchronous Gymnasium vector env;
2. ``GAE`` writes advantages and value targets once per rollout;
3. ``ppo_epochs`` shuffled passes of ``ClipPPOLoss`` minibatches, Adam with
   gradient clipping, learning rate annealed linearly per rollout;
4. every ``eval_every_n_rollouts`` rollouts, greedy episodes on a fresh env
   batch; stop once the mean return reaches ``stop_return``.
"""

from __future__ import annotations

import time
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from tensordict.nn import TensorDictModule
from torch.distributions import Categorical
from torchrl.collectors import Collector
from torchrl.envs import EnvBase, GymWrapper, RewardSum, TransformedEnv
from torchrl.modules import ProbabilisticActor, ValueOperator
from torchrl.objectives import ClipPPOLoss
from torchrl.objectives.value import GAE

from meeple.bench.common import PPOHparams, RunClock, eval_seeds
from meeple.callbacks.evaluation import greedy_episode_returns
from meeple.nets.mlp import mlp  # same init as meeple's model, so all three start alike


def make_env(env_id: str, num_envs: int, seed: int) -> EnvBase:
    """``num_envs`` copies stepped in one call; TorchRL resets finished envs itself."""
    vector = gym.make_vec(
        env_id,
        num_envs=num_envs,
        vectorization_mode="sync",
        vector_kwargs={"autoreset_mode": gym.vector.AutoresetMode.DISABLED},
    )
    env = TransformedEnv(GymWrapper(vector, categorical_action_encoding=True), RewardSum())
    env.set_seed(seed)
    return env


def make_actor_critic(env: EnvBase, hp: PPOHparams) -> tuple[ProbabilisticActor, ValueOperator]:
    n_obs = env.observation_spec["observation"].shape[-1]
    n_actions = env.action_spec.space.n
    logits = TensorDictModule(
        mlp(n_obs, n_actions, hp.hidden, hp.activation, 0.01), in_keys=["observation"], out_keys=["logits"]
    )
    actor = ProbabilisticActor(
        logits,
        in_keys=["logits"],
        distribution_class=Categorical,
        spec=env.action_spec,
        return_log_prob=True,
    )
    critic = ValueOperator(mlp(n_obs, 1, hp.hidden, hp.activation, 1.0), in_keys=["observation"])
    return actor, critic


def train(hp: PPOHparams, seed: int) -> dict[str, Any]:
    """Train until greedy evaluation reaches ``hp.stop_return`` or ``hp.total_frames`` run out."""
    torch.manual_seed(seed)
    np.random.seed(seed)

    env = make_env(hp.env_id, hp.num_envs, seed)
    actor, critic = make_actor_critic(env, hp)
    collector = Collector(
        env,
        actor,
        frames_per_batch=hp.frames_per_batch,
        total_frames=hp.num_rollouts * hp.frames_per_batch,
        policy_device="cpu",
        env_device="cpu",
        storing_device="cpu",
        auto_register_policy_transforms=False,  # the MLP policy needs no env transforms
    )
    advantage = GAE(gamma=hp.gamma, lmbda=hp.gae_lambda, value_network=critic, average_gae=False)
    loss_module = ClipPPOLoss(
        actor,
        critic,
        clip_epsilon=hp.clip_epsilon,
        entropy_bonus=hp.entropy_coef > 0,
        entropy_coeff=hp.entropy_coef,
        critic_coeff=hp.critic_coef,
        loss_critic_type="l2",
        normalize_advantage=hp.normalize_advantage,
    )
    optimizer = torch.optim.Adam(loss_module.parameters(), lr=hp.lr, eps=hp.adam_eps)
    eval_env = make_env(hp.env_id, hp.eval_episodes, seed)
    seeds = eval_seeds(seed)

    clock = RunClock(hp.stop_return)
    clock.start()
    batches = iter(collector)
    for rollout in range(hp.num_rollouts):
        # 1. collect (env steps + policy inference)
        start = time.perf_counter()
        data = next(batches)
        clock.add_collect(time.perf_counter() - start, data.numel())

        # 2. advantages once per rollout, then minibatch SGD
        with torch.no_grad():
            data = advantage(data)
        flat = data.reshape(-1)
        for group in optimizer.param_groups:
            group["lr"] = hp.lr_at(rollout)
        for _ in range(hp.ppo_epochs):
            order = torch.randperm(flat.numel())
            for i in range(hp.minibatches_per_epoch):
                batch = flat[order[i * hp.minibatch_size : (i + 1) * hp.minibatch_size]]
                losses = loss_module(batch)
                loss = losses["loss_objective"] + losses["loss_critic"]
                if "loss_entropy" in losses.keys():
                    loss = loss + losses["loss_entropy"]
                optimizer.zero_grad()
                loss.backward()
                torch.nn.utils.clip_grad_norm_(loss_module.parameters(), hp.max_grad_norm)
                optimizer.step()

        # 3. greedy evaluation and the stop rule
        if hp.is_eval_rollout(rollout + 1):
            start = time.perf_counter()
            eval_env.set_seed(next(seeds))
            actor.eval()
            returns = greedy_episode_returns(eval_env, actor, hp.eval_max_steps)
            actor.train()
            if clock.add_eval(time.perf_counter() - start, returns.mean().item()):
                break
    clock.finish()
    collector.shutdown()
    eval_env.close()
    return clock.result()
