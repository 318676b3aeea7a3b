"""How a stage starts from the stage before it: the gate file, the gate check, carried weights.

The previous stage's best checkpoint is copied to ``gates/<stage name>.pt`` when it ends. The
next stage loads that file (verified, never a fallback), checks the transition's gate against
the metrics recorded in it, and loads the named parts of its weights (``carry: [actor,
critic]``) into the new module before training (and before a resume checkpoint, which then
overwrites them with the same values). A new optimiser is always built; the learning rate may
warm up from a fraction of its peak.

The weights may come from an earlier stage's gate instead (``source: <stage>``; the gate is
still checked on the stage just before), and a distillation stage gets a frozen teacher from
another gate (``teacher: <stage>``, handed to the module's ``set_teacher``). The plan has checked
that the stage's phase kind declares the hooks (``meeple.phases.registry.Hook``) a transition uses. ``widen_inputs``
lets a network whose stem reads more input planes start from a narrower one's weights; ``drop_params``
lets one start from a wider one's (a teacher's, without the weights over its privileged planes).
"""

from __future__ import annotations

import fnmatch
import json
import logging
import operator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from meeple.checkpoint.callback import gate_path, load_gate
from meeple.checkpoint.io import CheckpointError, write_text_atomic
from meeple.checkpoint.run_dir import RunDirectory
from meeple.config.schema import Gate, Transition, gate_conditions
from meeple.errors import ConfigError, GateFailed
from meeple.phases.registry import Hook

log = logging.getLogger(__name__)

_OPS = {">=": operator.ge, ">": operator.gt, "<=": operator.le, "<": operator.lt}
GATE_RECORD = "gate.json"


@dataclass
class StageStart:
    """What a stage takes from the stages before it (None for a first stage)."""

    transition: Transition
    gate_file: Path | None = None  # where the carried weights come from
    checkpoint: dict[str, Any] | None = None
    teacher_file: Path | None = None
    teacher: dict[str, Any] | None = None  # the teacher's gate checkpoint

    def apply(self, module: torch.nn.Module, hooks: frozenset[Hook]) -> None:
        """Carry the named weights into ``module``; set up its teacher, warm-up and reference
        policy through the ``hooks`` its phase kind declares (the plan refused a transition that
        needs one the kind lacks)."""
        if self.checkpoint is not None and self.transition.carry:
            carry_weights(module, self.checkpoint["model_state_dict"], self.transition.carry, self.gate_file,
                          widen_inputs=self.transition.widen_inputs,
                          keep_new=self.transition.keep_new_params, drop=self.transition.drop_params)
        if self.teacher is not None:
            module.set_teacher(self.teacher, self.teacher_file)
        warmup = self.transition.warmup
        if warmup.epochs > 0:
            module.set_warmup(warmup.epochs, warmup.start_fraction)
        if self.checkpoint is not None and Hook.REFERENCE in hooks and module.wants_reference():
            module.set_reference_from_actor()  # plan_run checked that the actor was carried


def open_start(run_dir: RunDirectory, transition: Transition, *, previous: Any, source: Any, teacher: Any,
               label: str, experiment: str) -> StageStart:
    """Check the transition's gate on ``previous``'s gate file (GateFailed; the verdict goes to
    ``phase{previous}/gate.json``), then load the gate the weights come from (``source``'s, the
    same file unless ``transition.source`` names an earlier stage) and the teacher's.

    ``previous``, ``source`` and ``teacher`` (or None) are stages: ``index``, ``name``, ``label``."""
    path, checkpoint = _load_stage_gate(run_dir, previous, label, experiment)
    gates = gate_conditions(transition)
    if gates:
        check_gate(gates, checkpoint.get("metrics", {}), path, run_dir.phase_dir(previous.index) / GATE_RECORD,
                   previous_label=previous.label, label=label)
    if source.name != previous.name:
        path, checkpoint = _load_stage_gate(run_dir, source, label, experiment)
    start = StageStart(transition, path, checkpoint)
    if teacher is not None:
        start.teacher_file, start.teacher = _load_stage_gate(run_dir, teacher, label, experiment)
    log.info("%s starts from %s (carrying %s%s)", label, path, ", ".join(transition.carry) or "nothing",
             f"; teacher {start.teacher_file}" if teacher is not None else "")
    return start


def _load_stage_gate(run_dir: RunDirectory, stage: Any, label: str, experiment: str) -> tuple[Path, dict[str, Any]]:
    path = gate_path(run_dir, stage.name)
    if not path.is_file():
        raise ConfigError(
            f"{label} starts from {stage.label}'s gate {path}, which does not exist; run that stage first "
            f"(python train.py +experiment={experiment} pipeline.only={stage.name}), or name a run that has it "
            f"with pipeline.source=<run dir>"
        )
    try:
        return path, load_gate(path)
    except CheckpointError as err:
        raise ConfigError(f"{label}: the gate {path} is unusable ({err}); no fallback: rerun {stage.label}") from None


def gate_checks(gates: list[Gate], metrics: dict[str, float]) -> list[dict[str, Any]]:
    """Each condition with the value ``metrics`` holds for it and whether it passed (a nan value
    fails every comparison); every gate metric must be in ``metrics``."""
    checks = []
    for gate in gates:
        value = float(metrics[gate.metric])
        checks.append(dict(metric=gate.metric, value=value, op=gate.op, threshold=gate.threshold,
                           passed=bool(_OPS[gate.op](value, gate.threshold))))
    return checks


