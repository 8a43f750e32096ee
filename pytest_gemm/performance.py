"""The speed check: a kernel and cuBLAS at the same precision, timed in the same test.

Timed calls rotate over ``ROTATE`` buffer sets (more memory than the L2 holds),
and before each call (outside the timed region) the call's buffers receive the
next of ``DATA_SETS`` input sets (one more than there are buffers, so the same
address holds different data from one visit to the next) and a poisoned C.

Judged in this order: work still running after the timed region
(``timing_escape``; such a kernel's work is not ordered after the harness's
input copies, so its output proves nothing); the last timed output, verified
against its own inputs, so a kernel that skips repeated calls or returns a
result cached by buffer address is caught (``stale_output``); a rate above the
hardware roof (``timing_escape``: e.g. a result reused by content); then the
optional ``--gemm-min-cublas-fraction`` gate.

Roofs (``roofs.py``): the impossibility judge uses the theoretical peaks (a rate
above the arithmetic peak, or a time below what the compulsory bytes take at the
memory peak); "fraction of roof" is reported against the roof measured in this
process (``roofs.measured_roofs``, once per device), the theoretical peak when
it could not be measured. The measured roofs travel in the facts (``roofs``).
"""
from __future__ import annotations

from typing import Any, Callable

from . import categories as cat
from .cases import Shape, shape_str
from .categories import GemmCheckFailure
from .diagnose import POISON_BITS
from .harness import Harness
from .roofs import ceilings, impossible_timing, reported_roof, roof_tflops
from .timing import TimingResult, escape_verdict, escaped_work, gemm_flops, time_gpu

ROTATE = 3               # buffer sets the timed calls rotate over
DATA_SETS = ROTATE + 1   # input sets cycled through them: an address never sees the same data twice running
_CUBLAS_TIMES: dict[tuple[str, Shape, int], TimingResult] = {}


_PROBLEMS: dict[tuple[str, Shape], list[Any]] = {}


def _problems(precision: str, shape: Shape) -> list[Any]:
    """The ``DATA_SETS`` exact input sets of a timed run (the same for a kernel and its cuBLAS baseline).

    Kept for the last (precision, shape) asked for: drawing them takes seconds at 4096^3 and
    more at 8192^3, and a process that times several kernels (the ladder ranked beside the
    kernels under test shares one) times them all on the same sets. One key only, so a
    process never holds more than one shape's sets."""
    key = (precision, tuple(shape))
    if key not in _PROBLEMS:
        from .inputs import exact_inputs

        _PROBLEMS.clear()
        _PROBLEMS[key] = [exact_inputs(*shape, precision=precision, seed=100 + i) for i in range(DATA_SETS)]
    return _PROBLEMS[key]


def _timed_run(h: Harness, shape: Shape, budget_s: float,
               problems: list[Any] | None = None) -> tuple[TimingResult, Callable[[], None]]:
    """Time ``h``'s kernel over rotating buffers and cycling exact inputs; return the timing and a verifier."""
    import cupy

    from .reference import reference

    m, n, k = shape
    if problems is None:
        problems = _problems(h.kernel.precision, shape)
    buffers = [h.upload(p) for p in problems[:ROTATE]]
    sources = [(cupy.asarray(p.a), cupy.asarray(p.b)) for p in problems]
    poison = cupy.uint32(POISON_BITS)
    state = {"call": -1, "slot": 0, "data": 0}  # warm-up calls use buffers[0], which holds problems[0]

    def before() -> None:
        state["call"] += 1
        slot, data = state["call"] % ROTATE, state["call"] % DATA_SETS
        a, b, c = buffers[slot]
        cupy.copyto(a.array, sources[data][0])
        cupy.copyto(b.array, sources[data][1])
        c.array.view(cupy.uint32).fill(poison)
        state["slot"], state["data"] = slot, data

    def call() -> None:
        a, b, c = buffers[state["slot"]]
        h.loaded(a.array, b.array, c.array, m, n, k)

    timing = time_gpu(call, flops=gemm_flops(m, n, k), l2_bytes=h.device.l2_bytes, budget_s=budget_s,
                      before_each=before)

    def verify() -> None:
        problem = problems[state["data"]]
        got = buffers[state["slot"]][2].array
        want = reference(cupy.asarray(problem.a64), cupy.asarray(problem.b64), xp=cupy).astype(cupy.float32)
        if bool(cupy.array_equal(got.view(cupy.uint32), want.view(cupy.uint32))):
            return
        unwritten = int((got.view(cupy.uint32) == poison).sum())
        what = (f"{unwritten} of {got.size} outputs were never written" if unwritten
                else "every output was written, with wrong values")
        raise GemmCheckFailure(cat.STALE_OUTPUT, f"{h.kernel.name!r} at {shape_str(shape)}: the output of the "
                               f"last of {timing.repeats} timed calls is wrong ({what}) although the kernel "
                               "passed its correctness checks",
                               ["timed calls get fresh inputs (the same buffers hold new data) and a poisoned C "
                                "each time; a kernel must compute every call (no caching of results by address, "
                                "no first-call-only work, no skipping repeated calls)"])

    return timing, verify


