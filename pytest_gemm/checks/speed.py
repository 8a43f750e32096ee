"""The speed check: a kernel and cuBLAS at the same precision, timed in the same test.

Judged in this order: work still running after the timed region
(``timing_escape``; such a kernel's work is not ordered after the harness's
input copies, so its output proves nothing); the last timed output, verified
against its own inputs, so a kernel that skips repeated calls or returns a
result cached by buffer address is caught (``stale_output``); a timing function
the kernel's process replaced (``timing_escape``; looked for before anything is
measured and again before cuBLAS is timed, since the roofs and cuBLAS's times are
shared with the whole run); a rate above the hardware roof (``timing_escape``: e.g.
a result reused by content); then the optional ``--gemm-min-cublas-fraction`` gate.

Roofs (``measure/roofs.py``): the impossibility judge uses the theoretical peaks
(a rate above the arithmetic peak, or a time below what the compulsory bytes take
at the memory peak); "fraction of roof" is reported against the roof measured in
this process, the theoretical peak when it could not be measured.

The check takes the GPU-wide lock exclusively only for the roofs, the timed calls and
cuBLAS (``measure/gpu_lock.py``); it uploads the timed calls' inputs before, one shared hold
per buffer set, and verifies the last output after, under a shared hold (neither is timed,
and a timing elsewhere waits for a shared hold to end); the runner holds nothing around it.
Before timing it waits for other processes' kernels to leave the GPU (``measure/quiet.py``);
a timing taken on a GPU that stayed busy is marked (``gpu_quiet``, a device warning, the
ranking's label).
"""
from __future__ import annotations

from typing import Any, Callable

from ..kernels.autotune import describe_best
from ..kernels.harness import Harness
from ..kernels.modules import copy_note
from ..measure.clocks import open_clock_reader, read_clocks
from ..measure.gpu_lock import gpu_lock
from ..measure.laps import Laps
from ..measure.roofs import ceilings
from .launch_trace import kernel_time, reject_traced_escape
from ..measure.quiet import busy_marked
from ..measure.timing import DEFAULT_BUDGET_S, DEFAULT_STOP, ROOF_MARGIN, speed_settings
from ..measure.timed import (gpu_quiet, problems_for, process_roofs, reject_escaped_work, reject_impossible_timing,
                             roof_facts, stage_inputs, time_cublas, timed_run, warm_outside_lock)
from ..model.categories import TIMING_ESCAPE, GemmCheckFailure
from ..model.shapes import Shape, shape_str

