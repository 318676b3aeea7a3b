"""Every experiment x hardware profile composes, validates and instantiates (no training)."""

import pytest
import torch
from hydra.utils import instantiate

from meeple.cli.train import build_run
from meeple.config.compose import conf_dir, group_options
from meeple.errors import ConfigError
from meeple.phases.registry import phase_kind
from meeple.pipeline.lightning_stage import build_stage
from meeple.pipeline.plan import plan_run
from meeple.seeding import PhaseSeeds

EXPERIMENTS = [None, *group_options("experiment")]  # the core's recipes and every plugin's
HARDWARE = sorted(p.stem for p in (conf_dir() / "hardware").glob("*.yaml"))
DISTRIBUTED = {"ddp_cpu"}  # profiles with several learner processes


def test_profiles_and_recipes_exist():
    assert {"cpu", "rtx6000", "rtx4090", "h100", "h200"} <= set(HARDWARE)
    assert {"cartpole_ppo", "connect4_alphazero"} <= set(EXPERIMENTS)


def test_train_yaml_has_no_experiment_default():
    # `+experiment=X` only works when the root defaults list does not name the group.
    text = (conf_dir() / "train.yaml").read_text()
    assert "experiment:" not in text.split("_self_")[0].replace("experiment_name", "")


@pytest.mark.parametrize("experiment", EXPERIMENTS[1:])
def test_each_experiment_selects_its_own_recipe(compose, experiment):
    # conf/experiment/<name>.yaml is `override /recipe: <name>`; the recipe names itself
    assert compose([f"+experiment={experiment}"]).experiment_name == experiment


@pytest.mark.parametrize("hardware", HARDWARE)
@pytest.mark.parametrize("experiment", EXPERIMENTS)
def test_compose_and_instantiate(compose, experiment, hardware, in_tmp):
    """Every stage of every experiment (pipelines included) validates and builds (in a tmp folder:
    a BC stage records its demonstrations when they are missing)."""
    overrides = [f"hardware={hardware}"] + ([f"+experiment={experiment}"] if experiment else [])
    cfg = compose(overrides)
    if hardware in DISTRIBUTED:  # several learner processes: only for the phase kinds that support it
        try:
            plan = plan_run(cfg)
        except ConfigError as err:
            assert "does not support" in str(err) and "accepted: a single-process hardware profile" in str(err)
            return
        assert all(phase_kind(s.cfg.phase.name).distributed for s in plan.stages), experiment
    plan = plan_run(cfg)
    # phase2 (and phase2_rl) start at the teacher and phase1_rl (and phase1_branch, phase1_guide) at its PPO stage (phase 1's gate comes from a
    # phase1 run), phase3 at its league
    # (phase 2's student from a phase2 run); mahjong_pipeline runs all four stages
    start = {"phase1_rl": 1, "phase1_branch": 1, "phase1_guide": 1, "phase2": 1, "phase2_rl": 1,
             "phase3": 3}.get(experiment, 0)
    assert plan.stages and plan.start == start and plan.stop == len(plan.stages) - 1
    # A recipe that extends another holds its stages unchanged: compare them, build only the new ones
    # (each mahjong stage builds its simulators and networks; on GPU profiles those are large).
    base = EXTENDS.get(experiment)
    inherited = plan_run(compose([f"hardware={hardware}", f"+experiment={base}"])).stages if base else []
    for mine, theirs in zip(plan.stages, inherited):
        assert mine.name == theirs.name and _without_names(mine.cfg) == _without_names(theirs.cfg), mine.name
    for stage in plan.stages[len(inherited):]:
        check_stage_builds(stage)


EXTENDS = {"phase3": "phase2", "mahjong_pipeline": "phase3"}  # recipe -> the recipe whose stages it starts with


def _without_names(cfg):
    """A stage's config without what names the experiment (its name, MLflow experiment, pipeline.start)."""
    from omegaconf import OmegaConf

    plain = OmegaConf.to_container(cfg, resolve=True)
    plain.pop("experiment_name", None)
    plain["tracking"].pop("experiment", None)
    (plain.get("pipeline") or {}).pop("start", None)
    return plain


