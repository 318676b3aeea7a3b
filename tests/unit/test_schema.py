"""Bad configs fail before any work, with the key and what is accepted."""

import pytest
import torch

from meeple.cli.train import build_run
from meeple.config.schema import check_accelerator
from meeple.errors import ConfigError
from meeple.phases.registry import validate


@pytest.mark.parametrize(
    "overrides, pattern",
    [
        (["phase.rollout_steps=abc"], r"phase\.rollout_steps='abc' is not allowed; accepted: an integer"),
        (["+phase.gamma=0.9"], r"phase\.gamma.*not in 'PPOPhase'.*accepted keys of phase: .*loss"),
        (["+phase.loss.gama=0.9"], r"phase\.loss\.gama"),
        (["phase.minibatch_size=5000"], r"phase\.minibatch_size=5000 is larger than one rollout.*accepted: 1\.\.1024"),
        (["phase.total_frames=100"], r"phase\.total_frames=100 .*accepted: >= 1024"),
        (["phase.loss.gamma=1.5"], r"phase\.loss\.gamma=1\.5.*\(0, 1\]"),
        (["phase.lr=0"], r"phase\.lr=0"),
        (["hardware.precision=fp8"], r"hardware\.precision='fp8'.*bf16-mixed"),
        (["hardware.torch_threads=0"], r"hardware\.torch_threads=0.*>= 1"),
        (["phase.name=dreamer"], r"phase\.name='dreamer' is not a phase kind; accepted: ppo"),
        (["env.num_envs=0"], r"env\.num_envs=0"),
    ],
)
def test_bad_values_name_the_key(compose, overrides, pattern):
    with pytest.raises(ConfigError, match=pattern):
        validate(compose(overrides))


def test_default_config_validates(compose):
    typed = validate(compose())
    assert typed["phase"].rollout_steps == 128
    assert typed["hardware"].name == "cpu"


def test_unknown_backend_fails_before_building(compose):
    cfg = compose(["env.backend=atari"])
    with pytest.raises(ConfigError, match="installed: .*gym"):
        build_run(cfg)


def test_unknown_collector_type(compose):
    cfg = compose(["debug=tiny", "collector.type=spark"])
    parts = build_run(cfg)
    with pytest.raises(ConfigError, match="collector.type='spark'; accepted: auto, sync, multisync, ray"):
        from meeple.data.collectors import build_collector

        build_collector("spark", [], parts.module.policy, frames_per_batch=8)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-CUDA error path")
@pytest.mark.parametrize("profile", ["rtx6000", "rtx4090", "h100", "h200"])
def test_gpu_profile_without_cuda_names_the_fix(compose, profile):
    typed = validate(compose([f"hardware={profile}"]))
    with pytest.raises(ConfigError, match=rf"hardware={profile} needs a CUDA GPU.*hardware=cpu"):
        check_accelerator(typed["hardware"])
