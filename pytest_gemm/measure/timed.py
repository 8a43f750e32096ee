"""Timed runs of a kernel's harness and of cuBLAS, and the judges of a timing.

Timed calls rotate over ``ROTATE`` buffer sets (more memory than the L2 holds),
and before each call (outside the timed region) the call's buffers receive the
next of ``DATA_SETS`` input sets (one more than there are buffers, so the same
address holds different data from one visit to the next) and C refilled with the sentinel.
``timed_run`` returns the timing and a verifier of the last timed output and
of one more call on values the buffers never held (``stale_output``); ``reject_escaped_work`` and ``reject_impossible_timing`` are
the ``timing_escape`` judges. The speed and sweep checks (``checks/``) use them.
"""
from __future__ import annotations

import contextlib
from typing import Any, Callable, ContextManager, NamedTuple

from ..judges.sentinels import FILL_BITS, unwritten_mask
from ..judges.inputs import exact_inputs
from ..judges.reference import reference
from ..kernels.harness import Harness, harness_for, keep_secret
from ..model import categories as cat
from ..model.categories import GemmCheckFailure
from ..model.contract import PyKernel
from ..model.precision import from_storage, negate_storage
from ..model.shapes import Shape, shape_str
from .cublas import CUBLAS
from .gpu_lock import gpu_lock
from .laps import Laps
from .quiet import wait_until_quiet
from .roof_bench import fma_probe
from .roofs import impossible_timing, reported_roof, roof_tflops
from .run_cache import shared
from .timing import TimingResult, escape_verdict, escaped_work, gemm_flops, time_gpu

ROTATE = 3               # buffer sets the timed calls rotate over


DATA_SETS = ROTATE + 1   # input sets cycled through them: an address never sees the same data twice running


_CUBLAS_TIMES: dict[tuple[str, Shape, int], TimingResult] = {}
ROOFS_ENTRY = "roofs"  # the run cache's name for a GPU's measured roofs


_PROBLEMS: dict[tuple[str, Shape], list[Any]] = {}


def problems_for(precision: str, shape: Shape) -> list[Any]:
    """The ``DATA_SETS`` exact input sets of a timed run (the same for a kernel and its cuBLAS baseline).

    Kept for the last (precision, shape) asked for: drawing them takes seconds at 4096^3 and
    more at 8192^3, and a process that times several kernels (the ladder ranked beside the
    kernels under test shares one) times them all on the same sets. One key only, so a
    process never holds more than one shape's sets."""
    key = (precision, tuple(shape))
    if key not in _PROBLEMS:
        _PROBLEMS.clear()
        _PROBLEMS[key] = [exact_inputs(*shape, precision=precision, seed=100 + i) for i in range(DATA_SETS)]
    return _PROBLEMS[key]


def warm_outside_lock(h: Harness, shape: Shape, problems: list[Any]) -> None:
    """A Python launcher's first call at the timed shape, before the timed check takes the GPU
    alone: a JIT compile or an autotuner's search (Triton's tutorial: 16 configs compiled and
    benchmarked) runs here, marked as running on the GPU (``GpuHold.presume_hung``), so timed
    checks elsewhere wait for it and every other check goes on. Inside the exclusive hold it
    stopped every process on the GPU for as long as the search took (the launch run's speed
    checks waited 367 s for the lock on the H200 at f3767e3). A CUDA C kernel is compiled and
    loaded when its process starts: nothing to warm here."""
    import cupy  # lazy: CuPy (the plugin loads with no GPU)

    if not isinstance(h.kernel, PyKernel):
        return
    m, n, k = shape
    with gpu_lock(False, what="speed warm-up") as hold:
        hold.presume_hung(warming=True)  # may take minutes: timed checks wait for its mark a while, the others not
        a, b, c = h.upload(problems[0])
        h.loaded(a.array, b.array, c.array, m, n, k)
        cupy.cuda.runtime.deviceSynchronize()  # none of its work runs on into a timing
        del a, b, c


class Staged(NamedTuple):
    """A timed run's inputs on the GPU: ``ROTATE`` guarded buffer sets and every input set's A and B."""
    buffers: list[Any]
    sources: list[tuple[Any, Any]]


