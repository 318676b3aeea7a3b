"""torch.compile for the networks inside TorchRL modules (``hardware.compile``)."""

from __future__ import annotations

import torch
from tensordict.nn import TensorDictModule, TensorDictModuleBase, TensorDictSequential


def compile_networks(*modules: torch.nn.Module, **options) -> int:
    """Compile the plain ``nn.Module`` inside every TensorDictModule, in place.

    TensorDict plumbing stays eager (it graph-breaks anyway); parameters are
    shared with the compiled wrapper, so optimisers and collectors see the same
    tensors. Returns how many networks were compiled.
    """
    seen: set[int] = set()
    for root in modules:
        for sub in root.modules():
            # Leaves only: sequences iterate their children and must keep them eager.
            if not isinstance(sub, TensorDictModule) or isinstance(sub, TensorDictSequential):
                continue
            inner = sub.module
            if id(sub) in seen or isinstance(inner, TensorDictModuleBase) or hasattr(inner, "_orig_mod"):
                continue
            seen.add(id(sub))
            sub.module = torch.compile(inner, **options)
    return len(seen)
