"""The mahjong SE-ResNet (meeple_mahjong.net): sizes, heads, masking, registry, and BC on it."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from torchrl.data import Binary, Categorical, Composite, Unbounded
from torchrl.envs import ExplorationType, set_exploration_type

from meeple.config.compose import compose_config
from meeple.errors import ConfigError
from meeple.phases.registry import validate
from meeple_mahjong.net import AUX_OUTPUTS, build_mahjong_actor_critic

OBS = Composite(
    observation=Unbounded((84, 34)),
    action_mask=Binary(n=155, shape=(155,), dtype=torch.bool),
)
ACTIONS = Categorical(155)
TINY = dict(blocks=2, channels=16, groups=4, neck=8, hidden=32)
HERE = Path(__file__).resolve().parent


def _params(*modules) -> int:
    return sum(p.numel() for p in torch.nn.ModuleList(modules).parameters())


def test_gpu_size_has_the_specs_parameter_count():
    """40 blocks x 256 channels: 16.70M parameters (the issue's ~16.7M), 15.8M of them in the
    blocks' convolutions; the heads' share is the neck (1x1 to 32 channels) and a 384-wide layer."""
    with torch.device("meta"):  # sizes only: no memory, no orthogonal init
        actor, critic, aux = build_mahjong_actor_critic(
            OBS, ACTIONS, blocks=40, channels=256, groups=32, hidden=384, with_aux=True
        )
    assert _params(actor, critic, aux) == 16_696_165
    assert _params(actor, critic) == 16_696_165 - (384 + 1) * sum(AUX_OUTPUTS.values())


def test_heads_shapes_masking_and_batch_dims():
    torch.manual_seed(0)
    actor, critic, aux = build_mahjong_actor_critic(OBS, ACTIONS, **TINY, with_aux=True)
    td = OBS.rand((2, 3))  # any batch dims in front (collectors stack envs x time)
    td["action_mask"][..., :] = False
    td["action_mask"][..., [5, 40, 153]] = True
    with set_exploration_type(ExplorationType.RANDOM):
        out = actor(td.clone())
    assert out["logits"].shape == (2, 3, 155)
    assert torch.isin(out["action"], torch.tensor([5, 40, 153])).all()  # only legal actions
    assert critic(td.clone())["state_value"].shape == (2, 3, 1)
    extra = aux(td.clone())
    for key, width in AUX_OUTPUTS.items():
        assert extra[key].shape == (2, 3, width)
    # Orthogonal heads at gain 0.01: the policy starts near uniform, the value does not.
    assert out["logits"].abs().max() < 0.5


def test_blocks_start_as_the_identity_and_share_one_trunk():
    torch.manual_seed(0)
    actor, critic, aux = build_mahjong_actor_critic(OBS, ACTIONS, **TINY, with_aux=True)
    trunk = actor.module[0].module
    assert critic.module[0] is actor.module[0] and aux.module[0] is actor.module[0]
    x = torch.relu(torch.randn(4, 16, 34))  # what the stem hands the first block
    assert torch.allclose(trunk.blocks(x), x)


def test_bf16_autocast_forward():
    torch.manual_seed(0)
    actor, _, aux = build_mahjong_actor_critic(OBS, ACTIONS, **TINY, with_aux=True)
    td = OBS.rand((4,))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        logits = actor.get_dist_params(td.clone())["logits"]
        danger = aux(td.clone())["aux_danger"]
    assert logits.dtype == torch.bfloat16 and torch.isfinite(logits.float()).all()
    assert danger.shape == (4, 34)


def test_oracle_stem_reads_the_oracle_planes():
    spec = OBS.clone()
    spec["oracle"] = Unbounded((205, 34))
    actor, _ = build_mahjong_actor_critic(spec, ACTIONS, **TINY, oracle_planes=205)
    assert actor.module[0].in_keys == ["observation", "oracle"]
    trunk = actor.module[0].module
    assert trunk.stem[0].in_channels == 84 and trunk.oracle_stem.in_channels == 205
    td = spec.rand((2,))
    before = actor.get_dist_params(td.clone())["logits"]
    assert before.shape == (2, 155)
    td["oracle"] = td["oracle"] + 1.0  # zero weights at the start: the oracle planes change nothing yet
    assert torch.equal(actor.get_dist_params(td.clone())["logits"], before)
    torch.nn.init.normal_(trunk.oracle_stem.weight)
    assert not torch.allclose(actor.get_dist_params(td.clone())["logits"], before)


def test_a_checkpoint_with_one_wide_stem_loads_as_the_same_function():
    spec = OBS.clone()
    spec["oracle"] = Unbounded((205, 34))
    actor, _ = build_mahjong_actor_critic(spec, ACTIONS, **TINY, oracle_planes=205)
    torch.nn.init.normal_(actor.module[0].module.oracle_stem.weight)
    state = actor.state_dict()
    (stem,) = [k for k in state if k.endswith(".stem.0.weight")]
    (oracle,) = [k for k in state if k.endswith("oracle_stem.weight")]
    wide = torch.cat([state[stem], state.pop(oracle)], dim=1)  # as written before the split
    other, _ = build_mahjong_actor_critic(spec, ACTIONS, **TINY, oracle_planes=205)
    other.load_state_dict({**state, stem: wide})
    td = spec.rand((2,))
    assert torch.allclose(other.get_dist_params(td.clone())["logits"], actor.get_dist_params(td.clone())["logits"])


def test_oracle_critic_reads_the_oracle_planes_and_the_actor_does_not():
    """model.oracle_critic: the critic starts as the plain critic (its oracle output layer is zero),
    learns from the oracle planes through its own trunk, and the actor never reads them."""
    spec = OBS.clone()
    spec["oracle"] = Unbounded((205, 34))
    actor, critic = build_mahjong_actor_critic(spec, ACTIONS, **TINY, detach_critic=True, oracle_critic=1)
    assert "oracle" not in actor.in_keys and set(critic.in_keys) == {"observation", "oracle"}
    _, plain = build_mahjong_actor_critic(OBS, ACTIONS, **TINY, detach_critic=True)
    plain.load_state_dict(critic.state_dict(), strict=False)  # the plain critic's keys are a subset
    td = spec.rand((3,))
    value = critic(td.clone())["state_value"]
    assert torch.allclose(value, plain(td.clone())["state_value"])
    # the value loss reaches the oracle trunk through the output layer once that layer is not zero
    (out,) = [m for n, m in critic.named_modules() if n.endswith("addend.out")]
    torch.nn.init.normal_(out.weight)
    critic(td.clone())["state_value"].sum().backward()
    oracle_stem = [p for n, p in critic.named_parameters() if n.endswith("addend.trunk.oracle_stem.weight")]
    assert len(oracle_stem) == 1 and oracle_stem[0].grad.abs().sum() > 0
    logits = actor.get_dist_params(td.clone())["logits"]
    td["oracle"] = td["oracle"] + 1.0
    assert torch.equal(actor.get_dist_params(td.clone())["logits"], logits)
    assert not torch.allclose(critic(td.clone())["state_value"], critic(td.clone().update({"oracle": td["oracle"] - 1.0}))["state_value"])


def test_oracle_critic_without_oracle_planes_names_the_setting():
    with pytest.raises(ConfigError, match="model.oracle_critic=2 but the env has no 'oracle' observation; "
                                          "accepted: env.oracle=true, or model.oracle_critic=0"):
        build_mahjong_actor_critic(OBS, ACTIONS, **TINY, oracle_critic=2)


@pytest.mark.parametrize(
    "options, message",
    [
        (dict(groups=5), "model.groups=5 does not divide model.channels=16"),
        (dict(blocks=-1), "model.blocks=-1 is not allowed; accepted: an integer >= 0"),
        (dict(hidden=0), "model.hidden=0 is not allowed; accepted: an integer >= 1"),
    ],
)
def test_bad_sizes_name_the_key(options, message):
    with pytest.raises(ConfigError, match=message):
        build_mahjong_actor_critic(OBS, ACTIONS, **{**TINY, **options})


def test_phases_that_take_actor_critic_models_accept_it():
    validate(compose_config(["env=mahjong", "model=mahjong_resnet", "phase=ppo"]))
    validate(
        compose_config(
            ["env=mahjong", "model=mahjong_resnet", "phase=bc", "phase.data.record=null"]
        )
    )
    with pytest.raises(
        ConfigError, match="does not fit phase=alphazero; accepted: a model built by"
    ):
        validate(compose_config(["env=mahjong", "model=mahjong_resnet", "phase=alphazero"]))


# -- BC on a mahjong-shaped corpus --------------------------------------------------------------
BC = [
    "env=mahjong",
    "model=mahjong_resnet",
    "phase=mahjong_bc",  # the phase-1 loss: aux heads, weights, categories, param groups, LR floor
    "callbacks.progress=null",
    "tracking=none",
    "checkpoint=none",
    "phase.data.datamodule={_target_:synthetic_corpus.SyntheticCorpus}",
]


def test_bc_on_a_synthetic_corpus_lowers_validation_cross_entropy(tmp_path, monkeypatch):
    """2,048 synthetic decisions, batch 128, 4 epochs (64 steps) of a 2 x 16 network (hidden 128),
    validation every 16 steps, phase=mahjong_bc's losses and schedule. Measured: val CE 0.008 from
    ln(legal actions) = 2.28 untrained, accuracy 1.0, rank CE 0.05, tenpai BCE 0.57 (ln 2 = 0.69
    untrained); danger (random bits of plane 5) stays at 0.71. About 3 s."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(HERE))  # the config names synthetic_corpus.SyntheticCorpus
    from synthetic_corpus import synthetic_samples

    from meeple.cli.train import train

    val = synthetic_samples(512, seed=2)
    untrained_ce = val["action_mask"].sum(-1).float().log().mean().item()  # uniform over the legal
    metrics = train(
        compose_config(
            [
                *BC,
                *(f"model.{k}={v}" for k, v in {**TINY, "hidden": 128}.items()),
                "phase.max_epochs=4",
                "phase.batch_size=128",
                "phase.lr=1e-2",
                "phase.val_every_n_steps=16",
                "phase.early_stop.patience=3",
                "phase.eval.episodes=1",
                "phase.eval.max_steps=5",
                "phase.eval.every_n_epochs=3",
            ]
        )
    )
    assert metrics["val/policy_ce"] < 0.1 * untrained_ce, (untrained_ce, metrics)
    for key in (
        "val/accuracy_discard",
        "val/accuracy_riichi",
        "val/accuracy_top3",
        "val/aux_rank",
        "val/aux_tenpai",
        "val/aux_danger",
        "loss/aux_danger",
        "train/grad_norm",
        "eval/episode_return",
    ):
        assert key in metrics, sorted(metrics)
    assert "val/accuracy_call" not in metrics  # no call in this corpus: no key rather than 0/0
    assert metrics["val/aux_tenpai"] < math.log(2)  # learned beyond the uniform BCE
    assert metrics["train/samples"] == 4 * 2048


def test_bc_under_bf16_autocast(tmp_path, monkeypatch):
    """The GPU profiles' precision (bf16-mixed) on the CPU, the same 64 steps as above: measured val CE
    0.009 (float32: 0.008). About 2 s."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(HERE))
    from meeple.cli.train import train

    metrics = train(
        compose_config(
            [
                *BC,
                *(f"model.{k}={v}" for k, v in {**TINY, "hidden": 128}.items()),
                "phase.max_epochs=4",
                "phase.batch_size=128",
                "phase.lr=1e-2",
                "phase.callbacks.eval=null",
                "phase.val_every_n_steps=16",
                "hardware.precision=bf16-mixed",
            ]
        )
    )
    assert math.isfinite(metrics["train/grad_norm"]) and metrics["val/policy_ce"] < 0.2, metrics


def test_ppo_trains_the_same_network(tmp_path, monkeypatch):
    """Phase 3's use: PPO builds the factory without aux heads and trains one tiny rollout (~3 s)."""
    monkeypatch.chdir(tmp_path)
    from meeple.cli.train import train

    metrics = train(
        compose_config(
            [
                "env=mahjong",
                "model=mahjong_resnet",
                "phase=ppo",
                "debug=tiny",
                "tracking=none",
                "callbacks.progress=null",
                "checkpoint=none",
                "env.num_envs=4",
                *(f"model.{k}={v}" for k, v in TINY.items()),
            ]
        )
    )
    assert math.isfinite(metrics["loss/total"]) and "eval/episode_return" in metrics


def test_danger_head_starts_as_the_plain_policy_and_the_policy_reads_it_through_one_weight():
    """model.danger_head: the actor also writes danger_logits; at danger_scale 0 the policy is the
    plain network's; then each discard (and riichi discard) of kind k moves by
    -scale * softplus(danger_k) and nothing else does; the policy's loss trains the scale, not the
    belief (only its own labels do, through phase.aux)."""
    from meeple_mahjong.net import DANGER_KEY
    from meeple_mahjong.safety import discard_kinds

    torch.manual_seed(0)
    actor, _ = build_mahjong_actor_critic(OBS, ACTIONS, **TINY, danger_head=True)
    plain, _ = build_mahjong_actor_critic(OBS, ACTIONS, **TINY)
    missing = plain.load_state_dict(actor.state_dict(), strict=False)
    assert not missing.missing_keys  # the carried network's names are unchanged
    assert sorted(missing.unexpected_keys) == ["module.0.module.danger_head.danger.bias",
                                               "module.0.module.danger_head.danger.weight",
                                               "module.1.module.addend.danger_scale"]  # fmt: skip
    td = OBS.rand((5,))
    out = actor.get_dist_params(td.clone())
    assert out[DANGER_KEY].shape == (5, 34)
    assert torch.equal(out["logits"], plain.get_dist_params(td.clone())["logits"])
    (scale,) = [p for n, p in actor.named_parameters() if n.endswith("danger_scale")]
    with torch.no_grad():
        scale.fill_(2.0)
    shifted = actor.get_dist_params(td.clone())
    kinds = discard_kinds()
    expected = out["logits"].clone()
    gives = kinds >= 0
    expected[:, gives] -= 2.0 * torch.nn.functional.softplus(out[DANGER_KEY])[:, kinds[gives]]
    assert torch.allclose(shifted["logits"], expected, atol=1e-6)
    assert torch.equal(shifted["logits"][:, ~gives], out["logits"][:, ~gives])
    shifted["logits"].logsumexp(-1).sum().backward()
    head = [p for n, p in actor.named_parameters() if "danger_head" in n]
    assert scale.grad.abs() > 0 and all(p.grad is None or not p.grad.any() for p in head)


def test_ppo_trains_the_danger_head_on_the_oracle_labels(tmp_path, monkeypatch):
    """phase.aux: PPO adds the belief's binary cross-entropy against meeple_mahjong.safety.ron_kinds
    of the rollout's oracle planes, which the actor does not read; its loss falls from log 2
    (~8 s). With coef 0 nothing trains the head and it stays at log 2, so the test would catch
    an aux loss that stopped reaching its head."""
    monkeypatch.chdir(tmp_path)
    from meeple.cli.train import train

    labels = "{_target_: meeple_mahjong.safety.ron_kinds, _partial_: true}"

    def run(coef: float) -> dict:
        return train(compose_config([
            "env=mahjong", "model=mahjong_resnet", "phase=ppo", "debug=tiny", "tracking=none",
            "callbacks.progress=null", "checkpoint=none", "env.num_envs=8", "env.oracle=true",
            "phase.rollout_steps=32", "phase.total_frames=2048", "phase.minibatch_size=64",
            "model.danger_head=true", "+phase.lr_groups.new={params: ['*danger*'], lr: 0.01}",
            f"+phase.aux.danger={{output: danger_logits, target: oracle, loss: bce, coef: {coef}, "
            f"transform: {labels}}}",
            *(f"model.{k}={v}" for k, v in TINY.items()),
        ]))  # fmt: skip

    with pytest.raises(ConfigError, match=r"phase.aux.danger.output='danger_logits' is not an output of the model's actor"):
        train(compose_config(["env=mahjong", "model=mahjong_resnet", "phase=ppo", "debug=tiny", "tracking=none",
                              "env.oracle=true", "+phase.aux.danger={output: danger_logits, target: oracle}",
                              *(f"model.{k}={v}" for k, v in TINY.items())]))  # fmt: skip  (no danger_head)
    trained = run(1.0)["loss/aux_danger"]
    assert trained < 0.4, trained  # most kinds are safe: the head learns that much at least
    assert run(0.0)["loss/aux_danger"] == pytest.approx(math.log(2), abs=0.02)
