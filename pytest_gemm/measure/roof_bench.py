"""Roofs measured on this GPU, once per process and device: an FP32 FMA micro-benchmark
(``roofs.cu``), cuBLAS at 8192^3 for the tensor-core precisions, a device-to-device copy for
memory bandwidth. Needs a GPU; the pure model (peaks, ceilings, judges) is ``roofs.py``."""
from __future__ import annotations

import statistics
import time
from typing import Any, Callable

from .roofs import (CHAINS, FMA_TARGET_MS, FMA_THREADS, PRECISIONS, REPEATS, UNROLL, calibrated_iterations,
                    copy_bytes, copy_gb_s, fma_blocks, fma_flops, rate_tflops, roof_tflops, tensor_precisions,
                    tensor_size, memory_peak_gb_s)
from ..kernels.package_kernels import package_function
from .cublas import CUBLAS
from .timing import gemm_flops, time_gpu
import numpy as np

_MEASURED: dict[tuple[int, str], dict[str, Any]] = {}
PROBE_MS = 5.0      # one launch of the quiet probe
PROBE_LAUNCHES = 3  # the probe's rate is their median


def _event_ms(fn: Callable[[], Any]) -> float:
    import cupy  # lazy: CuPy (the plugin loads with no GPU)

    null = cupy.cuda.Stream.null
    start, end = cupy.cuda.Event(), cupy.cuda.Event()
    with null:
        start.record(null)
        fn()
        end.record(null)
    end.synchronize()
    return float(cupy.cuda.get_elapsed_time(start, end))


def _free_memory() -> None:
    """Hand the benchmarks' buffers back (CuPy's pool keeps them otherwise)."""
    try:
        import cupy  # lazy: CuPy (the plugin loads with no GPU)

        cupy.get_default_memory_pool().free_all_blocks()
    except Exception:  # noqa: BLE001 - only housekeeping
        pass


def _fma_function(device: Any) -> Any:
    """``gemm_roof_fma`` compiled for this device."""

    return package_function(device.arch, "roofs.cu", "gemm_roof_fma",
                            options=(f"-DCHAINS={CHAINS}", f"-DUNROLL={UNROLL}"), block=(FMA_THREADS,))


def _fma_timer(device: Any, target_ms: float) -> Callable[[], float]:
    """A function that times one launch of the FMA kernel, grown to about ``target_ms``, and
    returns its rate in TFLOP/s (the growing launches also settle the clocks)."""
    import cupy  # lazy: CuPy (the plugin loads with no GPU)

    fn = _fma_function(device)
    blocks = fma_blocks(device.sm_count, device.max_threads_per_sm)
    out = cupy.empty(blocks * FMA_THREADS, dtype=cupy.float32)
    a, b = np.float32(0.999999), np.float32(1.0e-6)  # x -> b / (1 - a) = 1: no overflow, no denormals

    def launch(iters: int) -> Callable[[], None]:
        return lambda: fn((blocks,), (FMA_THREADS,), (out, a, b, np.int32(iters)))

    iters = 64
    ms = _event_ms(launch(iters))
    while ms < 0.5 * target_ms and iters < 1 << 24:
        iters = calibrated_iterations(iters, ms, target_ms)
        ms = _event_ms(launch(iters))
    flops = fma_flops(blocks * FMA_THREADS, iters)
    return lambda: rate_tflops(flops, _event_ms(launch(iters)))


def _measure_fma(device: Any) -> float:
    timer = _fma_timer(device, FMA_TARGET_MS)
    return statistics.median(timer() for _ in range(REPEATS))


_PROBES: dict[int, Callable[[], float]] = {}


def fma_probe(device: Any) -> Callable[[], float]:
    """A short FMA probe for ``quiet.wait_until_quiet``: the median rate of ``PROBE_LAUNCHES``
    launches of about ``PROBE_MS`` each, in TFLOP/s (calibrated once per process and device)."""
    key = int(getattr(device, "index", 0))
    if key not in _PROBES:
        timer = _fma_timer(device, PROBE_MS)
        _PROBES[key] = lambda: statistics.median(timer() for _ in range(PROBE_LAUNCHES))
    return _PROBES[key]