def stage_inputs(h: Harness, problems: list[Any],
                 each: Callable[[], ContextManager[Any]] = contextlib.nullcontext) -> Staged:
    """Upload a timed run's buffers and input sets. It needs the GPU but not alone: the speed
    check stages them before it takes the GPU alone (the uploads were 0.28 s of a correct
    student's 1.03 s hold on the H100 at 7253405, 4096^3 fp32). ``each()`` is held around each
    buffer set's and each input set's copies, which have ended when it is let go of: the speed
    check's shared hold, so that a timing elsewhere waits for one set's copies, not all seven."""
    import cupy  # lazy: CuPy (the plugin loads with no GPU)

    buffers, sources = [], []
    for problem in problems[:ROTATE]:
        with each():
            buffers.append(h.upload(problem))
            cupy.cuda.runtime.deviceSynchronize()  # no copy runs on past the hold
    for problem in problems:
        with each():
            sources.append((cupy.asarray(problem.a), cupy.asarray(problem.b)))
            cupy.cuda.runtime.deviceSynchronize()
    return Staged(buffers, sources)


def timed_run(h: Harness, shape: Shape, budget_s: float, problems: list[Any] | None = None,
              stop_within: float | None = None, laps: Laps | None = None,
              staged: Staged | None = None) -> tuple[TimingResult, Callable[[], None]]:
    """Time ``h``'s kernel over rotating buffers and cycling exact inputs; return the timing and a
    verifier. ``stop_within``: the repeats' stopping rule (``timing.median_settled``), or None.
    ``staged``: ``problems`` already on the GPU (``stage_inputs``), or None to upload them here.
    ``laps``: where its seconds went ("uploads" of the inputs, near 0 when staged, then "timed":
    the warm-up, settling and timed calls)."""
    import cupy  # lazy: CuPy (the plugin loads with no GPU)

    m, n, k = shape
    if problems is None:
        problems = problems_for(h.kernel.precision, shape)
    buffers, sources = staged if staged is not None else stage_inputs(h, problems)
    poison = cupy.uint32(FILL_BITS)  # finite: reading C at beta == 0 is the beta_zero check's business
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

    if laps is not None:
        laps.lap("uploads")
    timing = time_gpu(call, flops=gemm_flops(m, n, k), l2_bytes=h.device.l2_bytes, budget_s=budget_s,
                      before_each=before, stop_within=stop_within)
    if laps is not None:
        laps.lap("timed")

    def verify() -> None:
        a, b, c = buffers[state["slot"]]
        # from the input set's copy already on the GPU: no upload inside the shared hold
        on_gpu = sources[state["data"]]
        precision = problems[state["data"]].precision
        want = reference(*(from_storage(x, precision, cupy) for x in on_gpu), xp=cupy).astype(cupy.float32)
        keep_secret(want, *(cc.array for _, _, cc in buffers))  # cuBLAS's outputs are right answers too
        _reject_wrong(c.array, want, f"the output of the last of {timing.repeats} timed calls")
        # Once more, outside the timing, on values these buffers never held (A negated: exact, and
        # C = -(A@B)). A result kept per address can be right for the last timed call: the data
        # sets cycle through the buffers, so whenever the last call's index mod 12 is 0 to 2 its
        # buffers hold what they held when the copy was taken.
        cupy.copyto(a.array, negate_storage(sources[state["data"]][0]))
        cupy.copyto(b.array, sources[state["data"]][1])
        c.array.view(cupy.uint32).fill(poison)
        # The inputs in place before the call, as in every other correctness check (their uploads
        # are synchronous): this call is not timed, and the speed check verifies on a GPU shared
        # with other processes, where a launcher whose own stream does not wait for the caller's
        # read A half negated (tests/untrusted head_start: stale_output on the H100 at c435a10).
        cupy.cuda.runtime.deviceSynchronize()
        h.loaded(a.array, b.array, c.array, m, n, k)
        _reject_wrong(c.array, -want, "called once more after the timed calls, with A negated in the same buffers, "
                                      "its output")

    def _reject_wrong(got: Any, want: Any, what: str) -> None:
        # the same value, bit for bit but for the sign of zero (IEEE arithmetic promises no sign there)
        if bool(cupy.all((got == want) | (got.view(cupy.uint32) == want.view(cupy.uint32)))):
            return
        unwritten = int(unwritten_mask(got, xp=cupy).sum())
        how = (f"{unwritten} of {got.size} outputs were never written" if unwritten
               else "every output was written, with wrong values")
        raise GemmCheckFailure(cat.STALE_OUTPUT, f"{h.kernel.name!r} at {shape_str(shape)}: {what} is wrong ({how})",
                               ["timed calls get fresh inputs (the same buffers hold new data) and C refilled with the sentinel "
                                "each time; a kernel must compute every call (no caching of results by address, "
                                "no first-call-only work, no skipping repeated calls)"])

    return timing, verify


