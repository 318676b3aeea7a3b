"""BC's training options: auxiliary losses, per-sample weights, metrics (top-3, per category,
gradient norm), AdamW parameter groups, the LR floor, a data module from ``phase.data.datamodule``
and validation every N steps."""

from __future__ import annotations

import math

import pytest
import torch
from tensordict import TensorDict
from tensordict.nn import TensorDictModule, TensorDictSequential
from torch import nn
from torchrl.data import Categorical, Composite, Unbounded

from meeple.checkpoint.io import load_verified
from meeple.cli.train import train
from meeple.errors import ConfigError
from meeple.nets.actor_critic import shared_heads
from meeple.phases.aux import auxiliary_loss
from meeple.phases.bc.module import (
    AuxTarget,
    BCModule,
    as_tensordict,
    bc_loss,
    category_sums,
    in_top_k,
    param_groups,
    warmup_cosine,
)
from meeple.phases.registry import validate

SYNTHETIC = "tests.phases.bc_synthetic.LeanExpertBatches"
QUIET = ["phase=bc", "callbacks.progress=null", "tracking=none", "checkpoint=none"]
WITH_DATAMODULE = [
    *QUIET,
    f"phase.data.datamodule={{_target_:{SYNTHETIC}}}",
    "phase.data.record=null",
    "phase.eval.episodes=2",
    "phase.eval.max_steps=10",
]


def test_top_k_counts_only_legal_actions():
    logits = torch.tensor([[4.0, 3.0, 2.0, 1.0, 0.0], [0.0, 1.0, 2.0, 3.0, 4.0]])
    mask = torch.tensor([[False, True, True, True, True], [True] * 5])
    action = torch.tensor([4, 1])
    # Row 0: the illegal action 0 is skipped, so the top 3 are 1, 2, 3 (4 is 4th); row 1: 4, 3, 2.
    assert in_top_k(logits, action, mask, 3).tolist() == [False, False]
    assert in_top_k(logits, torch.tensor([3, 2]), mask, 3).tolist() == [True, True]
    assert in_top_k(logits, torch.tensor([0, 0]), None, 1).tolist() == [True, False]


def test_top3_and_per_category_accuracy_on_a_hand_made_batch():
    # Five samples: greedy picks 0,1,2,0,1 ; expert 0,1,0,2,2 -> correct T,T,F,F,F
    logits = torch.tensor([[3.0, 2, 1, 0], [0, 3, 2, 1], [0, 1, 3, 2], [3, 0, 2, 1], [1, 3, 0, 2]])
    action = torch.tensor([0, 1, 0, 2, 2])
    parts = bc_loss(logits, action, None, None, None, value_coef=0.0)
    assert parts["correct_sum"] == 2 and parts["top3_sum"] == 3  # samples 2 and 4 rank theirs last
    category = torch.tensor([0, 2, 0, 3, 1])  # discard, chi, discard, pon, riichi
    sums = category_sums(
        parts["correct"], category, {"discard": [0], "call": [2, 3, 4], "win": [5]}
    )
    assert (sums["hit_discard_sum"], sums["n_discard_sum"]) == (1, 2)
    assert (sums["hit_call_sum"], sums["n_call_sum"]) == (1, 2)
    assert sums["n_win_sum"] == 0
    logged = BCModule._category_accuracies("val", sums)
    assert logged == {
        "val/accuracy_discard": 0.5,
        "val/accuracy_call": 0.5,
    }  # no win sample: no key


def test_per_sample_weights_weigh_the_loss_not_the_metrics():
    logits = torch.tensor([[2.0, 0.0], [0.0, 2.0]])
    action = torch.tensor([0, 0])
    plain = bc_loss(logits, action, None, None, None, 0.0)
    weighted = bc_loss(logits, action, None, None, None, 0.0, weight=torch.tensor([0.0, 1.0]))
    ce = plain["ce_sum"]
    assert torch.allclose(plain["loss"], ce / 2)
    # Only the second (wrong) sample counts: its CE is log(1 + e^2).
    assert torch.allclose(weighted["loss"], torch.log1p(torch.exp(torch.tensor(2.0))))
    assert weighted["ce_sum"] == ce and weighted["correct_sum"] == plain["correct_sum"]


