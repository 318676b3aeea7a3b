"""phase.lr_groups: parameters matched by name train at their own learning rate."""

import pytest
import torch

from meeple.errors import ConfigError
from meeple.phases.lr_groups import LRGroup, lr_param_groups
from tests.unit.test_ppo import make_module


def test_matched_parameters_get_their_rate_and_the_rest_the_optimisers():
    module = make_module(lr_groups={"head": LRGroup(params=["actor.*.3.*"], lr=0.5)})
    optimizer = module.make_optimizer()
    rest, head = optimizer.param_groups
    assert head["lr"] == 0.5 and rest["lr"] == pytest.approx(1e-2)
    assert {id(p) for p in head["params"]} == {id(module.actor.module[0].module[3].weight),
                                               id(module.actor.module[0].module[3].bias)}
    assert len(rest["params"]) == 6  # every other parameter of the loss, once
    # one Adam step moves each group's weights by about its own rate
    before = [p.detach().clone() for p in (*head["params"], *rest["params"])]
    for p in module.loss_module.parameters():
        p.grad = torch.ones_like(p)
    optimizer.step()
    moved = [(p.detach() - b).abs().max().item() for p, b in zip((*head["params"], *rest["params"]), before)]
    assert moved[0] == pytest.approx(0.5, rel=1e-3) and moved[-1] == pytest.approx(1e-2, rel=1e-3)


def test_without_groups_one_group_at_the_optimisers_rate():
    (group,) = make_module().make_optimizer().param_groups
    assert group["lr"] == pytest.approx(1e-2) and len(group["params"]) == 8


@pytest.mark.parametrize("groups, message", [
    ({"x": LRGroup(params=["*nothing*"])}, r"phase.lr_groups.x.params: '\*nothing\*' matches no parameter; "
                                           r"the names look like actor"),
    ({"x": LRGroup(params=[])}, "phase.lr_groups.x.params is empty"),
    ({"x": LRGroup(params=["actor.*"], lr=0.0)}, r"phase.lr_groups.x.lr=0.0; accepted: a float > 0"),
    ({"a": LRGroup(params=["actor.*"]), "b": LRGroup(params=["*.3.weight"])}, "is already in lr group 'a'"),
])
def test_bad_groups_are_one_clear_line(groups, message):
    module = make_module()
    names = {id(p): n for n, p in module.named_parameters()}
    with pytest.raises(ConfigError, match=message):
        lr_param_groups(module.loss_module.parameters(), names, groups)


def test_critic_warmup_trains_the_value_head_only_then_everything(monkeypatch):
    """phase.critic_warmup_rollouts: the first rollouts move the critic's own head, not the
    policy nor the trunk it shares with the critic; after them the whole loss trains."""
    from tests.unit.test_ppo import rollout_batch

    module = make_module(shared=True, max_grad_norm=None, critic_warmup_rollouts=1)
    optimizer = module.make_optimizer()
    monkeypatch.setattr(module, "optimizers", lambda: optimizer)
    monkeypatch.setattr(module, "manual_backward", lambda loss: loss.backward())
    batch = module.compute_advantages(rollout_batch())
    policy = [p.detach().clone() for p in module.actor.parameters()]
    head = [p.detach().clone() for p in module.critic.module[1].parameters()]

    metrics = module.minibatch_step(batch)  # rollout 0: warming up
    assert float(metrics["train/critic_warmup"]) == 1.0
    assert all(torch.equal(b, p) for b, p in zip(policy, module.actor.parameters()))
    assert not all(torch.equal(b, p) for b, p in zip(head, module.critic.module[1].parameters()))

    monkeypatch.setattr(type(module), "current_epoch", property(lambda self: 1))
    metrics = module.minibatch_step(batch)
    assert float(metrics["train/critic_warmup"]) == 0.0
    assert not all(torch.equal(b, p) for b, p in zip(policy, module.actor.parameters()))
