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
        # a lag the learners could never catch up with: their first update needs batch_size rows
        (["+experiment=independent_dqn", "phase.learning_starts=0", "phase.max_update_lag=10"],
         r"phase\.max_update_lag=10 .*accepted: null \(the actor never waits\) or env steps >= 64"),
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
    with pytest.raises(ConfigError, match="collector=spark is not one phase=ppo collects with; accepted: "
                                          "collector=auto, collector=sync, collector=multisync, collector=ray"):
        validate(compose(["debug=tiny", "collector.type=spark"]))
    from meeple.data.collectors import build_collector

    with pytest.raises(ConfigError, match="collector.type='spark'; accepted: auto, sync, multisync, ray"):
        build_collector("spark", [], None, frames_per_batch=8)


@pytest.mark.parametrize(
    "overrides, pattern",
    [
        # a collector the phase would silently not use
        (["+experiment=connect4_alphazero", "collector=multisync"],
         r"collector=multisync is not one phase=alphazero collects with; accepted: collector=auto, collector=sync, "
         r"collector=ray"),
        (["+experiment=pixels_ppo", "collector=ray"], r"collector=ray is not one phase=packed_ppo collects with"),
        (["+experiment=connect4_alphazero", "collector=ray", "collector.actors=0"],
         r"collector\.actors=0; accepted: null or an integer >= 1"),
        (["collector=ray", "env.num_workers=2", "collector.actors=3"],
         r"collector\.actors=3, but phase=ppo runs one Ray actor per env worker \(env\.num_workers=2\)"),
        (["collector=ray", "collector.cpus_per_actor=0"], r"collector\.cpus_per_actor=0; accepted: a number > 0"),
        (["collector=ray", "hardware=ddp_cpu"],
         r"collector=ray with hardware=ddp_cpu \(2 learner processes\) needs a running cluster.*collector\.address=auto"),
    ],
)
def test_collector_the_phase_cannot_use_is_refused(compose, overrides, pattern):
    with pytest.raises(ConfigError, match=pattern):
        validate(compose(overrides))


@pytest.mark.parametrize(
    "overrides, pattern",
    [  # a transport the phase would silently not use (issue 41)
        (["+experiment=independent_dqn", "transport=shm"],
         r"transport=shm is not used by phase=dqn \(it builds its envs itself\); accepted: leave transport= out "
         r"\(transport=inproc\), or a phase that steps remote envs \(ppo, bc, distill, league\)"),
        (["+experiment=pixels_ppo", "transport=socket"], r"transport=socket is not used by phase=packed_ppo"),
        (["+experiment=connect4_alphazero", "transport=http"], r"transport=http is not used by phase=alphazero"),
    ],
)
def test_transport_the_phase_cannot_use_is_refused(compose, overrides, pattern):
    with pytest.raises(ConfigError, match=pattern):
        validate(compose(overrides))
    validate(compose(["transport=shm"]))  # ppo serves its envs over any transport


def test_collector_ray_fits_alphazero_and_a_pipeline_with_a_bc_stage(compose):
    from meeple.pipeline.plan import plan_run

    validate(compose(["+experiment=connect4_alphazero", "collector=ray", "collector.actors=4"]))
    validate(compose(["collector=ray", "env.num_workers=2", "collector.actors=2"]))
    # BC learns from logs: collector= is PPO's business in this pipeline, not an error at its BC stage.
    assert len(plan_run(compose(["+experiment=cartpole_bc_ppo", "collector=ray"])).stages) == 2
    # ... but a run of BC alone would leave it unused: an error, not silence.
    with pytest.raises(ConfigError, match=r"collector=ray: no stage this run trains collects \(phase=bc learns "
                                          r"from logs.*accepted: leave collector= out"):
        plan_run(compose(["+experiment=cartpole_bc_ppo", "collector=ray", "pipeline.only=bc"]))


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-CUDA error path")
@pytest.mark.parametrize("profile", ["rtx6000", "rtx4090", "h100", "h200"])
def test_gpu_profile_without_cuda_names_the_fix(compose, profile):
    typed = validate(compose([f"hardware={profile}"]))
    with pytest.raises(ConfigError, match=rf"hardware={profile} needs a CUDA GPU.*hardware=cpu"):
        check_accelerator(typed["hardware"])


def test_the_registry_names_every_collector_type():
    from meeple.data.collectors import COLLECTOR_TYPES
    from meeple.phases.registry import ALL_COLLECTORS

    assert set(ALL_COLLECTORS) == set(COLLECTOR_TYPES)  # the registry's copy (it imports no torch)