def test_auxiliary_losses():
    logits = torch.tensor([[2.0, 0.0, 0.0, 0.0]])
    assert torch.allclose(
        auxiliary_loss(logits, torch.tensor([0]), "ce"), -torch.log_softmax(logits, -1)[:, 0]
    )
    bits = torch.tensor([[0.0, 0.0]])
    targets = torch.tensor([[1.0, 0.0]])
    # BCE at logit 0 is log 2 per output, whatever the target.
    assert torch.allclose(auxiliary_loss(bits, targets, "bce"), torch.tensor([math.log(2)]))
    with pytest.raises(ValueError, match="accepted: ce, bce"):
        auxiliary_loss(bits, targets, "mse")


def _tiny_networks():
    """A shared trunk (obs 6 -> hidden 8) with policy, value and two auxiliary heads."""
    trunk = TensorDictModule(nn.Sequential(nn.Linear(6, 8), nn.ReLU()), ["observation"], ["hidden"])
    spec = Composite(observation=Unbounded((6,)))
    actor, critic = shared_heads(trunk, 8, spec, Categorical(3))
    aux_head = TensorDictModule(nn.Linear(8, 4), ["hidden"], ["aux_rank"])
    aux_bits = TensorDictModule(nn.Linear(8, 2), ["hidden"], ["aux_bits"])
    return actor, critic, TensorDictSequential(trunk, aux_head, aux_bits), aux_head, aux_bits


def _module(aux_coef: float, **kwargs) -> tuple[BCModule, nn.Module, nn.Module]:
    actor, critic, aux, rank_head, bits_head = _tiny_networks()
    module = BCModule(
        actor,
        critic,
        optimizer=lambda p: torch.optim.AdamW(p, lr=1e-3),
        value_coef=0.5,
        max_grad_norm=None,
        aux=aux,
        aux_coef=aux_coef,
        aux_targets={
            "rank": AuxTarget("aux_rank", "rank", "ce"),
            "bits": AuxTarget("aux_bits", "bits", "bce"),
        },
        **kwargs,
    )
    return module, rank_head, bits_head


def _batch(n: int = 5) -> TensorDict:
    g = torch.Generator().manual_seed(0)
    return TensorDict(
        {
            "observation": torch.randn(n, 6, generator=g),
            "action": torch.randint(0, 3, (n,), generator=g),
            "return": torch.randn(n, generator=g),
            "rank": torch.randint(0, 4, (n,), generator=g),
            "bits": torch.randint(0, 2, (n, 2), generator=g).float(),
        },
        batch_size=[n],
    )


def test_aux_losses_add_to_the_loss_and_their_gradients_reach_the_aux_heads():
    module, rank_head, bits_head = _module(aux_coef=0.1)
    assert module.trunk is not None  # the shared trunk runs once for all heads
    losses = module.step_losses(_batch())
    without, _, _ = _module(aux_coef=0.0)
    without.load_state_dict(module.state_dict())
    base = without.step_losses(_batch())
    aux_terms = 0.1 * (losses["aux_rank_sum"] + losses["aux_bits_sum"]) / 5
    assert torch.allclose(losses["loss"], base["loss"] + aux_terms)
    assert "aux_rank_sum" not in base
    losses["loss"].backward()
    for head in (rank_head, bits_head):
        assert head.module.weight.grad is not None and head.module.weight.grad.abs().sum() > 0
    # The trunk's gradient carries the aux terms too (it differs from the policy+value one).
    trunk_grad = module.trunk.module[0].weight.grad.clone()
    base["loss"].backward()
    assert not torch.allclose(trunk_grad, without.trunk.module[0].weight.grad)


def test_shared_trunk_path_equals_separate_calls():
    module, _, _ = _module(aux_coef=0.1)
    batch = _batch()
    once = module.heads(batch.exclude("action"), value=True, aux=True)
    assert torch.allclose(
        once["logits"], module.actor.get_dist_params(batch.clone(False))["logits"]
    )
    assert torch.allclose(once["state_value"], module.critic(batch.clone(False))["state_value"])
    assert torch.allclose(once["aux_rank"], module.aux(batch.clone(False))["aux_rank"])