def check_gate(gates: Gate | list[Gate], metrics: dict[str, float], path: Path, record_path: Path, *,
               previous_label: str, label: str) -> None:
    """Raise GateFailed (one line: stage, metric, value, threshold) unless every condition holds;
    the verdict is written to ``record_path`` either way."""
    gates = [gates] if isinstance(gates, Gate) else list(gates)
    missing = [g.metric for g in gates if g.metric not in metrics]
    if missing:
        raise GateFailed(
            f"gate before {label}: {previous_label} recorded no {missing[0]!r} in {path.name}; recorded: "
            f"{', '.join(sorted(metrics)) or 'nothing'}"
        )
    checks = gate_checks(gates, metrics)
    passed = all(c["passed"] for c in checks)
    # One condition keeps the flat record of earlier versions; several list their checks.
    record = dict(checks[0]) if len(checks) == 1 else dict(checks=checks)
    record.update(passed=passed, gate_file=str(path), next_stage=label)
    record_path.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(record_path, json.dumps(record, indent=2) + "\n")
    failed = [c for c in checks if not c["passed"]]
    if failed:
        what = "; ".join(f"{c['metric']} = {c['value']:.6g}, needs {c['op']} {c['threshold']:g}" for c in failed)
        raise GateFailed(f"gate failed: {previous_label} {what}; {label} did not start")
    for c in checks:
        log.info("gate passed: %s %s = %.6g %s %g", previous_label, c["metric"], c["value"], c["op"], c["threshold"])


def adapted_state(module: torch.nn.Module, state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """A copy of ``state`` with the keys every submodule's ``adapt_carried_state(state, prefix)``
    renames to its own layout (e.g. a network's single head moved into its container of heads)."""
    state = dict(state)
    for name, sub in module.named_modules(remove_duplicate=False):
        adapt = getattr(sub, "adapt_carried_state", None)
        if callable(adapt):
            adapt(state, f"{name}." if name else "")
    return state


def carry_weights(module: torch.nn.Module, state: dict[str, torch.Tensor], parts: list[str], source: Path, *,
                  widen_inputs: bool = False, keep_new: bool = False, drop: list[str] | None = None) -> None:
    """Load every ``<part>.*`` weight of ``state`` into ``module``: the parts must match exactly
    (same keys and shapes; with ``widen_inputs`` a tensor may be wider along dim 1, see the
    module doc; with ``keep_new`` this stage's model may have tensors the gate lacks, e.g. a head
    that starts at zero, and they keep their initialisation); everything else in ``module``
    keeps its initialisation. A submodule with an ``adapt_carried_state(state, prefix)`` method
    first renames the gate's keys under its prefix to its own layout (a plugin's network whose
    layout depends on its options, e.g. one head alone or several in a container). The gate's
    tensors under the carried parts that match a ``drop`` pattern (fnmatch) are left out first."""
    state = adapted_state(module, state)
    if drop:
        state = _dropped(state, [p + "." for p in parts], drop, source)
    own = module.state_dict()
    for part in parts:
        prefix = part + "."
        theirs = {k: v for k, v in state.items() if k.startswith(prefix)}
        mine = {k for k in own if k.startswith(prefix)}
        if not mine:
            raise ConfigError(f"transition.carry: {type(module).__name__} has no part {part!r}; accepted: "
                              f"{', '.join(sorted({k.split('.')[0] for k in own}))}")
        missing, extra = sorted(mine - set(theirs)), sorted(set(theirs) - mine)
        if missing and keep_new and not extra:
            log.info("transition.keep_new_params: %d tensors of part %r start from their initialisation "
                     "(%s)", len(missing), part, ", ".join(missing[:4]))
        elif missing or extra:
            hint = "" if keep_new or extra else " (transition.keep_new_params=true keeps tensors the gate lacks)"
            raise ConfigError(f"transition.carry: part {part!r} of {source} does not match this stage's model "
                              f"(missing {missing[:3]}, unexpected {extra[:3]}); the stages need the same model{hint}")
        for key, value in list(theirs.items()):
            if own[key].shape == value.shape:
                continue
            if widen_inputs and _widens(value.shape, own[key].shape):
                wide = torch.zeros_like(own[key])
                wide[:, : value.shape[1]] = value
                theirs[key] = wide
                continue
            hint = "" if widen_inputs else " (transition.widen_inputs=true accepts a stem wider along dim 1)"
            raise ConfigError(f"transition.carry: {key} has shape {tuple(value.shape)} in {source} but "
                              f"{tuple(own[key].shape)} here; the stages need the same model{hint}")
        module.load_state_dict(theirs, strict=False)


def _dropped(state: dict[str, torch.Tensor], prefixes: list[str], patterns: list[str],
             source: Path) -> dict[str, torch.Tensor]:
    """``state`` without the carried tensors that match a pattern; each pattern must match one."""
    carried = [k for k in state if k.startswith(tuple(prefixes))]
    gone: set[str] = set()
    for pattern in patterns:
        hits = {k for k in carried if fnmatch.fnmatchcase(k, pattern)}
        if not hits:
            raise ConfigError(f"transition.drop_params: {pattern!r} matches no carried tensor of {source}; "
                              f"its carried keys are like {', '.join(carried[:4])}")
        gone |= hits
    log.info("transition.drop_params: %d tensors of %s are not carried (%s)", len(gone), source,
             ", ".join(sorted(gone)[:4]))
    return {k: v for k, v in state.items() if k not in gone}


def _widens(narrow: torch.Size, wide: torch.Size) -> bool:
    """``wide`` equals ``narrow`` except for a larger dim 1 (more input channels)."""
    return (len(narrow) == len(wide) >= 2 and narrow[0] == wide[0] and narrow[2:] == wide[2:]
            and narrow[1] < wide[1])
