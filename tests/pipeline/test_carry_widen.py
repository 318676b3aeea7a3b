"""transition.widen_inputs: a network whose stem reads more input planes starts from a narrower
one's weights and computes exactly what it did (the extra input channels start at zero); and
transition.drop_params, the other way: a network without the privileged planes' weights starts
from the rest of a wider one's."""

from pathlib import Path

import pytest
import torch
from torch import nn

from meeple.errors import ConfigError
from meeple.pipeline.transition import carry_weights


class Net(nn.Module):
    def __init__(self, planes: int) -> None:
        super().__init__()
        self.actor = nn.Sequential(nn.Conv1d(planes, 8, 3, padding=1), nn.GroupNorm(2, 8), nn.ReLU(),
                                   nn.Flatten(), nn.Linear(8 * 5, 3))


def test_wider_stem_starts_equal_to_the_narrow_network():
    torch.manual_seed(0)
    narrow, wide = Net(4), Net(4 + 6)
    carry_weights(wide, narrow.state_dict(), ["actor"], Path("gate.pt"), widen_inputs=True)
    stem = wide.actor[0].weight
    assert torch.equal(stem[:, :4], narrow.actor[0].weight) and not stem[:, 4:].any()
    public, extra = torch.randn(7, 4, 5), torch.randn(7, 6, 5)
    assert torch.allclose(wide.actor(torch.cat([public, extra], dim=1)), narrow.actor(public), atol=1e-6)


def test_without_widen_a_shape_mismatch_says_how_to_allow_it():
    with pytest.raises(ConfigError, match=r"actor.0.weight has shape \(8, 4, 3\) .*widen_inputs=true"):
        carry_weights(Net(10), Net(4).state_dict(), ["actor"], Path("gate.pt"))


def test_widen_never_narrows_or_reshapes_other_dims():
    with pytest.raises(ConfigError, match="the stages need the same model"):
        carry_weights(Net(4), Net(10).state_dict(), ["actor"], Path("gate.pt"), widen_inputs=True)


class Privileged(Net):
    """Net with the weights of a convolution over privileged planes in its actor (state only)."""

    def __init__(self, planes: int, privileged: int) -> None:
        super().__init__(planes)
        self.actor.add_module("privileged", nn.Conv1d(privileged, 8, 3, padding=1, bias=False))


def test_drop_params_starts_a_public_network_from_a_privileged_ones_other_weights():
    torch.manual_seed(0)
    teacher, student = Privileged(4, 6), Net(4)
    with pytest.raises(ConfigError, match="does not match this stage's model .*unexpected"):
        carry_weights(student, teacher.state_dict(), ["actor"], Path("gate.pt"))
    carry_weights(student, teacher.state_dict(), ["actor"], Path("gate.pt"), drop=["actor.privileged.*"])
    for key, value in student.state_dict().items():
        assert torch.equal(value, teacher.state_dict()[key]), key
    with pytest.raises(ConfigError, match=r"drop_params: 'critic\.\*' matches no carried tensor of gate.pt"):
        carry_weights(student, teacher.state_dict(), ["actor"], Path("gate.pt"), drop=["critic.*"])