def test_no_decay_param_groups():
    module, _, _ = _module(aux_coef=0.1)
    assert param_groups(module, False) == [p for p in module.parameters()]
    decay, no_decay = param_groups(module, True)
    assert all(p.ndim == 2 for p in decay["params"]) and "weight_decay" not in decay
    assert all(p.ndim == 1 for p in no_decay["params"]) and no_decay["weight_decay"] == 0.0
    every = {id(p) for p in module.parameters()}
    assert {id(p) for p in decay["params"] + no_decay["params"]} == every
    optimizer = torch.optim.AdamW(param_groups(module, True), lr=1e-3, weight_decay=0.1)
    assert [g["weight_decay"] for g in optimizer.param_groups] == [0.1, 0.0]
    gn = nn.GroupNorm(2, 4)
    assert [len(g["params"]) for g in param_groups(gn, True)] == [0, 2]  # GroupNorm: scale and bias


def test_cosine_ends_at_the_floor():
    factor = warmup_cosine(100, 0.1, "cosine", floor=0.1)
    assert factor(9) == 1.0 and factor(10) == 1.0
    assert abs(factor(55) - 0.55) < 1e-9 and abs(factor(100) - 0.1) < 1e-12


def test_plain_dict_batches_become_tensordicts():
    td = as_tensordict(
        {"action": torch.zeros(3, dtype=torch.long), "observation": torch.zeros(3, 4)}
    )
    assert td.batch_size == torch.Size([3])
    with pytest.raises(TypeError, match="'action' key; got dict with keys"):
        as_tensordict({"obs": torch.zeros(3)})


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["phase.data.datamodule=3"], "phase.data.datamodule=3 is not allowed; accepted: null"),
        (
            [
                f"phase.data.datamodule={{_target_:{SYNTHETIC}}}",
                "phase.data.record.policy={_target_:meeple_gym.experts.CartPoleExpert}",
            ],
            "phase.data.datamodule and phase.data.record.policy are both set",
        ),
        (
            ["+phase.aux.r={output:aux_rank,target:rank,loss:mse}"],
            "phase.aux.r.loss='mse' is not allowed",
        ),
        (["+phase.aux.r={target:rank}"], "phase.aux.r.output: .*missing mandatory value"),
        (["phase.val_every_n_steps=0"], "phase.val_every_n_steps=0 is not allowed"),
        (["phase.lr_floor=2"], "phase.lr_floor=2"),
        (["+phase.categories.call=[]"], "phase.categories.call=\\[\\] is not allowed"),
    ],
)
def test_config_errors(compose, overrides, message):
    with pytest.raises(ConfigError, match=message):
        validate(compose(["phase=bc", *overrides]))


def test_a_model_without_aux_outputs_is_refused(compose, in_tmp, importable_tests):
    cfg = compose(
        [*WITH_DATAMODULE, "phase.aux_coef=0.1", "+phase.aux.r={output:aux_rank,target:rank}"]
    )
    with pytest.raises(
        ConfigError, match="cannot build them .*accepted: a model factory taking with_aux=True"
    ):
        train(cfg)


def test_bc_from_a_datamodule_learns_and_validates_every_n_steps(
    compose, in_tmp, importable_tests, monkeypatch
):
    """1,024 synthetic samples, batch 64 (16 steps an epoch), 2 epochs, validation every 5 steps:
    validations after steps 5, 10, 15, 20, 25, 30 = 6 passes of 4 batches."""
    from meeple.pipeline import lightning_stage

    seen = {}
    build_stage = lightning_stage.build_stage

    def spy(cfg, typed, seeds):
        build = build_stage(cfg, typed, seeds)
        seen["dm"] = build.datamodule.inner
        return build

    monkeypatch.setattr(lightning_stage, "build_stage", spy)
    metrics = train(
        compose(
            [
                *WITH_DATAMODULE,
                "phase.max_epochs=2",
                "phase.batch_size=64",
                "phase.val_every_n_steps=5",
                "phase.lr=1e-2",
                "phase.early_stop.patience=null",
            ]
        )
    )
    assert seen["dm"].val_batches == 6 * 4
    assert metrics["train/samples"] == 2 * 1024
    assert metrics["val/accuracy"] > 0.9 and metrics["val/accuracy_top3"] == 1.0, metrics
    assert metrics["train/grad_norm"] > 0 and metrics["perf/samples_per_s"] > 0