def time_cublas(precision: str, shape: Shape, device: Any, budget_s: float,
                problems: list[Any] | None = None) -> TimingResult:
    key = (precision, shape, device.index)
    if key not in _CUBLAS_TIMES:
        import reference_kernels

        baseline = reference_kernels.CUBLAS[precision]
        from .checks import harness_for

        timing, verify = _timed_run(harness_for(baseline, device), shape, budget_s, problems)
        verify()
        _CUBLAS_TIMES[key] = timing
    return _CUBLAS_TIMES[key]


def process_roofs(device: Any, measure: bool = True) -> dict[str, Any]:
    """This process's measured roofs (``roofs.measured_roofs``, cached), or {} when not measured."""
    if not measure:
        return {}
    from .roofs import measured_roofs

    try:
        return measured_roofs(device)
    except Exception as exc:  # noqa: BLE001 - the theoretical peaks still judge; report why
        return {"errors": {"all": f"{type(exc).__name__}: {exc}"[:300]}}


def roof_facts(device: Any, precision: str, timing: TimingResult, measured: dict[str, Any]) -> dict[str, Any]:
    """The roof figures a timing is reported with: the theoretical peak, the measured roof,
    the fraction of the measured roof (of the peak when none was measured) and which one."""
    peak = roof_tflops(device, precision)
    roof, kind = reported_roof(precision, measured, peak)
    return {"roof_tflops": peak, "measured_roof_tflops": roof if kind == "measured" else None,
            "roof_kind": kind, "fraction_of_roof": timing.tflops / roof if roof else None,
            "roofs": measured or None}


def reject_escaped_work(timing: TimingResult, limits: Any, precision: str, where: str = "") -> None:
    """timing_escape when work was still running after the timed region ended."""
    if escaped_work(timing) is not None:
        summary, details = escape_verdict(timing, limits.tflops, precision)  # type: ignore[misc]
        raise GemmCheckFailure(cat.TIMING_ESCAPE, where + summary, details)


def reject_impossible_timing(timing: TimingResult, shape: Shape, precision: str, limits: Any,
                             where: str = "") -> None:
    """timing_escape for a time the hardware cannot deliver (arithmetic or memory roof)."""
    impossible = impossible_timing(timing, shape, precision, limits)
    if impossible is not None:
        raise GemmCheckFailure(cat.TIMING_ESCAPE, where + impossible[0], impossible[1])


def check_speed(h: Harness, shape: Shape, record: Callable[[dict[str, Any]], None],
                min_fraction: float | None, budget_s: float = 1.0, measure_roofs: bool = True) -> None:
    """Judged in this order: work escaping the timed region (its output is then unordered
    against the harness's own input copies, so it is not verified), the last output
    (stale_output), a rate above the roof or a time below the memory floor, then the
    optional cuBLAS gate."""
    import cupy

    precision = h.kernel.precision
    measured = process_roofs(h.device, measure_roofs)  # before the kernel: it also settles the clocks
    limits = ceilings(h.device, precision, measured)
    problems = _problems(precision, shape)
    with cupy.cuda.Stream.null:  # whatever stream a kernel left current, the harness works on this one
        timing, verify = _timed_run(h, shape, budget_s, problems)
        record(dict({"timing": dict(timing.as_dict(), shape=list(shape))},
                    **roof_facts(h.device, precision, timing, measured)))
        reject_escaped_work(timing, limits, precision)
        verify()
        cublas = time_cublas(precision, shape, h.device, budget_s, problems)
    fraction = cublas.median_ms / timing.median_ms if timing.median_ms > 0 else 0.0
    record({"cublas": cublas.as_dict(), "fraction_of_cublas": fraction})
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
