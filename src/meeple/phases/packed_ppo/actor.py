"""The rollout loop over a :class:`~meeple.envs.packed_env.PackedEnv`: no host synchronisation.

Every op in :func:`collect_rollout` is enqueued on the device: the policy reads the
observation slot in place, actions are sampled with the Gumbel-max trick from the actor's
own generator and written into the buffer, the env reads them by offset and renders the
next observation into the next slot. Nothing is read back to the host, nothing branches
on a device value; episode statistics stay on the device until the rollout ends.
"""

from __future__ import annotations

import torch

from meeple.envs.packed_env import PackedEnv
from meeple.phases.packed_ppo.buffer import PackedRolloutBuffer


def sample_actions(
    logits: torch.Tensor, generator: torch.Generator, out: torch.Tensor
) -> torch.Tensor:
    """Categorical samples via Gumbel-max, written into ``out`` (no host sync, unlike multinomial's checks)."""
    uniform = torch.rand(
        logits.shape, generator=generator, device=logits.device, dtype=logits.dtype
    )
    gumbel = -torch.log(-torch.log(uniform))
    return torch.argmax(logits + gumbel, dim=-1, out=out)


@torch.no_grad()
def collect_rollout(
    env: PackedEnv, policy: torch.nn.Module, buffer: PackedRolloutBuffer, generator: torch.Generator
) -> None:
    """Fill ``buffer`` with ``buffer.steps`` steps of ``env`` under ``policy`` (``obs -> (logits, value)``).

    Slot 0 is rendered from the env's current state (the previous rollout's last
    observation, not copied), slot ``T`` is the bootstrap observation.
    """
    n = env.num_envs
    env.render_packed_into(buffer.obs, buffer.obs_offset(0))
    for t in range(buffer.steps):
        logits, value = policy(buffer.obs[t])
        action = sample_actions(logits, generator, out=buffer.actions[t])
        log_probs = torch.log_softmax(logits, dim=-1)
        torch.gather(log_probs, -1, action.unsqueeze(-1), out=buffer.logprobs[t].unsqueeze(-1))
        buffer.values[t] = value
        env.step(buffer.actions, buffer.rewards, buffer.dones, t * n)
        env.render_packed_into(buffer.obs, buffer.obs_offset(t + 1))
    buffer.bootstrap_value.copy_(policy(buffer.obs[buffer.steps])[1])
    buffer.stats = env.episode_stats()