def test_validation_inside_an_epoch_saves_a_checkpoint_by_step_when_it_improves(
    compose, in_tmp, importable_tests
):
    """16 steps an epoch, validation every 5 steps: val CE falls at steps 5..25 (each saved then),
    epochs end at steps 16 and 32 (saved as before); best.pt follows the lowest val CE."""
    metrics = train(
        compose(
            [
                *[o for o in WITH_DATAMODULE if o != "checkpoint=none"],
                "phase.max_epochs=2",
                "phase.batch_size=64",
                "phase.val_every_n_steps=5",
                "phase.lr=1e-2",
                "checkpoint.monitor=val/policy_ce",
                "checkpoint.mode=min",
                "checkpoint.min_interval_s=0",  # epoch ends save however fast they come
            ]
        )
    )
    folder = next(in_tmp.glob("outputs/runs/*/phase0/checkpoints"))
    steps = sorted(int(p.stem[-8:]) for p in folder.glob("ckpt_phase0_step*.pt"))
    assert {16, 32} <= set(steps) and {5, 10} <= set(steps), steps
    best = load_verified(folder / "best.pt")
    assert (
        best["metrics"]["val/policy_ce"]
        == min(
            load_verified(p)["metrics"]["val/policy_ce"]
            for p in folder.glob("ckpt_phase0_step*.pt")
        )
        and metrics["val/policy_ce"] > 0
    )


def test_bf16_autocast(compose, in_tmp, importable_tests):
    metrics = train(
        compose(
            [
                *WITH_DATAMODULE,
                "phase.max_epochs=1",
                "phase.batch_size=64",
                "phase.lr=1e-2",
                "hardware.precision=bf16-mixed",
            ]
        )
    )
    assert metrics["val/accuracy"] > 0.8 and math.isfinite(metrics["train/grad_norm"]), metrics


def test_resume_from_a_checkpoint_inside_an_epoch_finishes_the_run(
    compose, in_tmp, importable_tests
):
    """Killed at step 27 of 32: latest.pt is the step-25 checkpoint (a validation inside epoch 2);
    resume=true continues from there to the end (the synthetic loader does not save its position,
    so the data differ from an uninterrupted run: Lightning warns; the step count does not)."""
    run = [
        *[o for o in WITH_DATAMODULE if o != "checkpoint=none"],
        "phase.max_epochs=2",
        "phase.batch_size=64",
        "phase.val_every_n_steps=5",
        "phase.lr=1e-2",
        "phase.early_stop.patience=null",
        "checkpoint.monitor=val/policy_ce",
        "checkpoint.mode=min",
    ]
    crash = "+callbacks.crash={_target_:tests.phases.bc_synthetic.CrashAtStep,step:27}"
    with pytest.raises(RuntimeError, match="simulated crash at step 27"):
        train(compose([*run, crash]))
    folder = next(in_tmp.glob("outputs/runs/*/phase0/checkpoints"))
    assert (folder / "latest.pt").resolve().name == "ckpt_phase0_step00000025.pt"
    metrics = train(compose([*run, "resume=true"]))
    assert metrics["train/samples"] == 2 * 1024 and metrics["val/accuracy"] > 0.9
    steps = sorted(int(p.stem[-8:]) for p in folder.glob("ckpt_phase0_step*.pt"))
    assert steps[-1] == 32, steps


@pytest.mark.parametrize("phase", ["bc", "ppo"])
def test_marked_model_factories_fit_actor_critic_phases(compose, importable_tests, phase):
    """A plugin's factory is accepted by the mark it carries, not by the core naming it."""
    model = ["model._target_=tests.phases.bc_synthetic.marked_mlp"]
    validate(
        compose([f"phase={phase}", "phase.data.record=null" if phase == "bc" else "seed=0", *model])
    )
    unmarked = ["model._target_=tests.phases.bc_synthetic.unmarked_mlp"]
    with pytest.raises(ConfigError, match="or a factory marked as building 'actor_critic' models"):
        validate(compose([f"phase={phase}", *unmarked]))
    with pytest.raises(ConfigError, match="model._target_='nowhere.factory' cannot be imported"):
        validate(compose([f"phase={phase}", "model._target_=nowhere.factory"]))