def check_stage_builds(stage):
    cfg = stage.cfg
    if cfg.phase.name == "dqn":  # independent learners: processes, not a Lightning Trainer
        from meeple.phases.dqn.run import build_independent

        run = build_independent(cfg)
        assert len(run.agents) >= 2 and len(run.state.models) == len(run.state.buffers) == len(run.agents)
        run.topology.close()  # never started: releases the shared primitives
        return
    parts = build_stage(cfg, stage.typed, PhaseSeeds(1, stage.index))
    kwargs = dict(parts.trainer_kwargs)
    assert kwargs["max_epochs"] >= 1
    if kwargs["accelerator"] == "cuda" and not torch.cuda.is_available():
        kwargs["accelerator"] = "cpu"  # the profile's other choices must still be valid Lightning args
    trainer = instantiate(cfg.trainer, logger=False, **kwargs)
    assert trainer.max_epochs == kwargs["max_epochs"]
    if cfg.phase.name in ("ppo", "packed_ppo", "distill", "league"):
        assert parts.datamodule.frames_per_batch >= cfg.phase.minibatch_size
        wanted = {name for name, node in (cfg.phase.get("callbacks") or {}).items() if node is not None}
        assert wanted and wanted <= set(parts.callbacks)  # from the phase's own yaml
    elif cfg.phase.name == "alphazero":  # the gate runs before the configurable callbacks
        assert next(iter(parts.callbacks)) == "gate"


def test_default_run_is_the_cartpole_recipe(compose):
    from omegaconf import OmegaConf

    default = OmegaConf.to_container(compose(), resolve=False)
    recipe = OmegaConf.to_container(compose(["+experiment=cartpole_ppo"]), resolve=False)
    default.pop("experiment_name"), recipe.pop("experiment_name")
    assert default == recipe


def test_debug_and_recipes_override_root_values(compose):
    # The root config's values are defaults: debug/ routes output to its own task folder.
    assert compose().task_name == "train"
    assert compose(["debug=tiny"]).task_name == "debug"
    assert compose(["debug=tiny", "task_name=mine"]).task_name == "mine"


@pytest.mark.parametrize("experiment", [None, "connect4_alphazero", "pixels_ppo", "independent_dqn"])
def test_debug_modes_resize_each_phase(compose, experiment):
    recipe = [f"+experiment={experiment}"] if experiment else []
    for debug in ("tiny", "overfit"):
        cfg = compose([*recipe, f"debug={debug}"])
        assert cfg.task_name == "debug"
        for stage in plan_run(cfg).stages:  # the phase's own debug sizes validate against its schema
            assert "debug" not in stage.cfg.phase
    tiny = plan_run(compose([*recipe, "debug=tiny"])).stages[0].cfg
    if experiment == "connect4_alphazero":
        assert tiny.phase.iterations == 2 and tiny.model.channels == 8
    elif experiment == "independent_dqn":
        assert tiny.phase.total_env_steps == 400
    else:
        assert tiny.phase.rollout_steps == 16 and tiny.env.num_envs == 2


@pytest.mark.parametrize("experiment", EXPERIMENTS)
def test_debug_sizes_leave_every_callback_buildable(compose, experiment):
    # sizes of a callback the recipe dropped (null) must not bring it back without a _target_
    recipe = [f"+experiment={experiment}"] if experiment else []
    for debug in ("tiny", "overfit"):
        for stage in plan_run(compose([*recipe, f"debug={debug}"])).stages:
            for bag in (stage.cfg.phase.get("callbacks"), stage.cfg.get("callbacks")):
                for name, node in (bag or {}).items():
                    assert node is None or "_target_" in node, f"debug={debug} stage {stage.name}: callback {name}"


