"""The value layer of `meeple.nets.actor_critic.shared_heads`: detached from the trunk, and a
critic that reads keys the actor does not (``value_addend``)."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict
from tensordict.nn import TensorDictModule
from torch import nn
from torchrl.data import Categorical, Composite, Unbounded

from meeple.nets.actor_critic import ValueLinear, shared_heads

SPEC = Composite(observation=Unbounded((3,)), privileged=Unbounded((2,)))


class Sum(nn.Module):
    """A value correction that reads the privileged key: w * sum(privileged)."""

    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.tensor(2.0))

    def forward(self, privileged: torch.Tensor) -> torch.Tensor:
        return self.w * privileged.sum(-1, keepdim=True)


def _heads(**options):
    trunk = TensorDictModule(nn.Linear(3, 4), ["observation"], ["hidden"])
    return trunk, *shared_heads(trunk, 4, SPEC, Categorical(2), **options)


@pytest.mark.parametrize("detach", [False, True])
def test_the_critic_reads_the_value_keys_and_the_actor_does_not(detach):
    trunk, actor, critic = _heads(detach_critic=detach, value_addend=Sum(), value_keys=("privileged",))
    assert "privileged" not in actor.in_keys and "privileged" in critic.in_keys
    td = TensorDict({"observation": torch.randn(5, 3), "privileged": torch.randn(5, 2)}, [5])
    value = critic(td.clone())["state_value"]
    (layer,) = [m for m in critic.modules() if isinstance(m, ValueLinear)]
    hidden = trunk(td.clone())["hidden"]
    expected = hidden @ layer.weight.T + layer.bias + 2.0 * td["privileged"].sum(-1, keepdim=True)
    assert torch.allclose(value, expected, atol=1e-6)
    value.sum().backward()
    assert layer.addend.w.grad is not None and layer.addend.w.grad != 0
    trunk_grad = trunk.module.weight.grad
    assert (trunk_grad is None or not trunk_grad.any()) if detach else trunk_grad.abs().sum() > 0


def test_a_plain_value_heads_weights_load_into_the_layer_with_an_addend():
    _, _, plain = _heads()
    _, _, wide = _heads(value_addend=Sum(), value_keys=("privileged",))
    missing, unexpected = wide.load_state_dict(plain.state_dict(), strict=False)
    assert unexpected == [] and [k.rsplit(".", 2)[-2:] for k in missing] == [["addend", "w"]]
