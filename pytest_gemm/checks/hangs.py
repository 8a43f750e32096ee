"""How long a kernel's checks may run once it has hung: pure bookkeeping, no processes.

A hang costs a whole timeout and a fresh process, so a kernel that never finishes would
cost its timeout once per check. After a kernel's first timeout its later checks get a
short budget instead: ``HANG_FLOOR_S`` plus the check's floating-point operations at
``HANG_RATE_FLOPS``, or ``HANG_FACTOR`` times what its completed checks of comparable work
(at least 1/8 of this check's) predict when that is more, never more than the normal
timeout; a timed check (speed, sweep: mostly inputs, roofs and repeats, not the product)
gets at least ``TIMED_HANG_FLOOR_S``. A kernel that has timed out ``HANG_STREAK`` times
without completing a single check gets its remaining checks failed as timeouts without
running them; a kernel that completed a check is never cut off: each of its checks runs,
with its short budget. A start-up (import, compile) that ran out of its own time limit is
not tried again for every check either.

Faults are counted the same way: a check that ended the kernel's process (an illegal address,
any CUDA error that poisons the context, exit()) costs a fresh process (Python, CuPy, the
CUDA context, loading the kernel) for the next check, so a kernel that faults everywhere
would cost one per check. A kernel whose first ``HANG_STREAK`` checks all faulted or timed
out, none completing, gets its remaining checks failed without running, each record saying
why ("not run: the kernel faulted in 3 checks, first at launch at 64x64x64, ..."). The rule
is the hang rule's: a kernel that completed a check (passed, or failed on its values) is never
cut off, so a kernel that faults only at some shapes still runs, and earns, every other check.
The suite's first GPU check is ``launch`` at 64x64x64: a kernel that works there is never
cut off. One whose first checks all fault (64x64x64, 1x1x1, 2x2x2 in the suite's order) gets
one more check before the cut, a probe at a large shape (``probe_case``: 1024x1024x1024 in the
suite); if it completes there, the kernel is never cut off.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

from ..model import categories as cat

HANG_FLOOR_S = 3.0          # the shortest budget of a check after its kernel timed out
HANG_RATE_FLOPS = 20e9      # ... plus its product at 20 GFLOP/s
TIMED_HANG_FLOOR_S = 30.0   # the shortest budget of a timed check (speed, sweep)
HANG_FACTOR = 5.0           # times the duration the kernel's completed checks predict
HANG_STREAK = 3             # timeouts with no completed check, after which the rest is not run


def presumed_hung_after(flops: float) -> float:
    """Seconds after which a check still running is presumed hung as far as the GPU lock is
    concerned (the budget a kernel that already hung would get: ``HANG_FLOOR_S`` plus its
    product at ``HANG_RATE_FLOPS``; a start-up: ``flops`` 0). Its shared hold then ends and a
    mark takes its place (``gpu_lock.GpuHold.presume_hung``): timed checks still wait for it to
    end (a spinning kernel time-slices with a timing, and the quiet probe's short launches did
    not see it), but the other checks no longer wait behind them."""
    return HANG_FLOOR_S + flops / HANG_RATE_FLOPS


PROBE_DIM = 1024            # a probe's shape: the largest smallest dimension up to this, then the least work


def probe_case(cases: Sequence[tuple[str, Sequence[int], dict]], faulted: Sequence[str]
               ) -> tuple[str, tuple[int, int, int], dict] | None:
    """The case a kernel cut off for faults is probed with: among ``cases`` (check, shape, params;
    timed checks left out by the caller) at a shape none of ``faulted`` ("exact at 1x1x1") names,
    the one whose smallest dimension is largest up to ``PROBE_DIM``, then the least work."""
    seen = {label.rpartition(" at ")[2] for label in faulted}
    best, key = None, None
    for check, shape, params in cases:
        m, n, k = (int(d) for d in shape)
        if f"{m}x{n}x{k}" in seen:
            continue
        score = (min(m, n, k, PROBE_DIM), -m * n * k)
        if key is None or score > key:
            best, key = (check, (m, n, k), dict(params)), score
    return best


def flops_of(shape: Sequence[int], params: dict | None = None) -> float:
    """The floating-point operations a check's products take: its shape's, or a sweep's sizes'."""
    shapes = (params or {}).get("shapes") or [shape]
    return float(sum(2 * int(s[0]) * int(s[1]) * int(s[2]) for s in shapes))


@dataclass
class HangLedger:
    """One kernel's record: what its checks took, where it timed out."""

    completed: list[tuple[float, float]] = field(default_factory=list)  # (seconds, flops)
    timeouts: list[str] = field(default_factory=list)                   # "exact at 1x1x1"
    faults: list[str] = field(default_factory=list)                     # checks that ended the process
    fault_category: str = cat.FAULT                                     # the first one's: fault or launch_error
    probe: str | None = None                                            # the probe run once the streak was reached
    startup_failure: str | None = None                                  # a start-up that ran out of time

    def done(self, seconds: float, flops: float) -> None:
        self.completed.append((max(0.0, float(seconds)), max(1.0, float(flops))))

    def timed_out(self, label: str) -> None:
        self.timeouts.append(label)

    def faulted(self, label: str, category: str = cat.FAULT) -> None:
        """A check that ended the kernel's process (a fault, a launch's CUDA error, exit): the
        next needs a fresh one."""
        if not self.faults:
            self.fault_category = category
        self.faults.append(label)

    def wants_probe(self) -> bool:
        """The kernel just reached the streak mostly by faults and has not been probed: before
        its remaining checks are cut off, one more runs, at a large shape (``probe_case``), so
        that a kernel that faults only at the small shapes the suite begins with is not cut off."""
        return (self.probe is None and self.startup_failure is None and not self.completed
                and len(self.faults) > len(self.timeouts) and self.cut_off() is not None)

    def estimate(self, flops: float) -> float | None:
        """Seconds this kernel's completed checks of comparable work predict for ``flops`` (the
        tightest), or None: tiny checks' durations are overheads, which say nothing of large ones."""
        comparable = [(s, f) for s, f in self.completed if f >= flops / 8]
        if not comparable:
            return None
        return min(s * max(1.0, flops / f) for s, f in comparable)

    def budget(self, normal: float, flops: float, timed: bool = False) -> tuple[float, str | None]:
        """(seconds, why) for the next check: ``normal`` (why None) until the first timeout."""
        if not self.timeouts:
            return normal, None
        base = max(TIMED_HANG_FLOOR_S if timed else 0.0, HANG_FLOOR_S + flops / HANG_RATE_FLOPS)
        predicted = self.estimate(flops)
        seconds = min(normal, max(base, HANG_FACTOR * (predicted or 0.0)))
        basis = f"{base:.3g} s for its work"
        if predicted is not None:
            basis += f" or {HANG_FACTOR:g} x the {predicted:.3g} s its completed checks predict"
        return seconds, (f"a short budget, since this kernel already timed out ({self.timeouts[0]}): {basis}, "
                         f"at most the normal {normal:.4g} s")

    def not_run(self) -> str | None:
        """Why the next check is failed without running, or None when it runs."""
        cut = self.cut_off()
        return None if cut is None else cut[1]

    def cut_off(self) -> tuple[str, str] | None:
        """(category, why) when the next check is failed without running, else None."""
        if self.startup_failure is not None:
            return cat.TIMEOUT, (f"not run: starting this kernel already failed ({self.startup_failure}); "
                                 "it is not tried again for every check")
        if self.completed or len(self.timeouts) + len(self.faults) < HANG_STREAK:
            return None
        if len(self.faults) > len(self.timeouts):
            also = f" (and timed out in {len(self.timeouts)}, first at {self.timeouts[0]})" if self.timeouts else ""
            launch = self.fault_category == cat.LAUNCH_ERROR
            what, fix = (("'s launch failed", "the launch the CUDA error names (block size, grid, shared memory)")
                         if launch else (" faulted", "the illegal address (an index past the end of A, B or C, or a "
                                                     "misaligned vector access)"))
            return self.fault_category, (
                f"not run: the kernel{what} in {len(self.faults)} checks, first at {self.faults[0]}{also}"
                + (f", and in a probe at a large shape ({self.probe})" if self.probe else "") + ", "
                f"without completing any, so its remaining checks fail as {self.fault_category} without running "
                "(each such failure costs a fresh process; a kernel that fails so everywhere costs seconds, not "
                f"minutes); fix {fix} and run again. A kernel that completes a check is never cut off: it runs "
                "every check")
        also = f" (and faulted in {len(self.faults)}, first at {self.faults[0]})" if self.faults else ""
        return cat.TIMEOUT, (
            f"not run: this kernel timed out in its first {len(self.timeouts)} checks "
            f"({', '.join(self.timeouts[:HANG_STREAK])}){also} without completing any, so its remaining "
            "checks fail as timeouts without running (a kernel that never finishes costs seconds, "
            "not minutes); fix the hang (an endless loop, or a barrier some threads never reach) "
            "and run again")
