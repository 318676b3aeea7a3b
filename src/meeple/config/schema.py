"""Typed schemas shared by every run (hardware, transition) and the helpers phase schemas use.

Each phase kind keeps its own schema and checks in its package (``meeple.phases.<kind>.schema``);
``meeple.phases.registry.validate`` runs them all before any work and raises one
:class:`~meeple.errors.ConfigError` naming the key and what is accepted.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from meeple.errors import ConfigError

PRECISIONS = ("32-true", "32", "16-mixed", "bf16-mixed", "bf16-true", "16-true", "64-true")
ACCELERATORS = ("cpu", "cuda", "mps", "auto")
MATMUL_PRECISIONS = ("highest", "high", "medium")


@dataclass
class Hardware:
    name: str
    accelerator: str
    devices: int
    precision: str
    compile: bool
    matmul_precision: str
    torch_threads: int
    num_envs: int
    env_workers: int
    # Data loading of dataset-fed phases (BC from shards): DataLoader workers per loader, pinned
    # host memory for faster copies to the GPU, and batches each worker prepares ahead.
    data_workers: int = 0
    pin_memory: bool = False
    prefetch_factor: int = 2
    # Which size of a recipe's network this machine trains: recipes map it to depth x width
    # (e.g. +experiment=phase1: small = a few narrow blocks, large = 40 x 256).
    model_scale: str = "small"
    # auto: one learner process (devices > 1 only for phases that use several themselves);
    # ddp: one learner process per device and node, gradients averaged (meeple.distributed).
    strategy: str = "auto"
    num_nodes: int = 1


MODEL_SCALES = ("small", "large")
STRATEGIES = ("auto", "ddp")


@dataclass
class Gate:
    """Must hold for the previous stage's gate checkpoint before the next stage starts."""

    metric: str
    op: str = ">="  # one of GATE_OPS
    threshold: float = 0.0


@dataclass
class Warmup:
    epochs: int = 0  # epochs (PPO: rollouts) of linear warm-up at the start of the stage; 0: none
    start_fraction: float = 0.1  # the learning rate starts at this fraction of its peak


@dataclass
class Transition:
    """How a stage starts from the stage before it (conf/transition/)."""

    name: str
    carry: list[str] = field(default_factory=list)  # state-dict parts loaded from the gate: actor, critic ...
    reset_optimizer: bool = True
    warmup: Warmup = field(default_factory=Warmup)
    # One condition {metric, op, threshold} or a list of them (all must hold); see gate_conditions.
    gate: Any = None
    # The earlier stage whose gate the weights come from (null: the stage just before). The gate
    # conditions are always checked on the stage just before: it must pass for this one to start.
    source: str | None = None
    # An earlier stage whose gate is this stage's frozen teacher (distillation), or null.
    teacher: str | None = None
    # Carried tensors wider than the gate's along dim 1 (a stem that reads more input planes) take
    # the gate's values in the leading slice and zeros in the rest, so the wider network starts
    # computing exactly what the gate's did.
    widen_inputs: bool = False
    # Tensors this stage's model has and the gate lacks (a new head that starts at zero, e.g. a
    # model option that adds logits) keep their initialisation instead of failing the carry.
    keep_new_params: bool = False
    # Glob patterns (fnmatch) of the gate's tensors that are not carried, e.g. the convolution over
    # privileged planes when a teacher's weights start a student that reads the public planes only.
    # Each pattern must match a carried tensor; the rest must still fit the stage's model.
    drop_params: list[str] = field(default_factory=list)


GATE_OPS = (">=", ">", "<=", "<")


# Keys of a phase node that belong to the stage around it, not to the phase kind's schema:
# the callbacks the phase needs.
PHASE_ENVELOPE_KEYS = ("callbacks",)


def checked(cfg: DictConfig, key: str, schema: type) -> Any:
    """The group as a typed object; unknown keys and bad types become ConfigError."""
    node = cfg.get(key)
    if node is None:
        raise ConfigError(f"config group {key!r} is missing; pick one with {key}=<option>")
    try:
        values = OmegaConf.to_container(node, resolve=True)
        if key == "phase":
            for envelope in PHASE_ENVELOPE_KEYS:
                values.pop(envelope, None)
        merged = OmegaConf.merge(OmegaConf.structured(schema), values)
        return OmegaConf.to_object(merged)
    except OmegaConfBaseException as err:
        where = f"{key}.{err.full_key}" if getattr(err, "full_key", None) else key
        msg = str(err).splitlines()[0]
        wanted = _CONVERSION.search(msg) or _BOOL.search(msg)
        if wanted is not None:  # a value of the wrong type: say which type is accepted
            kind = _TYPE_NAMES.get(wanted.group(2), wanted.group(2).lower())
            raise ConfigError(f"{where}={wanted.group(1)!r} is not allowed; accepted: {kind}") from None
        accepted = ", ".join(f.name for f in schema.__dataclass_fields__.values())
        raise ConfigError(f"{where}: {msg} (accepted keys of {key}: {accepted})") from None