def _measure_copy(device: Any) -> float:
    import cupy  # lazy: CuPy (the plugin loads with no GPU)

    nbytes = copy_bytes(device.total_memory, device.l2_bytes)
    src = cupy.ones(nbytes // 4, dtype=cupy.float32)
    dst = cupy.empty_like(src)
    null = cupy.cuda.Stream.null

    def copy() -> None:
        dst.data.copy_from_device_async(src.data, src.nbytes, null)

    for _ in range(2):
        copy()
    times = [_event_ms(copy) for _ in range(REPEATS)]
    return copy_gb_s(nbytes // 4 * 4, statistics.median(times))


def _random_storage(precision: str, shape: tuple[int, int]) -> Any:
    import cupy  # lazy: CuPy (the plugin loads with no GPU)

    values = cupy.random.default_rng(7).uniform(-1.0, 1.0, size=shape, dtype=cupy.float32)
    if precision == "fp16":
        return values.astype(cupy.float16)
    if precision == "bf16":  # bf16 bit patterns: the upper half of the float32
        return (values.view(cupy.uint32) >> 16).astype(cupy.uint16)
    return values


def _measure_cublas(device: Any, precision: str) -> float:
    import cupy  # lazy: CuPy (the plugin loads with no GPU)


    size = tensor_size(device.total_memory)
    launcher = CUBLAS[precision].fn
    a = _random_storage(precision, (size, size))
    b = _random_storage(precision, (size, size))
    c = cupy.empty((size, size), dtype=cupy.float32)
    with cupy.cuda.Stream.null:
        timing = time_gpu(lambda: launcher(a, b, c), flops=gemm_flops(size, size, size), warmup=2,
                          min_repeats=REPEATS, max_repeats=20, budget_s=0.25,
                          settle_ms=0.0)  # the FMA roof, measured first, has settled the clocks
    return timing.tflops


def methods(device: Any) -> dict[str, str]:
    """How each roof is measured, in words (kept with the figures)."""
    size = tensor_size(getattr(device, "total_memory", 0))
    nbytes = copy_bytes(getattr(device, "total_memory", 0), getattr(device, "l2_bytes", 0))
    blocks = fma_blocks(getattr(device, "sm_count", 1), getattr(device, "max_threads_per_sm", 1024))
    cublas = f"cuBLAS GemmEx {size}^3, fp32 out, median of event-timed calls"
    return {"fp32": f"roofs.cu gemm_roof_fma: {CHAINS} FMA chains x {UNROLL} per iteration, {blocks} blocks of "
                    f"{FMA_THREADS} threads, ~{FMA_TARGET_MS:g} ms launches, median of {REPEATS}",
            "fp16": cublas + " (fp16 in, COMPUTE_32F)", "bf16": cublas + " (bf16 in, COMPUTE_32F)",
            "tf32": cublas + " (fp32 in, COMPUTE_32F_FAST_TF32)",
            "memory": f"device-to-device copy of {nbytes / 2**20:.0f} MiB, bytes read + written, median of {REPEATS}"}


def measured_roofs(device: Any) -> dict[str, Any]:
    """Measure this device's roofs, once per process (later calls return the cached dict).

    ``{"device", "arch", "tflops": {precision: TFLOP/s}, "memory_gb_s", "theoretical_tflops",
    "theoretical_memory_gb_s", "methods", "errors", "seconds"}``: JSON-able, so a sandbox child
    can hand it to the parent. A roof that could not be measured is absent (its error kept)."""
    key = (int(getattr(device, "index", 0)), str(getattr(device, "name", "")))
    if key in _MEASURED:
        return _MEASURED[key]
    started = time.perf_counter()
    tflops: dict[str, float] = {}
    errors: dict[str, str] = {}
    memory: float | None = None
    jobs: list[tuple[str, Callable[[], float]]] = [("fp32", lambda: _measure_fma(device))]
    jobs += [(p, (lambda p=p: _measure_cublas(device, p))) for p in tensor_precisions(device.compute_capability)]
    for name, job in jobs:
        try:
            tflops[name] = job()
        except Exception as exc:  # noqa: BLE001 - a roof we cannot measure is reported, not fatal
            errors[name] = f"{type(exc).__name__}: {exc}"[:300]
    try:
        memory = _measure_copy(device)
    except Exception as exc:  # noqa: BLE001
        errors["memory"] = f"{type(exc).__name__}: {exc}"[:300]
    _free_memory()
    result = {
        "device": str(getattr(device, "name", "")), "arch": getattr(device, "arch", None),
        "tflops": tflops, "memory_gb_s": memory,
        "theoretical_tflops": {p: roof_tflops(device, p) for p in PRECISIONS},
        "theoretical_memory_gb_s": memory_peak_gb_s(device),
        "methods": methods(device), "errors": errors,
        "seconds": round(time.perf_counter() - started, 3),
    }
    _MEASURED[key] = result
    return result
