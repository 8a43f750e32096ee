"""When a check holding the GPU lock shared is presumed hung (``gpu_lock.GpuHold.presume_hung``):
after ``after_s`` of its own time (``checks/hangs.presumed_hung_after``), or at once when a
warm-up begins. ``checks/sandbox.py``'s wait for a check's reply asks it how long it may wait."""
from __future__ import annotations

from typing import Any, Callable


class PresumeHung:
    """Presumes a check (or start-up) hung once the wait for it has lasted ``after_s`` seconds:
    ``presume()`` is the hold's ``GpuHold.presume_hung``."""

    def __init__(self, after_s: float, presume: Callable[[bool], None]):
        self.after_s, self.presume, self.pending = after_s, presume, True
        self.warming = False  # presumed because it warms up (its mark: gpu_lock's warming one)

    @classmethod
    def of(cls, hold: Any, after_s: float | None) -> "PresumeHung | None":
        if after_s is None or not callable(getattr(hold, "presume_hung", None)):
            return None
        return cls(after_s, hold.presume_hung)

    def now(self, warming: bool = False) -> None:
        """Presume it at once: a warm-up began (``warming``: it is long by nature, and while a
        shared hold lasts a timed check waiting for it queues every other check behind itself:
        79 % of the GPU suite's 527 s on the H200 at b9cffe2), or its time is up. A check marked
        as warming up whose warm-up ended is marked as presumed hung again (``warming`` False)."""
        if self.pending or (self.warming and not warming):
            self.pending, self.warming = False, warming
            self.presume(warming)

    def wait(self, used_s: float, wanted: float | None) -> float | None:
        """How long the next wait may last: ``wanted``, cut where the check is presumed hung;
        presumes it when due."""
        if not self.pending:
            return wanted
        if used_s >= self.after_s:
            self.now()
            return wanted
        left = self.after_s - used_s
        return left if wanted is None else min(wanted, left)
