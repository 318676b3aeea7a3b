"""Progress of a long command (an evaluation, self-play, a corpus build, recording demonstrations).

On a terminal, rich's live bar. Written to a file or a pipe (``... > log.txt 2>&1``) rich shows
nothing at all, so an hour-long evaluation would leave its log empty until the result:
:class:`LineProgress` prints ``label: 120/1000 (12%), 5m 10s, ~37m left`` instead, to stderr
(stdout keeps the command's results), at most one line every ``interval_s`` seconds and always
the last. Both take rich's calls: ``add_task``, ``update``, ``advance``, ``start``, ``stop`` and
``with``.
"""

from __future__ import annotations

import sys
import time
from typing import Any, TextIO

from rich.progress import Progress

from meeple.logs import is_terminal

INTERVAL_S = 30.0


def task_progress(*columns: Any, transient: bool = True, interval_s: float = INTERVAL_S) -> Progress | LineProgress:
    """rich's ``Progress(*columns)`` when stdout is a terminal, :class:`LineProgress` otherwise."""
    if is_terminal():
        return Progress(*columns, transient=transient)
    return LineProgress(interval_s=interval_s)


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m {seconds % 60:02d}s"
    return f"{seconds // 3600}h {seconds % 3600 // 60:02d}m"


class LineProgress:
    """Plain progress lines, one per task at most every ``interval_s`` seconds, and the last."""

    def __init__(self, interval_s: float = INTERVAL_S, stream: TextIO | None = None) -> None:
        self.interval_s = interval_s
        self.stream = stream
        self._tasks: list[dict[str, Any]] = []

    def __enter__(self) -> LineProgress:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def start(self) -> None:
        pass  # lines need no live display

    def stop(self) -> None:
        pass

    def add_task(self, description: str, total: float | None = None, completed: float = 0, **_: Any) -> int:
        now = time.monotonic()
        self._tasks.append({"description": description, "total": total, "completed": completed,
                            "start": now, "last": float("-inf"), "reported_done": False})
        return len(self._tasks) - 1

    def advance(self, task_id: int, advance: float = 1) -> None:
        self.update(task_id, advance=advance)

    def update(self, task_id: int, *, completed: float | None = None, advance: float | None = None,
               total: float | None = None, description: str | None = None, **_: Any) -> None:
        task = self._tasks[task_id]
        if total is not None:
            task["total"] = total
        if description is not None:
            task["description"] = description
        if completed is not None:
            task["completed"] = completed
        if advance is not None:
            task["completed"] += advance
        now = time.monotonic()
        finished = task["total"] is not None and task["completed"] >= task["total"]
        if finished and task["reported_done"]:
            return
        if now - task["last"] < self.interval_s and not finished:
            return
        task["last"], task["reported_done"] = now, finished
        print(self.line(task, now - task["start"]), file=self.stream or sys.stderr, flush=True)

    @staticmethod
    def line(task: dict[str, Any], elapsed_s: float) -> str:
        done, total = task["completed"], task["total"]
        if total is None:
            return f"{task['description']}: {done:g}, {_duration(elapsed_s)}"
        parts = [f"{task['description']}: {done:g}/{total:g} ({100 * done / max(total, 1):.0f}%)",
                 _duration(elapsed_s)]
        if 0 < done < total:
            parts.append(f"~{_duration(elapsed_s * (total - done) / done)} left")
        return ", ".join(parts)
