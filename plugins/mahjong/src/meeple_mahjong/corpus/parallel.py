"""Ordered parallel map for scan and build: results come back in task order, at most
``window`` tasks in flight (bounded memory), the same output whatever the number of jobs."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from typing import Any


def ordered_map(fn: Callable[[Any], Any], tasks: Iterable[Any], jobs: int = 1) -> Iterator[Any]:
    """``map(fn, tasks)``; with ``jobs > 1`` in that many processes (``fn`` must be picklable)."""
    if jobs < 1:
        raise ValueError(f"jobs must be >= 1, got {jobs}")
    if jobs == 1:
        yield from map(fn, tasks)
        return
    with ProcessPoolExecutor(jobs) as pool:
        pending: deque = deque()
        for task in tasks:
            pending.append(pool.submit(fn, task))
            if len(pending) >= 2 * jobs:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()
