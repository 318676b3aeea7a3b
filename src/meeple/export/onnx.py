"""ONNX export of an :class:`~meeple.export.policy.ExportedPolicy`, its parity check and the write.

``torch.onnx.export(..., dynamo=True)`` traces the policy with ``torch.export`` (batch dimension
symbolic), the file is written beside its destination under a temporary name, loaded back in
onnxruntime and compared with eager torch on the given observations; only an export within
tolerance is renamed into place, followed by its JSON sidecar (``<out>.json``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import tempfile
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from meeple.errors import MeepleError
from meeple.export.policy import MASKED_LOGIT, ExportError, LoadedPolicy, Samples
from meeple.nets.actor_critic import MASK_KEY, OBS_KEY
from meeple.nets.caller_input import CallerInput

OPSET = 18
TOLERANCE = 1e-4
INSTALL_HINT = 'pip install "meeple[export]"'
_REQUIRED = ("onnx", "onnxruntime", "onnxscript")


def require_onnx() -> None:
    """The export extra is installed, or one line saying how to install it."""
    import importlib.util

    missing = [name for name in _REQUIRED if importlib.util.find_spec(name) is None]
    if missing:
        raise MeepleError(f"ONNX export needs {', '.join(missing)}: {INSTALL_HINT}")


def export_onnx(loaded: LoadedPolicy, path: Path, *, opset: int = OPSET) -> None:
    """Trace ``loaded.policy`` and write the ONNX model to ``path`` (batch dimension dynamic)."""
    policy = loaded.policy
    # A module that knows it cannot be traced (it calls native code) says why in one line.
    for module in policy.modules():
        reason = getattr(module, "onnx_export_blocker", None)
        if reason:
            raise ExportError(f"{loaded.file}: model {loaded.model_target!r} cannot be exported to ONNX: {reason}")
    # Batch 2: torch.export specialises a dimension seen as 0 or 1 into a constant.
    example = random_inputs(loaded, 2)
    batch = torch.export.Dim("batch")
    # forward(observation, *rest): torch.export reads *rest as one tuple argument, present if non-empty
    dynamic = ({0: batch}, *([tuple({0: batch} for _ in example[1:])] if len(example) > 1 else []))
    try:
        with torch.no_grad(), _quiet_exporter():
            program = torch.onnx.export(
                policy, example, dynamo=True, opset_version=opset, input_names=policy.input_names(),
                output_names=policy.output_names(), dynamic_shapes=dynamic, verbose=False,
            )  # fmt: skip
        program.save(str(path))
    except MeepleError:
        raise
    except Exception as err:  # torch.export / onnxscript: an op or control flow it cannot trace
        first = " ".join(str(err).split())[:400]
        raise ExportError(
            f"{loaded.file}: model {loaded.model_target!r} cannot be exported to ONNX "
            f"({type(err).__name__}: {first})"
        ) from err


@contextlib.contextmanager
def _quiet_exporter():
    """The exporter logs a warning per torchvision op it skips and warns about axis names:
    noise on every export, unrelated to this policy."""
    logger = logging.getLogger("torch.onnx")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            warnings.simplefilter("ignore", FutureWarning)
            yield
    finally:
        logger.setLevel(level)


def random_inputs(loaded: LoadedPolicy, n: int) -> tuple[torch.Tensor, ...]:
    """Example inputs to trace with (the caller inputs as zeros: their values do not shape the graph)."""
    from meeple.export.policy import random_samples

    s = random_samples(loaded, n, seed=0)
    given = tuple(torch.zeros(n, *c.shape) for c in loaded.policy.caller_inputs)
    return (s.observation, *([s.action_mask] if loaded.policy.has_mask else []), *given)


def session(path: Path | str, *, threads: int | None = None):
    """An onnxruntime CPU session (``threads``: intra- and inter-op threads; None = its default)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    if threads is not None:
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = threads
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def feeds(observation: torch.Tensor, action_mask: torch.Tensor | None,
          given: Sequence[CallerInput] = ()) -> dict[str, np.ndarray]:  # fmt: skip
    """onnxruntime's inputs; ``given``: the policy's caller inputs, computed here as a caller would."""
    out = {OBS_KEY: observation.numpy()}
    if action_mask is not None:
        out[MASK_KEY] = action_mask.numpy()
    for c in given:
        out[c.name] = c.compute(observation).to(torch.float32).numpy()
    return out


@dataclass
class Parity:
    """eager torch vs onnxruntime on the same observations."""

    observations: int
    batches: list[int]
    max_abs_logits: float
    max_abs_value: float | None
    argmax_agree: bool  # onnxruntime's masked argmax == eager torch's (== the actor's greedy action)
    recorded: bool

    def ok(self, tolerance: float) -> bool:
        worst = max(self.max_abs_logits, self.max_abs_value or 0.0)
        return worst <= tolerance and self.argmax_agree

    def line(self) -> str:
        value = "" if self.max_abs_value is None else f", value {self.max_abs_value:.3g}"
        kind = "recorded" if self.recorded else "random"
        return (f"parity on {self.observations} {kind} observations (batches {self.batches}): max |logits "
                f"diff| {self.max_abs_logits:.3g}{value}; masked argmax agrees: {self.argmax_agree}")  # fmt: skip


