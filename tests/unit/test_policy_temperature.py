"""The policy temperature of `meeple.nets.actor_critic.shared_heads`: softmax(logits / T), the
same argmax and the same state dict as the plain policy layer, so a clone loads into it as is."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict
from tensordict.nn import TensorDictModule
from torch import nn
from torchrl.data import Categorical, Composite, Unbounded

from meeple.errors import ConfigError
from meeple.nets.actor_critic import shared_heads

SPEC = Composite(observation=Unbounded((3,)))


def _actor(temperature: float = 1.0):
    torch.manual_seed(0)
    trunk = TensorDictModule(nn.Linear(3, 4), ["observation"], ["hidden"])
    actor, _ = shared_heads(trunk, 4, SPEC, Categorical(5), temperature=temperature)
    return actor


def test_a_temperature_divides_the_logits_and_keeps_the_argmax_and_the_weights():
    plain, sharp = _actor(), _actor(0.25)
    assert sharp.state_dict().keys() == plain.state_dict().keys()
    sharp.load_state_dict(plain.state_dict())
    # the policy layer starts near uniform (gain 0.01): give it logits worth sharpening
    for actor in (plain, sharp):
        with torch.no_grad():
            for p in actor.parameters():
                p.copy_(torch.linspace(-1, 1, p.numel()).view_as(p))
    td = TensorDict({"observation": torch.randn(64, 3)}, [64])
    lp, ls = plain(td.clone())["logits"], sharp(td.clone())["logits"]
    assert torch.allclose(ls, lp / 0.25, atol=1e-5)
    assert torch.equal(ls.argmax(-1), lp.argmax(-1))
    entropy = lambda logits: torch.distributions.Categorical(logits=logits).entropy().mean()  # noqa: E731
    assert entropy(ls) < entropy(lp) - 0.1


@pytest.mark.parametrize("bad", [0.0, -1.0])
def test_a_temperature_that_is_not_positive_is_refused(bad):
    with pytest.raises(ConfigError, match="policy_temperature"):
        _actor(bad)