def check_speed(h: Harness, shape: Shape, record: Callable[[dict[str, Any]], None],
                min_fraction: float | None, budget_s: float = DEFAULT_BUDGET_S, measure_roofs: bool = True,
                stop_within: float | None = DEFAULT_STOP) -> None:
    """Judged in this order: a timer replaced before the check (nothing is measured), work
    escaping the timed region (its output is then unordered against the harness's own input
    copies, so it is not verified), the last output (stale_output), a timer replaced by the
    timed calls (before cuBLAS is timed), a rate above the roof or a time below the memory
    floor, then the optional cuBLAS gate. The kernel and cuBLAS repeat for ``budget_s`` of GPU
    time, or until their median is known to within ``stop_within`` (gemm_speed_stop; None: the budget)."""
    import cupy  # lazy: CuPy (the plugin loads with no GPU)

    precision = h.kernel.precision
    problems = problems_for(precision, shape)  # host work: drawn before the GPU is taken
    warm_outside_lock(h, shape, problems)  # a JIT compile or an autotuner's search: not while the GPU is ours alone
    with cupy.cuda.Stream.null:  # the GPU, not alone: no timing beside the copies, which may wait between sets
        staged = stage_inputs(h, problems, each=lambda: gpu_lock(False, what="speed uploads"))
    open_clock_reader()  # NVML's start (64 ms on the H100 at 2567d34): not while the GPU is ours alone
    with gpu_lock(True, what="speed") as hold, cupy.cuda.Stream.null:  # alone; the harness works on the null stream
        alone = Laps()  # where the hold goes (the report's alone_s)
        # A replaced timer measures nothing here: the roofs and cuBLAS are shared with the run.
        reject_tampering(str(h.kernel.name))
        measured = process_roofs(h.device, measure_roofs)  # before the kernel: it also settles the clocks
        alone.lap("roofs")
        limits = ceilings(h.device, precision, measured)
        quiet = gpu_quiet(h.device, measured, hold.step_aside)  # no other process's kernels time-slicing with ours
        alone.lap("quiet")
        clocks_before = read_clocks(h.device)  # the report's meta: the clocks around the timed calls
        timing, verify = timed_run(h, shape, budget_s, problems, stop_within,  # warm-up calls again (warm by now): untimed
                                   laps=alone, staged=staged)
        record({"clocks": {"start": clocks_before, "end": read_clocks(h.device)}})
        record(busy_marked(dict({"timing": dict(timing.as_dict(), shape=list(shape)), "gpu_quiet": quiet},
                                **roof_facts(h.device, precision, timing, measured))))
        chosen, copied = describe_best(h.kernel), copy_note(h.kernel)
        if chosen:  # the config a Triton autotuner chose for this shape
            record({"autotune": chosen})
        if copied:  # a module's result copied into C inside each timed call
            record({"result_copy": copied})
        kernel_time(timing.median_ms, record)  # the kernels' own GPU time beside the event time (traced)
        reject_escaped_work(timing, limits, precision)
        reject_traced_escape(str(h.kernel.name), f"at {shape_str(shape)}: ",  # calls against their launches
                             timing.flops, limits.tflops, getattr(limits, "basis", "") or precision, ROOF_MARGIN)
        replaced = tampered_timers()  # the kernel's own calls may have replaced one: then cuBLAS is not timed here
        cublas = None if replaced else time_cublas(precision, shape, h.device, budget_s, problems, stop_within)
        alone.lap("cublas")
    # The last output, checked once the GPU is no longer ours alone: an untimed call and a
    # comparison (0.17 s of each timed hold in the H100 class at 52edbee) need only a shared hold.
    with gpu_lock(False, what="speed verification"), cupy.cuda.Stream.null:
        verify()
    reject_tampering(str(h.kernel.name), replaced)
    assert cublas is not None  # timed whenever no timer was replaced
    fraction = cublas.median_ms / timing.median_ms if timing.median_ms > 0 else 0.0
    record({"cublas": cublas.as_dict(), "fraction_of_cublas": fraction, "alone_s": alone.seconds})
    reject_impossible_timing(timing, shape, precision, limits)
    below = cublas_gate(str(h.kernel.name), precision, shape, fraction, timing.tflops, cublas.tflops, min_fraction)
    if below is not None:
        raise AssertionError(below)


def cublas_gate(name: str, precision: str, shape: Shape, fraction: float, tflops: float,
                cublas_tflops: float, min_fraction: float | None) -> str | None:
    """--gemm-min-cublas-fraction: why the kernel is too slow, or None when it passes (or no gate)."""
    if min_fraction is None or fraction >= min_fraction:
        return None
    return (f"{name!r} runs at {fraction:.3f} of cuBLAS {precision} at {shape_str(shape)} "
            f"({tflops:.2f} vs {cublas_tflops:.2f} TFLOP/s); --gemm-min-cublas-fraction asks for {min_fraction}")


def run(h: Harness, shape: Shape, params: dict, record: Callable[[dict[str, Any]], None], options: dict) -> None:
    budget_s, stop_within = speed_settings(options)
    check_speed(h, shape, record, options.get("min_cublas_fraction"), budget_s=budget_s, stop_within=stop_within)


def tampered_timers() -> list[str]:
    """The functions the timing rests on that the kernel's process replaced (none: [])."""
    from ..measure.integrity import tampered  # lazy: a test replaces tampered on its module

    return tampered()


def reject_tampering(name: str, replaced: list[str] | None = None) -> None:
    """timing_escape when the kernel's process replaced a function the timing rests on
    (``replaced``: as ``tampered_timers`` found it; None: look now)."""
    replaced = tampered_timers() if replaced is None else replaced
    if replaced:
        raise GemmCheckFailure(TIMING_ESCAPE, f"{name!r}: the kernel's process replaced {', '.join(replaced)} "
                               "while it was timed", ["a launcher must launch its work, not change how it is measured"])
