"""The speed check: a kernel and cuBLAS at the same precision, timed in the same test.

Timed calls rotate over several input sets (more memory than the L2 holds),
C is poisoned before every timed call and the last timed output is verified,
so a kernel that skips work on repeated calls is caught (stale_output).
"""
from __future__ import annotations

from typing import Any, Callable

from . import categories as cat
from .cases import Shape, shape_str
from .categories import GemmCheckFailure
from .harness import Harness, poison_bits
from .roofs import roof_tflops
from .timing import TimingResult, gemm_flops, time_gpu

ROTATE = 3
_CUBLAS_TIMES: dict[tuple[str, Shape, int], TimingResult] = {}


def _timed_run(h: Harness, shape: Shape, budget_s: float) -> tuple[TimingResult, Callable[[], None]]:
    """Time ``h``'s kernel over rotating exact inputs; return the timing and a verifier."""
    import cupy

    from .inputs import exact_inputs
    from .reference import reference

    m, n, k = shape
    problems = [exact_inputs(m, n, k, precision=h.kernel.precision, seed=100 + i) for i in range(ROTATE)]
    buffers = [h.upload(p) for p in problems]
    poison = cupy.uint32(poison_bits())
    state = {"i": -1}

    def before() -> None:
        state["i"] = (state["i"] + 1) % ROTATE
        buffers[state["i"]][2].array.view(cupy.uint32).fill(poison)

    def call() -> None:
        a, b, c = buffers[state["i"] if state["i"] >= 0 else 0]
        h.loaded(a.array, b.array, c.array, m, n, k)

    timing = time_gpu(call, flops=gemm_flops(m, n, k), l2_bytes=h.device.l2_bytes, budget_s=budget_s,
                      before_each=before)

    def verify() -> None:
        i = state["i"]
        got = buffers[i][2].array
        want = reference(cupy.asarray(problems[i].a64), cupy.asarray(problems[i].b64), xp=cupy).astype(cupy.float32)
        if not bool(cupy.array_equal(got.view(cupy.uint32), want.view(cupy.uint32))):
            raise GemmCheckFailure(cat.STALE_OUTPUT, f"{h.kernel.name!r} at {shape_str(shape)}: the output of "
                                   "the last timed call is wrong although the kernel passed its correctness "
                                   "checks", ["timed calls get fresh inputs and a poisoned C each time; "
                                              "a kernel must compute every call (no caching, no first-call-only work)"])

    return timing, verify


def time_cublas(precision: str, shape: Shape, device: Any, budget_s: float) -> TimingResult:
    key = (precision, shape, device.index)
    if key not in _CUBLAS_TIMES:
        import reference_kernels

        baseline = reference_kernels.CUBLAS[precision]
        from .checks import harness_for

        timing, verify = _timed_run(harness_for(baseline, device), shape, budget_s)
        verify()
        _CUBLAS_TIMES[key] = timing
    return _CUBLAS_TIMES[key]


def check_speed(h: Harness, shape: Shape, record: Callable[[dict[str, Any]], None],
                min_fraction: float | None, budget_s: float = 1.0) -> None:
    timing, verify = _timed_run(h, shape, budget_s)
    verify()
    precision = h.kernel.precision
    cublas = time_cublas(precision, shape, h.device, budget_s)
    fraction = cublas.median_ms / timing.median_ms if timing.median_ms > 0 else 0.0
    roof = roof_tflops(h.device, precision)
    facts: dict[str, Any] = {
        "timing": dict(timing.as_dict(), shape=list(shape)),
        "cublas": cublas.as_dict(), "fraction_of_cublas": fraction,
        "roof_tflops": roof, "fraction_of_roof": timing.tflops / roof if roof else None,
    }
    record(facts)
    if roof and timing.tflops > 1.05 * roof:
        raise GemmCheckFailure(cat.TIMING_ESCAPE, f"{timing.tflops:.1f} TFLOP/s is faster than this GPU's "
                               f"{precision} roof ({roof:.1f} TFLOP/s): not ranked",
                               ["work was probably left outside the timed region (another stream or thread)"])
    if timing.escaped_ms > max(0.5, 0.5 * timing.median_ms):
        raise GemmCheckFailure(cat.TIMING_ESCAPE, f"{timing.escaped_ms:.2f} ms of GPU work was still running after "
                               f"the timed region ended (median {timing.median_ms:.3f} ms): not ranked",
                               ["launch all work on the current stream (cupy.cuda.get_current_stream())"])
    if min_fraction is not None and fraction < min_fraction:
        raise AssertionError(f"{h.kernel.name!r} runs at {fraction:.3f} of cuBLAS {precision} at "
                             f"{shape_str(shape)} ({timing.tflops:.2f} vs {cublas.tflops:.2f} TFLOP/s); "
                             f"--gemm-min-cublas-fraction asks for {min_fraction}")
