"""Lightning's DDP strategy, with one clear stop when a learner process dies.

Lightning starts the other local ranks as subprocesses and watches them; when one dies it kills
every rank, rank 0 included, with SIGKILL and a log line a user can miss. Here the watcher
prints what died and where the checkpoints are, stops the other ranks and exits rank 0 with
``EXIT_PEER_LOST`` (rank 0's main thread may be blocked in a collective, so it cannot be asked
to stop). Checkpoint files are written atomically, so none is half-written; a rank > 0 whose
peer died stops at its next collective with :class:`meeple.errors.PeerLost`.
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Any

from lightning.fabric.strategies.launchers.subprocess_script import _ChildProcessObserver
from lightning.pytorch.strategies import DDPStrategy
from lightning.pytorch.strategies.launchers.subprocess_script import _SubprocessScriptLauncher

from meeple.distributed import EXIT_PEER_LOST, resume_hint


class _RankWatch(_ChildProcessObserver):
    def _terminate_all(self) -> None:
        dead = [(rank, proc) for rank, proc in enumerate(self._child_processes, start=1) if proc.returncode]
        rank, proc = dead[0]
        code = proc.returncode
        how = f"was killed by signal {-code}" if code < 0 else f"exited with code {code}"
        print(f"meeple: error: learner rank {rank} (pid {proc.pid}) {how}; stopping every rank. {resume_hint()}",
              file=sys.stderr, flush=True)
        for other in self._child_processes:
            if other.poll() is None:
                other.send_signal(signal.SIGKILL)  # SIGTERM does not stop a process waiting in a collective
        os._exit(EXIT_PEER_LOST)


class _Launcher(_SubprocessScriptLauncher):
    def launch(self, function: Any, *args: Any, trainer: Any = None, **kwargs: Any) -> Any:
        self.cluster_environment.validate_settings(num_devices=self.num_processes, num_nodes=self.num_nodes)
        if not self.cluster_environment.creates_processes_externally:
            self._call_children_scripts()
            _RankWatch(os.getpid(), self.procs).start()
        return function(*args, **kwargs)


class WatchedDDPStrategy(DDPStrategy):
    """``hardware.strategy=ddp``: Lightning's DDP whose launcher reports a dead rank clearly."""

    def _configure_launcher(self) -> None:
        super()._configure_launcher()
        if type(self._launcher) is _SubprocessScriptLauncher:
            self._launcher = _Launcher(self.cluster_environment, self.num_processes, self.num_nodes)
