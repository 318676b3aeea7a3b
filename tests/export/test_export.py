"""ONNX export of trained policies (docs/export.md): parity with the eager TorchRL modules on
observations recorded from the env, the sidecar, and the errors that leave nothing written.

Cost: two real ``train.py debug=tiny`` runs (CartPole MLP, mahjong planes network, ~5 s each)
and four dynamo exports (~3 s each); about 40 s in all on 2 cores.
"""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import onnx
import pytest
import torch
from hydra.utils import instantiate
from omegaconf import OmegaConf
from tensordict import TensorDict
from torchrl.envs.utils import ExplorationType, set_exploration_type

from meeple.checkpoint.io import save_atomic
from meeple.env_factory import make_env
from meeple.export import MASKED_LOGIT, ExportedPolicy, ExportError, load_policy
from meeple.export.__main__ import main
from meeple.export.onnx import feeds, session, write_policy
from meeple.export.policy import LoadedPolicy, NetHeads, Samples
from tests.conftest import CORRUPTED, REPO

TRAIN = str(REPO / "train.py")
MAHJONG_PLANES = ["env=mahjong", "model=planes_resnet", "model.channels=8", "model.blocks=1", "model.hidden=32"]


def _train(tmp_path_factory, name, *overrides):
    cwd = tmp_path_factory.mktemp(name)
    done = subprocess.run(
        [sys.executable, "-X", "importtime", TRAIN, "debug=tiny", "tracking=none", "seed=3", *overrides],
        cwd=cwd, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    (run,) = (cwd / "outputs" / "runs").iterdir()
    return run, done.stderr


@pytest.fixture(scope="module")
def cartpole(tmp_path_factory):
    return _train(tmp_path_factory, "cartpole")


@pytest.fixture(scope="module")
def mahjong(tmp_path_factory):
    return _train(tmp_path_factory, "mahjong", *MAHJONG_PLANES)


def test_training_never_imports_the_exporter(cartpole):
    _, importtime = cartpole
    imported = {line.rsplit("|", 1)[-1].strip() for line in importtime.splitlines() if line.startswith("import time:")}
    assert "meeple.checkpoint" in imported  # the -X importtime listing is there
    assert not {m for m in imported if m.startswith(("meeple.export", "onnx"))}


def _reference(run):
    """The checkpoint's actor and critic rebuilt as TorchRL modules (not through meeple.export)."""
    from meeple.checkpoint.actor import checkpoint_file
    from meeple.checkpoint.io import load_verified

    ckpt = load_verified(checkpoint_file(run))
    cfg = ckpt["config"]
    env = make_env(cfg["env"], num_envs=1, seed=0)
    actor, critic = instantiate(OmegaConf.create(cfg["model"]))(env.observation_spec, env.action_spec)
    env.close()
    for part, module in (("actor.", actor), ("critic.", critic)):
        module.load_state_dict({k[len(part):]: v for k, v in ckpt["model_state_dict"].items() if k.startswith(part)})
    return actor.eval(), critic.eval(), cfg


@pytest.mark.parametrize("game", ["cartpole", "mahjong"])
def test_onnxruntime_matches_the_torchrl_policy_on_recorded_observations(game, request, tmp_path):
    run, _ = request.getfixturevalue(game)
    loaded = load_policy(run)
    out, parity = write_policy(loaded, tmp_path / "policy.onnx")
    assert parity.ok(1e-4) and parity.recorded and parity.batches == [1, 64]

    actor, critic, cfg = _reference(run)
    samples = loaded.samples(64, seed=11)  # other observations than the export's own check
    assert samples.recorded and len(samples.observation) == 64
    has_mask = cfg["env"]["backend"] == "mahjong"
    assert (samples.action_mask is not None) == has_mask == loaded.policy.has_mask
    if has_mask:  # the recording is real play: legal sets vary and the greedy action is legal
        assert tuple(samples.observation.shape[1:]) == (84, 34) and samples.action_mask.shape[1] == 155
        assert len({tuple(row.tolist()) for row in samples.action_mask}) > 1
    td = TensorDict({"observation": samples.observation}, batch_size=[64])
    if has_mask:
        td["action_mask"] = samples.action_mask
    with torch.no_grad(), set_exploration_type(ExplorationType.DETERMINISTIC):
        logits, value = actor(td.clone())["logits"], critic(td.clone())["state_value"].squeeze(-1)
    if has_mask:
        logits = logits.masked_fill(~samples.action_mask, MASKED_LOGIT)

    sess = session(out, threads=1)
    assert [i.name for i in sess.get_inputs()] == (["observation", "action_mask"] if has_mask else ["observation"])
    assert [o.name for o in sess.get_outputs()] == ["logits", "value"]
    for batch in (1, 64):
        for start in range(0, 64, batch)[:8]:
            rows = slice(start, start + batch)
            mask = samples.action_mask[rows] if has_mask else None
            onnx_logits, onnx_value = sess.run(None, feeds(samples.observation[rows], mask))
            assert onnx_logits.shape == (batch, loaded.num_actions) and onnx_value.shape == (batch,)
            assert np.abs(onnx_logits - logits[rows].numpy()).max() <= 1e-4
            assert np.abs(onnx_value - value[rows].numpy()).max() <= 1e-4
            greedy = torch.from_numpy(onnx_logits).argmax(-1)
            legal = mask.any(-1) if has_mask else torch.ones(batch, dtype=torch.bool)
            assert torch.equal(greedy[legal], samples.greedy[rows][legal])
            if has_mask:
                assert (onnx_logits[~mask.numpy()] == MASKED_LOGIT).all()

    model = onnx.load(str(out))
    batch_dim = model.graph.input[0].type.tensor_type.shape.dim[0]
    assert batch_dim.dim_param and not batch_dim.dim_value  # symbolic: any batch size
    meta = json.loads((tmp_path / "policy.onnx.json").read_text())
    assert meta["source_checkpoint"] == str(loaded.file.resolve()) and meta["global_step"] > 0
    assert meta["env"]["backend"] == cfg["env"]["backend"] and meta["phase"] == "ppo"
    assert meta["inputs"]["observation"] == {"shape": ["batch", *loaded.observation_shape], "dtype": "float32"}
    assert meta["num_actions"] == (155 if has_mask else 2) and meta["opset"] == 18
    assert meta["parity"]["max_abs_logits"] <= 1e-4 and meta["meeple_version"]


def test_the_cli_exports_a_run_directory(cartpole, tmp_path, capsys):
    run, _ = cartpole
    assert main([str(run), "--out", str(tmp_path / "cp.onnx"), "--samples", "8"]) == 0
    out = capsys.readouterr().out
    assert "phase0/checkpoints/latest.pt" in out and "parity on 8 recorded observations" in out
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cp.onnx", "cp.onnx.json"]


def _fails(argv, capsys, message):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("meeple: error:") and len(err.strip().splitlines()) == 1 and message in err, err


def test_bad_sources_are_one_line_errors_and_write_nothing(cartpole, tmp_path, capsys, request):
    run, _ = cartpole
    out = tmp_path / "out" / "policy.onnx"
    argv = ["--out", str(out)]
    _fails([str(tmp_path / "missing.pt"), *argv], capsys, "no such file; give a checkpoint file")
    garbage = tmp_path / "garbage.pt"
    garbage.write_bytes(b"not a checkpoint")
    _fails([str(garbage), *argv], capsys, "cannot be deserialized safely")
    good = (run / "phase0" / "checkpoints" / "latest.pt").resolve()
    flipped = tmp_path / good.name
    data = bytearray(good.read_bytes())
    data[len(data) // 2] ^= 0xFF
    flipped.write_bytes(bytes(data))
    request.node.stash.setdefault(CORRUPTED, set()).add(flipped.resolve())
    (tmp_path / f"{good.name}.sha256").write_text((good.parent / f"{good.name}.sha256").read_text())
    _fails([str(flipped), *argv], capsys, "the file is corrupt")
    model = {"_target_": "meeple.nets.actor_critic.build_actor_critic", "_partial_": True, "shared": False,
             "hidden": [8], "activation": "tanh"}  # fmt: skip
    no_actor = tmp_path / "no_actor.pt"
    save_atomic({"model_state_dict": {"loss_module.clip_epsilon": torch.tensor(0.2)}, "checkpoint_version": 1,
                 "config": {"model": model, "env": {"backend": "gym", "id": "CartPole-v1"}}}, no_actor)  # fmt: skip
    _fails([str(no_actor), *argv], capsys, "no policy weights in model_state_dict (it holds ['loss_module'])")
    no_env = tmp_path / "no_env.pt"
    save_atomic({"model_state_dict": {"actor.w": torch.zeros(1)}, "checkpoint_version": 1,
                 "config": {"model": model, "env": {"backend": "atari2600"}}}, no_env)  # fmt: skip
    _fails([str(no_env), *argv], capsys, "cannot build env backend 'atari2600'")
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").iterdir())


class _DataDependent(torch.nn.Module):
    """Branches on a value: torch.export cannot trace it with a symbolic batch."""

    def forward(self, x):
        logits = torch.zeros(x.shape[0], 3)
        if x.sum() > 0:
            logits = logits + 1
        return logits, x.sum(-1)


def test_an_untraceable_model_is_named_and_nothing_is_written(tmp_path):
    policy = ExportedPolicy(NetHeads(_DataDependent()), has_mask=False).eval()
    loaded = LoadedPolicy(policy, tmp_path / "x.pt", "my.nets.branchy", "ppo", {}, (4,), torch.float32, 3)
    with pytest.raises(ExportError, match="model 'my.nets.branchy' cannot be exported to ONNX"):
        write_policy(loaded, tmp_path / "policy.onnx", samples=Samples(torch.randn(4, 4), None))
    assert list(tmp_path.iterdir()) == []


def test_an_export_outside_the_tolerance_is_refused_and_nothing_is_written(cartpole, tmp_path):
    run, _ = cartpole
    (tmp_path / "policy.onnx").write_bytes(b"the previous export")
    with pytest.raises(ExportError, match="does not match eager torch.*nothing written"):
        write_policy(load_policy(run), tmp_path / "policy.onnx", tolerance=-1.0)
    assert [p.name for p in tmp_path.iterdir()] == ["policy.onnx"]
    assert (tmp_path / "policy.onnx").read_bytes() == b"the previous export"


def test_without_the_extra_the_cli_says_what_to_install(monkeypatch, tmp_path, capsys):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "onnxruntime" else real(name, *a))
    _fails([str(tmp_path), "--out", str(tmp_path / "p.onnx")], capsys, 'needs onnxruntime: pip install "meeple[export]"')


def _single_network_checkpoint(kind, path):
    """A checkpoint as alphazero (best.*, net.*) or packed_ppo (net.*) saves it, fresh weights."""
    from meeple.plugins.registry import load_game

    if kind == "alphazero":
        model = {"_target_": "meeple.nets.az_resnet.build_az_resnet", "_partial_": True, "channels": 8, "blocks": 1}
        game = load_game("connect4")
        net = instantiate(OmegaConf.create(model))(game.planes_shape, game.num_actions)
        config = {"model": model, "phase": {"name": "alphazero", "game": "connect4"}}
        candidate = instantiate(OmegaConf.create(model))(game.planes_shape, game.num_actions)
        weights = {**{f"best.{k}": v for k, v in net.state_dict().items()},
                   **{f"net.{k}": v for k, v in candidate.state_dict().items()}}  # fmt: skip
    else:
        model = {"_target_": "meeple.nets.packed_cnn.build_packed_cnn", "_partial_": True, "channels": [8, 16],
                 "hidden": 32}  # fmt: skip
        factory = {"_target_": "meeple.envs.goal_grid.make_goal_grid", "renderer": "torch", "max_steps": 40}
        probe = instantiate(OmegaConf.create(factory), _partial_=True)(num_envs=1, device="cpu")
        net = instantiate(OmegaConf.create(model))(probe.frames_per_obs, probe.num_actions)
        config = {"model": model, "phase": {"name": "packed_ppo"}, "env": {"backend": "packed", "factory": factory}}
        weights = {f"net.{k}": v for k, v in net.state_dict().items()}
    save_atomic({"model_state_dict": weights, "config": config, "checkpoint_version": 1, "global_step": 7}, path)
    return net.eval()


@pytest.mark.parametrize("kind", ["alphazero", "packed_ppo"])
def test_single_network_phases_export_their_playing_network(kind, tmp_path):
    net = _single_network_checkpoint(kind, tmp_path / "ckpt.pt")
    loaded = load_policy(tmp_path / "ckpt.pt")
    out, parity = write_policy(loaded, tmp_path / "policy.onnx")
    assert not parity.recorded and parity.max_abs_logits <= 1e-4 and parity.max_abs_value <= 1e-4
    s = loaded.samples(8, seed=5)
    with torch.no_grad():
        logits, value = net(s.observation)  # alphazero: the gated `best` network, not the candidate
    if kind == "alphazero":
        assert s.action_mask is not None and s.observation.dtype == torch.float32
        logits = logits.masked_fill(~s.action_mask, MASKED_LOGIT)
    else:
        assert s.action_mask is None and s.observation.dtype == torch.uint8
    onnx_logits, onnx_value = session(out).run(None, feeds(s.observation, s.action_mask))
    assert np.abs(onnx_logits - logits.numpy()).max() <= 1e-4
    assert np.abs(onnx_value - value.numpy()).max() <= 1e-4
    meta = json.loads((tmp_path / "policy.onnx.json").read_text())
    assert meta["phase"] == kind and meta["global_step"] == 7 and meta["parity"]["recorded"] is False


def test_python_dash_m_meeple_export_runs_as_a_module(tmp_path):
    done = subprocess.run([sys.executable, "-m", "meeple.export", str(tmp_path / "none.pt")],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 2 and done.stderr.startswith("meeple: error:"), done.stderr[-2000:]
    assert "none.pt: no such file" in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert list(tmp_path.iterdir()) == []