# OmegaConf: "Value 'abc' of type 'str' could not be converted to Float"
_CONVERSION = re.compile(r"Value '(.*)' of type '\w+' could not be converted to (\w+)")
_BOOL = re.compile(r"Value '(.*)' is not a valid (bool)")
_TYPE_NAMES = {"bool": "true or false", "Float": "a float", "Integer": "an integer", "Boolean": "true or false", "String": "a string"}


def require(ok: bool, key: str, value: Any, accepted: str) -> None:
    if not ok:
        raise ConfigError(f"{key}={value!r} is not allowed; accepted: {accepted}")


def check_hardware(cfg: DictConfig) -> Hardware:
    """The typed ``hardware`` group (unknown keys, types and values fail here)."""
    hw: Hardware = checked(cfg, "hardware", Hardware)
    require(hw.accelerator in ACCELERATORS, "hardware.accelerator", hw.accelerator, ", ".join(ACCELERATORS))
    require(hw.precision in PRECISIONS, "hardware.precision", hw.precision, ", ".join(PRECISIONS))
    require(
        hw.matmul_precision in MATMUL_PRECISIONS, "hardware.matmul_precision", hw.matmul_precision,
        ", ".join(MATMUL_PRECISIONS),
    )
    for name in ("devices", "torch_threads", "num_envs", "env_workers", "prefetch_factor", "num_nodes"):
        require(getattr(hw, name) >= 1, f"hardware.{name}", getattr(hw, name), "an integer >= 1")
    require(hw.data_workers >= 0, "hardware.data_workers", hw.data_workers, "an integer >= 0 (0: in-process)")
    require(hw.model_scale in MODEL_SCALES, "hardware.model_scale", hw.model_scale, ", ".join(MODEL_SCALES))
    require(hw.strategy in STRATEGIES, "hardware.strategy", hw.strategy, ", ".join(STRATEGIES))
    require(hw.num_nodes == 1 or hw.strategy == "ddp", "hardware.num_nodes", hw.num_nodes,
            "1 (several nodes need hardware.strategy=ddp)")
    return hw


def check_transition(tr: Transition) -> None:
    require(all(isinstance(part, str) and part for part in tr.carry), "transition.carry", tr.carry,
             "a list of state-dict parts (e.g. [actor, critic]); [] carries nothing")
    require(tr.reset_optimizer, "transition.reset_optimizer", tr.reset_optimizer,
             "true (stages build new optimisers; optimiser state does not carry across stages)")
    require(tr.warmup.epochs >= 0, "transition.warmup.epochs", tr.warmup.epochs, "an integer >= 0")
    require(0 < tr.warmup.start_fraction <= 1, "transition.warmup.start_fraction", tr.warmup.start_fraction,
             "a float in (0, 1]")
    gate_conditions(tr)  # raises on a malformed gate


def gate_conditions(tr: Transition) -> list[Gate]:
    """The transition's gate as a list of conditions ([] when it has none), each checked."""
    node = tr.gate
    if node is None:
        return []
    items = node if isinstance(node, list) else [node]
    accepted = "{metric: <name>, op: one of " + " ".join(GATE_OPS) + ", threshold: <float>}, or a list of those"
    gates = []
    for i, item in enumerate(items):
        key = "transition.gate" if not isinstance(node, list) else f"transition.gate[{i}]"
        if isinstance(item, Gate):
            gates.append(item)
            continue
        if not isinstance(item, dict) or set(item) - {"metric", "op", "threshold"} or "metric" not in item:
            raise ConfigError(f"{key}={item!r} is not allowed; accepted: {accepted}")
        try:
            gate = Gate(metric=str(item["metric"]), op=str(item.get("op", ">=")),
                        threshold=float(item.get("threshold", 0.0)))
        except (TypeError, ValueError):
            raise ConfigError(f"{key}.threshold={item.get('threshold')!r} is not allowed; accepted: a float") from None
        require(gate.op in GATE_OPS, f"{key}.op", gate.op, ", ".join(GATE_OPS))
        gates.append(gate)
    if isinstance(node, list) and not gates:
        raise ConfigError(f"transition.gate=[] is not allowed; accepted: null (no gate) or {accepted}")
    return gates


def check_accelerator(hw: Hardware) -> None:
    """A GPU profile on a machine without CUDA fails here, before any work."""
    import torch

    if hw.accelerator == "cuda" and not torch.cuda.is_available():
        raise ConfigError(
            f"hardware={hw.name} needs a CUDA GPU, but torch.cuda.is_available() is False on this machine; "
            "run with hardware=cpu"
        )
    if hw.accelerator == "mps" and not torch.backends.mps.is_available():
        raise ConfigError(f"hardware={hw.name} needs Apple MPS, which is not available here; run with hardware=cpu")
