"""Is the GPU quiet before a timing? Pure logic: the probe is passed in (``roof_bench.fma_probe``).

The GPU-wide lock keeps this run's own checks off the GPU while a kernel is timed, but not
everything: a process killed for hanging can leave its endless kernel running until the driver
has torn its context down (seen on an H200: correct or slow students timed at 0.31 to 0.48 of
the speed of identical kernels while one or two hanging students' kernels were being killed),
and processes of other users take no lock at all. Another context's work time-slices the GPU
with ours, so a short FMA launch runs at a fraction of the roof measured on a quiet GPU. Before
timing, the speed check probes until the probe reaches ``QUIET_FRACTION`` of that roof, for at
most ``QUIET_LIMIT_S``; a timing taken on a GPU that never got quiet is marked, not trusted
silently. It does not see everything: on an H200 (commit 9a292c7) the probe's 5 ms launches read
0.95 of the roof while a hanging student's endless kernel time-sliced with the GPU and a
15 ms kernel timed at a third of its speed, so the lock itself keeps timings off the GPU while
a check presumed hung still runs (``gpu_lock.GpuHold.presume_hung``).
"""
from __future__ import annotations

import time
from typing import Any, Callable

QUIET_FRACTION = 0.8  # a quiet GPU gives the probe 0.95-1.0 of the roof; one other busy context, about half
QUIET_LIMIT_S = 20.0  # longest wait for quiet (a killed kernel's teardown took seconds, not minutes)
STEP_ASIDE_AFTER_S = 0.5  # probing a busy GPU this long, a check that can step aside does
STEP_ASIDE_PAUSE_S = 1.5  # ... and lets the shared holders have the GPU this long before probing again
STEPPING_LIMIT_S = 60.0  # longest wait for quiet when stepping aside: a hung kernel runs out its
                         # check's timeout (20 s by default) before it is killed, and the class runs meanwhile


def wait_until_quiet(probe: Callable[[], float], roof_tflops: float | None, limit_s: float | None = None,
                     clock: Callable[[], float] = time.monotonic,
                     step_aside: Callable[[float], bool] | None = None) -> dict[str, Any]:
    """Probe (TFLOP/s) until it reaches ``QUIET_FRACTION`` of ``roof_tflops`` or ``limit_s``
    has passed (default: ``STEPPING_LIMIT_S`` with ``step_aside``, else ``QUIET_LIMIT_S``).
    ``{"quiet": True | False | None, "waited_s", "probes", "probe_fraction", "stepped_aside"}``;
    ``quiet`` is None (not checked) without a measured roof. The probes follow each other with
    no pause: a pause would let the clocks drop, and a GPU at idle clocks reads as busy.
    ``step_aside(pause_s)`` (``gpu_lock.GpuHold.step_aside``) is called after each
    ``STEP_ASIDE_AFTER_S`` of busy probes: the GPU lock's shared holders (this run's correctness
    checks) run during the pause instead of waiting behind a timing that cannot start yet;
    it returns False when it cannot step aside, and the probes then go on."""
    if not roof_tflops or roof_tflops <= 0:
        return {"quiet": None, "waited_s": 0.0, "probes": 0, "probe_fraction": None, "stepped_aside": 0}
    if limit_s is None:
        limit_s = STEPPING_LIMIT_S if step_aside is not None else QUIET_LIMIT_S
    started = round_started = clock()
    probes = stepped = 0
    while True:
        fraction = probe() / roof_tflops
        probes += 1
        now = clock()
        waited = now - started
        if fraction >= QUIET_FRACTION or waited >= limit_s:
            return {"quiet": fraction >= QUIET_FRACTION, "waited_s": round(waited, 3), "probes": probes,
                    "probe_fraction": round(fraction, 4), "stepped_aside": stepped}
        if step_aside is not None and now - round_started >= STEP_ASIDE_AFTER_S \
                and waited + STEP_ASIDE_PAUSE_S < limit_s:
            if step_aside(STEP_ASIDE_PAUSE_S):
                stepped += 1
            round_started = clock()


def busy_note(quiet: dict[str, Any] | None) -> str | None:
    """What a timing's reader must know when the GPU never got quiet, else None."""
    if not quiet or quiet.get("quiet") is not False:
        return None
    return (f"the GPU was busy with work outside this run's lock for all of {quiet['waited_s']:.0f} s "
            f"(an FMA probe ran at {quiet['probe_fraction']:.2f} of this GPU's roof): another process's "
            "kernels shared the GPU while this was timed, so the figure is low")


def busy_marked(facts: dict[str, Any]) -> dict[str, Any]:
    """``facts`` of a timing with the busy note added to its device warnings when the GPU never
    got quiet (``facts["gpu_quiet"]``), so that the summary says so."""
    note = busy_note(facts.get("gpu_quiet"))
    if note is not None:
        facts["device_warnings"] = [*facts.get("device_warnings", ()), note]
    return facts
