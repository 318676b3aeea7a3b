"""Behavioral cloning (meeple.phases.bc): dataset format, recorder, loss, learning, resume, CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from omegaconf import OmegaConf

from meeple.checkpoint.io import load_verified
from meeple.checkpoint.retention import LATEST
from meeple.checkpoint.run_dir import find_latest_run
from meeple.cli.train import train
from meeple.errors import ConfigError, MeepleError
from meeple.phases.bc.dataset import (
    META_FILE,
    DatasetError,
    load_demonstrations,
    split_episodes,
    write_demonstrations,
)
from meeple.phases.bc.module import bc_loss, greedy_actions, masked_cross_entropy, warmup_cosine
from meeple.phases.bc.record import discounted_returns, record
from meeple.phases.registry import validate
from meeple.tracking.keys import EVAL_RETURN
from tests.checkpoint.helpers import SimulatedCrash
from tests.conftest import REPO

CARTPOLE = {"backend": "gym", "id": "CartPole-v1"}
EXPERT = "meeple_gym.experts.CartPoleExpert"
# A BC run without MLflow or progress bar, on a dataset at {path}.
QUIET = ["phase=bc", "callbacks.progress=null", "tracking=none"]


def expert():
    from meeple_gym.experts import CartPoleExpert

    return CartPoleExpert()


@pytest.fixture(scope="module")
def expert_data(tmp_path_factory) -> Path:
    """20 recorded episodes of the scripted CartPole expert (10,000 records)."""
    path = tmp_path_factory.mktemp("demos") / "cartpole"
    rec = record(
        CARTPOLE,
        expert(),
        recorded_by=f"scripted:{EXPERT}",
        episodes=20,
        seed=0,
        num_envs=8,
        progress=False,
    )
    write_demonstrations(path, rec.records, rec.meta)
    return path


@pytest.fixture
def importable_tests(monkeypatch):
    """Configs may name test helpers (``tests.checkpoint.helpers``) by ``_target_`` from any cwd."""
    monkeypatch.syspath_prepend(str(REPO))


def with_data(path: Path) -> list[str]:
    return [*QUIET, f"phase.data.path={path}", "phase.data.record=null"]


# -- dataset -----------------------------------------------------------------------------------
def test_recording_round_trips_and_meta_describes_it(tmp_path):
    rec = record(
        CARTPOLE,
        expert(),
        recorded_by="scripted:x",
        episodes=3,
        seed=5,
        num_envs=2,
        max_steps=40,
        gamma=0.5,
        progress=False,
    )
    assert (
        rec.records.batch_size[0] == 3 * 40
    )  # the expert outlives max_steps: every episode is cut there
    path = write_demonstrations(tmp_path / "d", rec.records, rec.meta)
    demos = load_demonstrations(path)
    for key in ("observation", "action", "episode", "return"):
        assert torch.equal(torch.as_tensor(demos.records[key]), rec.records[key]), key
    meta = json.loads((path / META_FILE).read_text())
    assert meta["format"] == "meeple.demonstrations" and meta["version"] == 1
    assert meta["env"] == CARTPOLE and meta["observation_shape"] == [4] and meta["num_actions"] == 2
    assert meta["episodes"] == 3 and meta["records"] == 120 and meta["seed"] == 5
    assert meta["episode_return"]["mean"] == 40.0
    assert sorted(torch.unique(demos.records["episode"]).tolist()) == [0, 1, 2]
    first = rec.records[rec.records["episode"] == 0]["return"]
    assert torch.allclose(first[-2:], torch.tensor([1.5, 1.0]))  # G_t = r_t + 0.5 G_{t+1}, r = 1
    # Same seed, same records; another seed, other records.
    again = record(
        CARTPOLE,
        expert(),
        recorded_by="scripted:x",
        episodes=3,
        seed=5,
        num_envs=2,
        max_steps=40,
        gamma=0.5,
        progress=False,
    )
    assert torch.equal(again.records["observation"], rec.records["observation"])
    other = record(
        CARTPOLE,
        expert(),
        recorded_by="scripted:x",
        episodes=3,
        seed=6,
        num_envs=2,
        max_steps=40,
        gamma=0.5,
        progress=False,
    )
    assert not torch.equal(other.records["observation"], rec.records["observation"])


def test_discounted_returns():
    assert torch.allclose(
        discounted_returns(torch.tensor([1.0, 0.0, 2.0]), 0.5), torch.tensor([1.5, 1.0, 2.0])
    )


def _tiny(tmp_path, name="d"):
    rec = record(
        CARTPOLE,
        expert(),
        recorded_by="scripted:x",
        episodes=2,
        seed=0,
        num_envs=2,
        max_steps=10,
        progress=False,
    )
    return write_demonstrations(tmp_path / name, rec.records, rec.meta), rec


def test_load_errors_name_what_is_wrong_and_what_is_accepted(tmp_path):
    with pytest.raises(DatasetError, match="no demonstration dataset there; record one with"):
        load_demonstrations(tmp_path / "nowhere")
    path, rec = _tiny(tmp_path)
    with pytest.raises(DatasetError, match="already exists"):
        write_demonstrations(path, rec.records, rec.meta)

    meta_file = path / META_FILE
    good = json.loads(meta_file.read_text())
    for change, message in [
        ({"version": 7}, "format version 7; accepted: 1"),
        ({"format": "other"}, "format 'other'; accepted: 'meeple.demonstrations'"),
        ({"records": 999}, "meta.json says 999 records"),
        ({"num_actions": 1}, r"actions range over \[0, 1\]; accepted: 0..0"),
        ({"observation_shape": [5]}, r"observation has shape \[20, 4\].*accepted: shape \[20, 5\]"),
        ({"keys": ["action", "episode", "observation"]}, "but meta.json says"),
    ]:
        meta_file.write_text(json.dumps({**good, **change}))
        with pytest.raises(DatasetError, match=message):
            load_demonstrations(path)
    meta_file.write_text(json.dumps({k: v for k, v in good.items() if k != "episodes"}))
    with pytest.raises(DatasetError, match="missing keys episodes; accepted keys: env, "):
        load_demonstrations(path)
    meta_file.write_text("{not json")
    with pytest.raises(DatasetError, match="not readable JSON"):
        load_demonstrations(path)
    meta_file.unlink()
    with pytest.raises(DatasetError, match="no meta.json, so not a complete demonstration dataset"):
        load_demonstrations(path)

    with pytest.raises(
        DatasetError, match=r"records lack episode; accepted: observation, action, episode"
    ):
        write_demonstrations(tmp_path / "e", rec.records.exclude("episode"), rec.meta)
    masked = rec.records.clone()
    masked["action_mask"] = torch.zeros(masked.batch_size[0], 2, dtype=torch.bool)
    masked["action_mask"][:, 0] = True  # only action 0 legal, but the expert also pushed right
    meta = type(rec.meta)(**{**rec.meta.__dict__, "keys": sorted(masked.keys())})
    with pytest.raises(DatasetError, match="take an action their action_mask forbids"):
        write_demonstrations(tmp_path / "f", masked, meta)


def test_a_crash_while_writing_leaves_no_dataset(tmp_path, monkeypatch):
    rec = record(
        CARTPOLE,
        expert(),
        recorded_by="scripted:x",
        episodes=1,
        seed=0,
        num_envs=1,
        max_steps=5,
        progress=False,
    )

    def crash(src, dst):
        raise KeyboardInterrupt("killed before the rename")

    monkeypatch.setattr("meeple.phases.bc.dataset.os.rename", crash)
    with pytest.raises(KeyboardInterrupt):
        write_demonstrations(tmp_path / "d", rec.records, rec.meta)
    assert list(tmp_path.iterdir()) == []  # neither the dataset nor its temporary folder
    with pytest.raises(DatasetError, match="no demonstration dataset there"):
        load_demonstrations(tmp_path / "d")


def test_split_is_by_episode_and_deterministic(expert_data):
    demos = load_demonstrations(expert_data)
    train_idx, val_idx = demos.split(0.25, seed=3)
    again = demos.split(0.25, seed=3)
    assert torch.equal(train_idx, again[0]) and torch.equal(val_idx, again[1])
    episode = torch.as_tensor(demos.records["episode"])
    train_eps, val_eps = set(episode[train_idx].tolist()), set(episode[val_idx].tolist())
    assert len(val_eps) == 5 and len(train_eps) == 15 and not train_eps & val_eps
    assert len(train_idx) + len(val_idx) == demos.meta.records
    assert not torch.equal(split_episodes(20, 0.25, 4)[1], split_episodes(20, 0.25, 3)[1])
    assert len(split_episodes(20, 0.0, 3)[1]) == 0 and len(split_episodes(3, 0.01, 0)[1]) == 1
    with pytest.raises(DatasetError, match="leaves none to train on"):
        split_episodes(1, 0.5, 0)


# -- loss --------------------------------------------------------------------------------------
def test_masked_cross_entropy_ignores_illegal_actions():
    # Action 0 has the largest logit but is illegal; the expert chose action 2.
    logits = torch.tensor([[5.0, 1.0, 2.0, 0.0]], requires_grad=True)
    mask = torch.tensor([[False, True, True, True]])
    action = torch.tensor([2])
    assert greedy_actions(logits, None).item() == 0
    assert greedy_actions(logits, mask).item() == 2
    legal = torch.tensor([1.0, 2.0, 0.0])
    expected = -(legal[1] - torch.logsumexp(legal, 0))
    ce = masked_cross_entropy(logits, action, mask)
    assert torch.allclose(ce, expected.reshape(1))
    assert (
        masked_cross_entropy(logits, action, None).item() > ce.item()
    )  # the illegal logit takes mass
    ce.sum().backward()
    assert logits.grad[0, 0] == 0  # no gradient into the illegal logit
    assert torch.allclose(
        logits.grad[0, 1:], torch.softmax(legal, 0) - torch.tensor([0.0, 1.0, 0.0])
    )


def test_bc_loss_value_term_and_accuracy():
    logits = torch.tensor([[2.0, 0.0], [0.0, 2.0], [2.0, 0.0]])
    action = torch.tensor([0, 1, 1])
    policy_only = bc_loss(logits, action, None, None, None, value_coef=0.5)
    assert policy_only["correct_sum"] == 2 and "value_sum" not in policy_only
    assert torch.allclose(policy_only["loss"], policy_only["ce_sum"] / 3)
    value, target = torch.tensor([[1.0], [2.0], [3.0]]), torch.tensor([1.0, 0.0, 0.0])
    both = bc_loss(logits, action, None, value, target, value_coef=0.5)
    assert both["value_sum"] == 13.0
    assert torch.allclose(both["loss"], policy_only["loss"] + 0.5 * 13.0 / 3)


def test_warmup_then_cosine():
    factor = warmup_cosine(100, 0.1, "cosine")
    assert [factor(s) for s in (0, 4, 9)] == [0.1, 0.5, 1.0]
    assert factor(10) == 1.0 and abs(factor(55) - 0.5) < 1e-9 and factor(100) == 0.0
    assert warmup_cosine(100, 0.0, "constant")(77) == 1.0


# -- config ------------------------------------------------------------------------------------
def test_phase_node_interpolates_relatively_wherever_it_is_mounted():
    phase = OmegaConf.load(REPO / "conf" / "phase" / "bc.yaml")
    outer = {"paths": {"output_root": "out"}, "env": {"backend": "gym", "id": "CartPole-v1"}}
    for cfg in (
        OmegaConf.create({**outer, "phase": phase}),
        OmegaConf.create({**outer, "pipeline": {"stages": [{"phase": phase}]}}),
    ):
        node = cfg.phase if "phase" in cfg else cfg.pipeline.stages[0].phase
        node.eval.episodes = 7
        node.lr = 0.5
        resolved = OmegaConf.to_container(node, resolve=True)
        assert resolved["callbacks"]["eval"]["episodes"] == 7
        assert (
            resolved["callbacks"]["eval"]["every_n_rollouts"] == resolved["eval"]["every_n_epochs"]
        )
        assert resolved["optimizer"]["lr"] == 0.5
        assert resolved["data"]["path"] == "out/demonstrations/gym-CartPole-v1/episodes-50"


@pytest.mark.parametrize(
    "overrides, message",
    [
        (
            ["phase.schedule=linear"],
            "phase.schedule='linear' is not allowed; accepted: cosine, constant",
        ),
        (["phase.data.val_fraction=0"], "phase.early_stop.patience needs a validation split"),
        (
            ["phase.data.val_fraction=1.0"],
            r"phase.data.val_fraction=1.0 is not allowed; accepted: a float in \[0, 1\)",
        ),
        (
            [
                f"phase.data.record.policy={{_target_:{EXPERT}}}",
                "phase.data.record.checkpoint=x.pt",
            ],
            "phase.data.record sets policy and checkpoint; accepted: exactly one of",
        ),
        (
            ["phase.data.record.policy=3"],
            "phase.data.record.policy=3 is not allowed; accepted: a node with _target_",
        ),
        (["phase.batch_size=0"], "phase.batch_size=0 is not allowed; accepted: an integer >= 1"),
        (["+phase.bogus=1"], "phase.bogus"),
    ],
)
def test_config_errors_name_key_value_and_accepted(compose, overrides, message):
    with pytest.raises(ConfigError, match=message):
        validate(compose(["phase=bc", *overrides]))


def test_debug_tiny_sizes_make_a_quick_valid_run(compose, in_tmp):
    metrics = train(compose([*QUIET, "debug=tiny", f"phase.data.record.policy={{_target_:{EXPERT}}}"]))
    assert metrics["val/accuracy"] >= 0 and EVAL_RETURN in metrics
    assert (
        json.loads(
            (in_tmp / "outputs/demonstrations/gym-CartPole-v1/episodes-4/meta.json").read_text()
        )["episodes"]
        == 4
    )


# -- learning ----------------------------------------------------------------------------------
def test_bc_clones_the_cartpole_expert(compose, in_tmp, expert_data):
    """20 expert episodes (15 train / 5 validation), 6 epochs of batch 64: measured val accuracy 0.98,
    greedy return 500 on 20 fresh episodes (the expert's: 500)."""
    metrics = train(
        compose(
            [
                *with_data(expert_data),
                "phase.max_epochs=6",
                "phase.batch_size=64",
                "checkpoint=none",
            ]
        )
    )
    assert metrics["val/accuracy"] >= 0.9, metrics
    assert metrics[EVAL_RETURN] >= 475.0, metrics
    assert metrics["val/policy_ce"] < 0.3 and metrics["loss/value"] > 0


def test_value_coef_zero_trains_the_policy_only(compose, in_tmp, expert_data):
    metrics = train(
        compose(
            [
                *with_data(expert_data),
                "phase.max_epochs=1",
                "phase.value_coef=0",
                "phase.eval.episodes=2",
                "phase.eval.max_steps=10",
                "checkpoint=none",
            ]
        )
    )
    assert "loss/value" not in metrics and "val/value_mse" not in metrics
    assert metrics["loss/bc"] == metrics["loss/policy_ce"]


def test_without_validation_split_trains_on_every_episode(compose, in_tmp, expert_data):
    quick = [
        "phase.max_epochs=1",
        "phase.eval.episodes=2",
        "phase.eval.max_steps=10",
        "checkpoint=none",
    ]
    no_val = ["phase.data.val_fraction=0", "phase.early_stop.patience=null"]
    metrics = train(compose([*with_data(expert_data), *quick, *no_val]))
    assert not [key for key in metrics if key.startswith("val/")]
    assert metrics["train/samples"] == load_demonstrations(expert_data).meta.records


def test_early_stopping_on_validation_cross_entropy(compose, in_tmp, expert_data):
    # The cross-entropy (< ln 2 after epoch 1) cannot fall by min_delta=1 again: patience 2 stops at epoch 3.
    metrics = train(
        compose(
            [
                *with_data(expert_data),
                "phase.max_epochs=10",
                "phase.early_stop.min_delta=1.0",
                "phase.early_stop.patience=2",
                "phase.eval.episodes=2",
                "phase.eval.max_steps=10",
                "checkpoint=none",
            ]
        )
    )
    assert metrics["train/lr"] > 0  # stopped early, not at the end of the schedule
    n_train = len(
        load_demonstrations(expert_data).split(0.1, 0)[0]
    )  # epochs run = samples seen / records
    assert metrics["train/samples"] == 3 * n_train


def first_legal_column(td):
    """A Connect Four demonstrator: the lowest legal column (its choice depends on the mask)."""
    return td["action_mask"].float().argmax(-1)


def test_masked_env_end_to_end(compose, in_tmp):
    """Connect Four records action masks; the clone learns the mask-dependent choice."""
    connect4 = {"backend": "connect4"}
    rec = record(
        connect4,
        first_legal_column,
        recorded_by="scripted:first_legal_column",
        episodes=12,
        seed=0,
        num_envs=4,
        progress=False,
    )
    mask = rec.records["action_mask"]
    assert mask.dtype == torch.bool and not bool(mask[:, 0].all())  # column 0 fills up
    write_demonstrations(in_tmp / "c4", rec.records, rec.meta)
    metrics = train(
        compose(
            [
                *with_data(in_tmp / "c4"),
                "env=connect4",
                "phase.max_epochs=15",
                "phase.batch_size=32",
                "phase.data.val_fraction=0.25",
                "phase.eval.episodes=2",
                "phase.eval.max_steps=10",
                "checkpoint=none",
            ]
        )
    )
    assert metrics["val/accuracy"] >= 0.9, metrics


# -- resume ------------------------------------------------------------------------------------
def test_interrupted_then_resumed_equals_uninterrupted(
    compose, in_tmp, expert_data, importable_tests
):
    base = [
        *with_data(expert_data),
        "phase.max_epochs=4",
        "phase.batch_size=512",
        "phase.eval.episodes=3",
        "phase.eval.max_steps=30",
        "phase.eval.every_n_epochs=1",
        "phase.early_stop.patience=3",
        "checkpoint.min_interval_s=0",  # a checkpoint after every epoch, however fast
    ]
    stop = [
        "+callbacks.crash._target_=tests.checkpoint.helpers.CrashAfterRollouts",
        "+callbacks.crash.rollouts=2",
    ]

    def learning(metrics):
        return {k: v for k, v in metrics.items() if not k.startswith("perf/")}

    def final(task):
        run = find_latest_run(Path("outputs/runs"), experiment="default", task=task)
        return load_verified(run.checkpoint_dir(0) / LATEST)

    full = learning(train(compose([*base, "task_name=full"])))
    with pytest.raises(SimulatedCrash):
        train(compose([*base, "task_name=cut", *stop]))
    steps_per_epoch = -(-len(load_demonstrations(expert_data).split(0.1, 0)[0]) // 512)
    assert final("cut")["global_step"] == 2 * steps_per_epoch  # stopped after epoch 2 of 4
    resumed = learning(train(compose([*base, "task_name=cut", "resume=true"])))
    assert resumed == full
    a, b = final("full"), final("cut")
    from tests.checkpoint.test_resume import assert_same

    assert a["global_step"] == b["global_step"] == 4 * steps_per_epoch
    for key in (
        "model_state_dict",
        "optimizer_state_dict",
        "scheduler_state_dict",
        "rng_state",
        "loops",
        "DemonstrationDataModule",
    ):
        assert_same(a[key], b[key], key)
    assert_same(a["callbacks"], b["callbacks"], "callbacks")
    assert {k.split(".")[0] for k in a["model_state_dict"]} == {
        "actor",
        "critic",
    }  # PPOModule's layout


# -- command line ------------------------------------------------------------------------------
def _run(cwd, *args, timeout=300):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    return subprocess.run(
        [sys.executable, *args], cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env
    )


def test_cli_records_then_trains(tmp_path):
    done = _run(
        tmp_path,
        "-m",
        "meeple.phases.bc.record",
        "env=cartpole",
        f"+policy._target_={EXPERT}",
        "episodes=4",
        "num_envs=4",
        "out=demos",
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert (
        json.loads((tmp_path / "demos" / META_FILE).read_text())["recorded_by"]
        == f"scripted:{EXPERT}"
    )

    tiny = [
        "phase.data.path=demos",
        "phase.data.record=null",
        "phase.data.val_fraction=0.25",
        "phase.max_epochs=2",
        "phase.batch_size=64",
        "phase.early_stop.patience=null",
        "phase.eval.episodes=2",
        "phase.eval.max_steps=20",
    ]
    done = _run(
        tmp_path, str(REPO / "train.py"), "env=cartpole", "phase=bc", *tiny
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "final greedy evaluation" in done.stderr + done.stdout

    missing = _run(
        tmp_path,
        str(REPO / "train.py"),
        "phase=bc",
                "phase.data.path=nowhere",
        "phase.data.record=null",
    )
    assert missing.returncode == 2
    assert (
        "meeple: error: nowhere: no demonstration dataset there; record one with" in missing.stderr
    )


def test_dataset_recorded_by_another_policy_is_not_reused(compose, in_tmp, expert_data):
    with pytest.raises(
        MeepleError,
        match="holds 20 episodes recorded by scripted:meeple_gym.experts.CartPoleExpert",
    ):
        train(
            compose(
                [
                    *QUIET,
                    f"phase.data.path={expert_data}",
                    "phase.data.record.episodes=50",
                    f"phase.data.record.policy={{_target_:{EXPERT}}}",
                ]
            )
        )


def test_record_from_a_trained_checkpoint(compose, in_tmp, expert_data):
    """A BC checkpoint holds actor.* weights like PPO's: load_actor rebuilds it for recording."""
    from meeple.phases.bc.record import checkpoint_policy

    train(
        compose(
            [
                *with_data(expert_data),
                "phase.max_epochs=1",
                "phase.eval.episodes=2",
                "phase.eval.max_steps=10",
            ]
        )
    )
    run = find_latest_run(Path("outputs/runs"), experiment="default", task="train")
    policy, recorded_by = checkpoint_policy(str(run.path), CARTPOLE)
    assert recorded_by.startswith("checkpoint:") and recorded_by.endswith(
        f"@step{load_verified(run.checkpoint_dir(0) / LATEST)['global_step']}"
    )
    rec = record(
        CARTPOLE,
        policy,
        recorded_by=recorded_by,
        episodes=2,
        seed=0,
        num_envs=2,
        max_steps=50,
        progress=False,
    )
    assert rec.meta.episodes == 2 and rec.records.batch_size[0] == len(rec.records["action"]) > 0
    # The recorded actions are the actor's greedy ones.
    logits = policy.get_dist_params(rec.records.select("observation").clone())["logits"]
    assert torch.equal(logits.argmax(-1), rec.records["action"])
    with pytest.raises(
        ConfigError,
        match="was trained on env .*CartPole-v1.*accepted: a checkpoint of the same env",
    ):
        checkpoint_policy(str(run.path), {"backend": "gym", "id": "Acrobot-v1"})
