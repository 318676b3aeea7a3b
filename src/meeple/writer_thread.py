"""One background thread that runs I/O tasks in order, for work the training loop need not wait for.

Checkpoint files (``meeple.checkpoint.io``) and MLflow metric batches (``meeple.tracking.mlflow``)
are written this way: the caller captures what it writes (bytes, floats) at once, so the result is
the same as a synchronous write, and only the waiting on disks and sqlite moves off the loop.

A failed task raises in the caller at its next :meth:`WriterThread.submit` or at :meth:`wait`,
so an error is never lost, only reported one call later.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any


class WriterThread:
    """Runs submitted tasks one at a time, in submission order, on a lazily started thread."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._executor: ThreadPoolExecutor | None = None
        self._pending: list[Future] = []
        self._local = threading.local()

    def submit(self, task: Callable[[], Any]) -> None:
        """Queue ``task`` after every task queued so far; raise the error of one that failed."""
        self._raise_failed()
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=self.name)
        self._pending.append(self._executor.submit(self._run, task))

    def _run(self, task: Callable[[], Any]) -> Any:
        self._local.inside = True
        return task()

    def in_writer(self) -> bool:
        """True on the writer thread itself (a task must not wait for the queue it runs in)."""
        return getattr(self._local, "inside", False)

    def wait(self) -> None:
        """Block until every queued task is done; raise the first one that failed."""
        pending, self._pending = self._pending, []
        for future in pending:
            future.result()

    def _raise_failed(self) -> None:
        done = [f for f in self._pending if f.done()]
        self._pending = [f for f in self._pending if not f.done()]
        for future in done:
            future.result()

    def close(self) -> None:
        """Wait for every task, then stop the thread (a later ``submit`` starts another)."""
        try:
            self.wait()
        finally:
            if self._executor is not None:
                self._executor.shutdown()
                self._executor = None
