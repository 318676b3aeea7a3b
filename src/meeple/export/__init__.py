"""Any phase's trained policy as an ONNX model: ``python -m meeple.export <run or checkpoint>
--out policy.onnx`` (docs/export.md).

``load_policy`` rebuilds a checkpoint's policy as a plain module ``(observation[, action_mask])
-> (masked logits[, value])``; ``write_policy`` exports it through ``torch.onnx.export``
(dynamo), checks onnxruntime against eager torch and writes the file and its JSON sidecar.
Not imported by training: onnx, onnxruntime and onnxscript are the optional ``export`` extra.
"""

from meeple.export.policy import (
    MASKED_LOGIT,
    ExportedPolicy,
    ExportError,
    LoadedPolicy,
    load_policy,
)

__all__ = ["MASKED_LOGIT", "ExportError", "ExportedPolicy", "LoadedPolicy", "load_policy"]