def test_command_line_values_win_over_debug_sizes(compose):
    stage = plan_run(compose(["debug=tiny", "phase.rollout_steps=32", "env.num_envs=3"])).stages[0]
    assert stage.cfg.phase.rollout_steps == 32 and stage.cfg.env.num_envs == 3
    assert stage.cfg.phase.total_frames == 96  # the rest of the tiny sizes still apply


def test_debug_sizes_win_over_the_recipe_and_lose_to_the_command_line(compose):
    # autobattler_selfplay's body sets 3,000,000 frames and 128 envs; its tiny sizes 512 and 16
    # (conf/debug_sizes/recipe/tiny/), over phase ppo's 16-step rollouts.
    recipe = ["+experiment=autobattler_selfplay", "debug=tiny"]
    tiny = plan_run(compose(recipe)).stages[0].cfg
    assert (tiny.phase.total_frames, tiny.env.num_envs, tiny.phase.rollout_steps) == (512, 16, 16)
    mine = plan_run(compose([*recipe, "phase.total_frames=256", "env.num_envs=8"])).stages[0].cfg
    assert (mine.phase.total_frames, mine.env.num_envs, mine.phase.rollout_steps) == (256, 8, 16)


def test_command_line_values_win_over_a_pipeline_stages_debug_sizes(compose):
    # cartpole_bc_ppo's ppo stage: 51,200 frames and a gate at 400 in the recipe, 96 frames
    # (phase ppo's tiny sizes, at pipeline.stages.ppo) and a gate at 5 (the recipe's) in a tiny run.
    recipe = ["+experiment=cartpole_bc_ppo", "debug=tiny"]
    stages = {stage.name: stage.cfg for stage in plan_run(compose(recipe)).stages}
    assert stages["ppo"].phase.total_frames == 96 and stages["ppo"].transition.gate.threshold == 5
    mine = {stage.name: stage.cfg for stage in plan_run(compose(
        [*recipe, "pipeline.stages.ppo.phase.total_frames=64", "pipeline.stages.ppo.transition.gate.threshold=7",
         "pipeline.stages.bc.phase.max_epochs=3"])).stages}
    assert mine["ppo"].phase.total_frames == 64 and mine["ppo"].transition.gate.threshold == 7
    assert mine["ppo"].phase.rollout_steps == 16  # the rest of the stage's tiny sizes still apply
    assert mine["bc"].phase.max_epochs == 3 and mine["bc"].phase.batch_size == 64


def test_alphazero_config_errors_name_the_key(compose):
    from meeple.errors import ConfigError

    for override, message in [
        ("+phase.selfplay.num_worker=2", r"phase.selfplay.num_worker is not a self-play engine option; accepted: .*num_workers"),
        ("phase.game=go", r"phase.game='go' is not allowed; accepted: .*connect4"),
        ("phase.gate.threshold=0", r"phase.gate.threshold=0.0 is not allowed"),
        ("phase.min_replay=10000000", r"phase.min_replay=10000000 is not allowed; accepted: an integer in \[0, phase.replay_size"),
        ("phase.eval.replays=-1", r"phase.eval.replays=-1 is not allowed; accepted: an integer >= 0 \(0: no replays\)"),
    ]:
        with pytest.raises(ConfigError, match=message):
            build_run(compose(["+experiment=connect4_alphazero", override]), check_hardware=False)


@pytest.mark.parametrize("override, message", [
    ("hardware.data_workers=-1", r"hardware.data_workers=-1 is not allowed; accepted: an integer >= 0"),
    ("hardware.model_scale=huge", r"hardware.model_scale='huge' is not allowed; accepted: small, large"),
    ("hardware.prefetch_factor=0", r"hardware.prefetch_factor=0 is not allowed; accepted: an integer >= 1"),
])
def test_hardware_data_and_scale_errors_name_the_key(compose, override, message):
    from meeple.errors import ConfigError

    with pytest.raises(ConfigError, match=message):
        build_run(compose([override]), check_hardware=False)