def time_cublas(precision: str, shape: Shape, device: Any, budget_s: float,
                problems: list[Any] | None = None, stop_within: float | None = None,
                staged: Staged | None = None) -> TimingResult:
    """cuBLAS at ``precision`` and ``shape``: once per process and device, and once per run
    and GPU where the run shares its measurements (``run_cache.py``). Call it holding the
    GPU exclusively (``gpu_lock``). ``staged``: ``problems`` already on the GPU, for cuBLAS's
    harness (``stage_inputs``), or None."""
    key = (precision, shape, device.index)
    if key not in _CUBLAS_TIMES:
        def measure() -> dict[str, Any]:
            timing, verify = timed_run(harness_for(CUBLAS[precision], device), shape, budget_s, problems, stop_within,
                                       staged=staged)
            verify()
            return timing.as_dict()

        what = cublas_entry(precision, shape, budget_s, stop_within)
        _CUBLAS_TIMES[key] = TimingResult.from_dict(shared(device, what, measure))
    return _CUBLAS_TIMES[key]


def cublas_entry(precision: str, shape: Shape, budget_s: float, stop_within: float | None) -> str:
    """The run cache's name for cuBLAS timed at ``precision`` and ``shape`` with these options."""
    return f"cublas-{precision}-{shape_str(shape)}-{budget_s:g}s" + (f"-stop{stop_within:g}" if stop_within else "")


def process_roofs(device: Any, measure: bool = True) -> dict[str, Any]:
    """This process's measured roofs (``roof_bench.measured_roofs``, cached; shared by the run
    where ``run_cache.py`` says so), or {} when not measured. Call it holding the GPU exclusively."""
    if not measure:
        return {}
    from .roof_bench import measured_roofs  # lazy: a test replaces measured_roofs on its module

    try:
        return shared(device, ROOFS_ENTRY, lambda: measured_roofs(device))
    except Exception as exc:  # noqa: BLE001 - the theoretical peaks still judge; report why
        return {"errors": {"all": f"{type(exc).__name__}: {exc}"[:300]}}


def gpu_quiet(device: Any, measured: dict[str, Any],
              step_aside: Callable[[float], bool] | None = None) -> dict[str, Any]:
    """Wait until no other context's work shares the GPU (``quiet.py``), against the measured
    FP32 roof; call it holding the GPU exclusively, just before timing (``step_aside``: the
    hold's ``GpuHold.step_aside``, so that the shared holders run while the GPU is busy)."""
    roof = (measured.get("tflops") or {}).get("fp32")
    if not roof:
        return wait_until_quiet(lambda: 0.0, None)
    try:
        probe = fma_probe(device)
    except Exception as exc:  # noqa: BLE001 - the timing still runs; say why it was not checked
        return dict(wait_until_quiet(lambda: 0.0, None), error=f"{type(exc).__name__}: {exc}"[:200])
    return wait_until_quiet(probe, roof, step_aside=step_aside)


def roof_facts(device: Any, precision: str, timing: TimingResult, measured: dict[str, Any]) -> dict[str, Any]:
    """The roof figures a timing is reported with: the theoretical peak, the measured roof,
    the fraction of the measured roof (of the peak when none was measured) and which one."""
    peak = roof_tflops(device, precision)
    roof, kind = reported_roof(precision, measured, peak)
    if kind == "measured" and timing.tflops > roof:
        # The roof was measured at another shape (cuBLAS at 8192^3, an FMA loop): a rate above it
        # shows the bound is at least this rate here, so "of roof" never reads over 100 %.
        roof = timing.tflops
    facts = {"roof_tflops": peak, "measured_roof_tflops": roof if kind == "measured" else None,
             "roof_kind": kind, "fraction_of_roof": timing.tflops / roof if roof else None,
             "roofs": measured or None}
    if getattr(device, "warnings", ()):
        facts["device_warnings"] = list(device.warnings)
    return facts


def reject_escaped_work(timing: TimingResult, limits: Any, precision: str, where: str = "") -> None:
    """timing_escape when work was still running after the timed region ended."""
    if escaped_work(timing) is not None:
        summary, details = escape_verdict(timing, limits.tflops, getattr(limits, "basis", "") or precision)  # type: ignore[misc]
        raise GemmCheckFailure(cat.TIMING_ESCAPE, where + summary, details)


def reject_impossible_timing(timing: TimingResult, shape: Shape, precision: str, limits: Any,
                             where: str = "") -> None:
    """timing_escape for a time the hardware cannot deliver (arithmetic or memory roof)."""
    impossible = impossible_timing(timing, shape, precision, limits)
    if impossible is not None:
        raise GemmCheckFailure(cat.TIMING_ESCAPE, where + impossible[0], impossible[1])
