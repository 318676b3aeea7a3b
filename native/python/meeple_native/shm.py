"""Hot loops of the shared-memory env transport: ``WordWaiter`` (spin, yield, futex, with
the adaptive ``SpinBudget``), ``Ring`` (a client's request to one worker), ``OneWorkerStep``
(a one-worker STEP: actions, ring, wait), ``Publisher`` (a worker's answer) and
``StepLoop`` (a worker's STEPs: wait, check the actions, the env's step, publish).

meeple.transport.shm binds them over a segment's mmap and falls back to its Python path
without them; the segment layout and the wait policy are in docs/protocol.md.
"""

from ._core.shm import OneWorkerStep, Publisher, Ring, SpinBudget, StepLoop, WordWaiter

__all__ = ["OneWorkerStep", "Publisher", "Ring", "SpinBudget", "StepLoop", "WordWaiter"]