def check_parity(loaded: LoadedPolicy, path: Path | str, samples: Samples, batches: tuple[int, ...] = (1, 64)) -> Parity:
    """Run the ONNX file and the eager policy on ``samples`` in chunks of each batch size."""
    sess = session(path)
    policy = loaded.policy
    n = len(samples.observation)
    worst_logits, worst_value, agree = 0.0, None if not policy.has_value else 0.0, True
    used = []
    for batch in batches:
        if batch > n:
            continue
        used.append(batch)
        for start in range(0, n - batch + 1, batch):
            obs = samples.observation[start : start + batch]
            mask = None if samples.action_mask is None else samples.action_mask[start : start + batch]
            with torch.no_grad():
                eager = policy(obs, mask) if policy.has_mask else policy(obs)
            eager = eager if isinstance(eager, tuple) else (eager,)
            onnx_out = sess.run(None, feeds(obs, mask, policy.caller_inputs))  # eager computed its own
            worst_logits = max(worst_logits, float(np.abs(onnx_out[0] - eager[0].numpy()).max()))
            if policy.has_value:
                worst_value = max(worst_value, float(np.abs(onnx_out[1] - eager[1].numpy()).max()))
            reference = eager[0].argmax(-1)
            if samples.greedy is not None:
                legal = mask.any(-1) if mask is not None else torch.ones(batch, dtype=torch.bool)
                # the actor's own greedy action is the reference where any action is legal
                reference = torch.where(legal, samples.greedy[start : start + batch], reference)
            agree &= bool((torch.from_numpy(onnx_out[0]).argmax(-1) == reference).all())
    if not used:
        raise ExportError(f"no batch size in {batches} fits {n} observations")
    return Parity(n, used, worst_logits, worst_value, agree, samples.recorded)


def sidecar(loaded: LoadedPolicy, parity: Parity, *, opset: int) -> dict[str, Any]:
    import onnxruntime

    from meeple import __version__

    policy = loaded.policy
    inputs: dict[str, Any] = {
        OBS_KEY: {"shape": ["batch", *loaded.observation_shape], "dtype": str(loaded.observation_dtype).removeprefix("torch.")}
    }
    if policy.has_mask:
        inputs[MASK_KEY] = {"shape": ["batch", loaded.num_actions], "dtype": "bool"}
    for c in policy.caller_inputs:
        inputs[c.name] = {"shape": ["batch", *c.shape], "dtype": "float32", "computed_by": c.how}
    outputs: dict[str, Any] = {"logits": {"shape": ["batch", loaded.num_actions], "dtype": "float32"}}
    if policy.has_value:
        outputs["value"] = {"shape": ["batch"], "dtype": "float32"}
    return {
        "source_checkpoint": str(loaded.file.resolve()),
        "global_step": loaded.global_step,
        "checkpoint_timestamp": loaded.timestamp,
        "phase": loaded.phase,
        "model": loaded.model_target,
        "env": loaded.env,
        "inputs": inputs,
        "outputs": outputs,
        "num_actions": loaded.num_actions,
        "masked_logit": MASKED_LOGIT if policy.has_mask else None,
        "value": "critic state value" if policy.has_value else None,
        "opset": opset,
        "parity": {**vars(parity)},
        "meeple_version": __version__,
        "torch_version": torch.__version__,
        "onnxruntime_version": onnxruntime.__version__,
    }


def write_policy(loaded: LoadedPolicy, out: str | os.PathLike, *, opset: int = OPSET,
                 tolerance: float = TOLERANCE, samples: Samples | None = None) -> tuple[Path, Parity]:  # fmt: skip
    """Export, check against eager torch, then rename into ``out`` and write ``out.json``.

    Nothing is written at ``out`` unless the parity holds within ``tolerance``; the temporary
    file is removed whatever happens.
    """
    from meeple.jsonio import write_json_atomic

    require_onnx()
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        export_onnx(loaded, tmp, opset=opset)
        parity = check_parity(loaded, tmp, samples if samples is not None else loaded.samples(64))
        if not parity.ok(tolerance):
            raise ExportError(
                f"{loaded.file}: the ONNX model does not match eager torch ({parity.line()}; tolerance "
                f"{tolerance:g}); nothing written to {out}"
            )
        os.chmod(tmp, 0o644)
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
    write_json_atomic(out.with_name(out.name + ".json"), sidecar(loaded, parity, opset=opset))
    return out, parity
