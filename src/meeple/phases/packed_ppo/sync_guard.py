"""A guard that fails on host synchronisation: for tests of loops that must stay on the device.

Inside ``with no_host_sync():`` reading a tensor's value on the host raises
:class:`HostSyncError`: ``.item()``, ``.tolist()``, ``.cpu()``, ``.numpy()``, and Python
branching or conversion on a tensor (``bool(t)``, ``if t:``, ``int(t)``, ``float(t)``).
That catches the habits that stall a GPU pipeline even when the loop runs on CPU, where
no real synchronisation exists. On CUDA, ``torch.cuda.set_sync_debug_mode("error")`` is
also set, so any synchronising CUDA call (a device-to-host copy, a nonzero) raises too.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

import torch

GUARDED = ("item", "tolist", "cpu", "numpy", "__bool__", "__int__", "__float__")


class HostSyncError(RuntimeError):
    """A tensor's value was read on the host inside a ``no_host_sync`` block."""


_lock = threading.Lock()


def _guarded(name: str, original):
    def method(self, *args, **kwargs):
        if getattr(_state, "active", False):
            raise HostSyncError(
                f"Tensor.{name}() reads a device value on the host inside a no-host-sync loop"
            )
        return original(self, *args, **kwargs)

    method.__name__ = name
    return method


_state = threading.local()


@contextlib.contextmanager
def no_host_sync(cuda: bool | None = None) -> Iterator[None]:
    """Fail on host reads of tensor values in this thread (and CUDA syncs when ``cuda``)."""
    cuda = torch.cuda.is_available() if cuda is None else cuda
    with _lock:
        originals = {name: getattr(torch.Tensor, name) for name in GUARDED}
        for name, original in originals.items():
            setattr(torch.Tensor, name, _guarded(name, original))
    previous_mode = torch.cuda.get_sync_debug_mode() if cuda else None
    _state.active = True
    try:
        if cuda:
            torch.cuda.set_sync_debug_mode("error")
        yield
    finally:
        _state.active = False
        if cuda:
            torch.cuda.set_sync_debug_mode(previous_mode)
        with _lock:
            for name, original in originals.items():
                setattr(torch.Tensor, name, original)
