"""The run plan's typed records and the hooks phase kinds declare (no training: plans only)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from meeple.config.run import CheckpointPolicy, RunIdentity, TrackingPlan
from meeple.errors import ConfigError
from meeple.phases.hooks import check_hooks
from meeple.phases.lr_schedule import lr_factor
from meeple.phases.registry import Hook, phase_kind
from meeple.pipeline.plan import plan_run

TWO_STAGES = [
    "debug=tiny", "seed=5",
    "+phase@pipeline.stages.a.phase=ppo", "+transition@pipeline.stages.a.transition=none",
    "+phase@pipeline.stages.b.phase=ppo", "+transition@pipeline.stages.b.transition=finetune",
    "+pipeline.order=[a,b]",
]


def test_the_plan_hands_on_typed_records(compose):
    cfg = compose([*TWO_STAGES, "checkpoint.keep=3", "+pipeline.stages.b.checkpoint.keep=7", "tracking=none"])
    plan = plan_run(cfg)
    assert plan.identity == RunIdentity(experiment=str(cfg.experiment_name), task=str(cfg.task_name), seed=5,
                                        seed_given=True, resume=False, resume_dir=None)
    assert plan.checkpoints == CheckpointPolicy(root=Path(cfg.checkpoint.root), keep=3, every_n_rollouts=1,
                                                min_interval_s=float(cfg.checkpoint.min_interval_s),
                                                monitor=str(cfg.checkpoint.monitor), mode="max", gate=None)
    assert plan.tracking == TrackingPlan(uri=None, experiment=str(cfg.tracking.experiment), log_config_artifact=False)
    a, b = plan.stages
    # Each stage keeps its own values; the one before another writes that stage's gate.
    assert (a.checkpoint.keep, a.checkpoint.gate) == (3, "a")
    assert (b.checkpoint.keep, b.checkpoint.gate) == (7, None)
    none = plan_run(compose(["debug=tiny", "checkpoint=none"]))
    assert none.checkpoints is None and none.stages[0].checkpoint is None


def test_a_stage_checkpoint_mistake_names_the_stage(compose):
    with pytest.raises(ConfigError, match=r"stage 'b': checkpoint.keep=0 is not allowed; accepted: an integer >= 1"):
        plan_run(compose([*TWO_STAGES, "+pipeline.stages.b.checkpoint.keep=0"]))


@pytest.mark.parametrize("overrides, message", [
    (["+experiment=cartpole_bc_ppo", "pipeline.stages.bc.transition.warmup.epochs=2"],
     r"phase 0 \(bc\): transition.warmup.epochs=2: phase=bc has no learning-rate warm-up; accepted: 0"),
    ([*TWO_STAGES, "+pipeline.stages.b.transition.teacher=a"],
     r"phase 1 \(b\): transition.teacher='a': phase=ppo takes no teacher; accepted: null, or a distillation phase"),
    (["+experiment=independent_dqn", "resume=true"], "phase=dqn has no checkpoints to resume from yet"),
    (["debug=tiny", "checkpoint=none", "resume=true"], "resume=true needs checkpoints"),
])
def test_what_a_kind_does_not_declare_is_refused_by_the_plan(compose, overrides, message):
    with pytest.raises(ConfigError, match=message):
        plan_run(compose(overrides))


def test_a_module_without_a_declared_hook_fails_at_build():
    league = phase_kind("league")
    assert league.hooks == {Hook.WARMUP, Hook.REFERENCE, Hook.RUN_FOLDER}
    module = SimpleNamespace(set_warmup=lambda epochs, start: None, wants_reference=lambda: False,
                             set_reference_from_actor=lambda: None)
    with pytest.raises(TypeError, match="phase=league declares the run_folder hook, but its module SimpleNamespace "
                                        "has no use_run_folder"):
        check_hooks(league, module)
    module.use_run_folder = lambda folder, index: None
    check_hooks(league, module)


def test_one_schedule_for_rollouts_and_optimiser_steps():
    # A stage's warm-up (transition.warmup): from `start` at rollout 0, over the linear decay.
    rollouts = lr_factor(10, "linear", warmup=2, start=0.5)
    assert [rollouts(e) for e in (0, 1, 2, 10)] == [0.5, 0.75 * 0.9, 0.8, 0.0]
    assert lr_factor(10, "constant")(7) == 1.0
    # BC: warm-up steps first (its last at the peak), then the cosine to the floor.
    steps = lr_factor(100, "cosine", warmup=10, floor=0.1, warmup_first=True)
    assert [steps(s) for s in (0, 9, 10)] == [0.1, 1.0, 1.0] and abs(steps(100) - 0.1) < 1e-12
    with pytest.raises(ValueError, match="accepted: linear, cosine, constant"):
        lr_factor(10, "step")
