"""CUDA-event timing: warm-up, repeats within a time budget, median and spread.

Between timed calls the L2 is flushed (a buffer twice its size is written) so a
kernel is not timed on a warm cache. Events are recorded on the legacy default
stream, which waits for every blocking stream; a final device synchronise then
measures any work still running elsewhere (``escaped_ms``), which the caller
reports as ``timing_escape``.
"""
from __future__ import annotations

import statistics
import time
from dataclasses import asdict, dataclass
from typing import Any, Callable


@dataclass(frozen=True)
class TimingResult:
    median_ms: float
    min_ms: float
    q1_ms: float
    q3_ms: float
    repeats: int
    flops: float
    escaped_ms: float = 0.0

    @property
    def spread(self) -> float:
        """Interquartile range over the median (0.02 = 2 %)."""
        return (self.q3_ms - self.q1_ms) / self.median_ms if self.median_ms > 0 else 0.0

    @property
    def tflops(self) -> float:
        return self.flops / (self.median_ms * 1e-3) / 1e12 if self.median_ms > 0 else 0.0

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.update(spread=self.spread, tflops=self.tflops)
        return d


def summarize(times_ms: list[float], flops: float, escaped_ms: float = 0.0) -> TimingResult:
    """Median, minimum and quartiles of a list of times (pure, testable without a GPU)."""
    if not times_ms:
        raise ValueError("no timings to summarise")
    ordered = sorted(times_ms)
    if len(ordered) >= 4:
        q1, _, q3 = statistics.quantiles(ordered, n=4, method="inclusive")
    else:
        q1, q3 = ordered[0], ordered[-1]
    return TimingResult(statistics.median(ordered), ordered[0], q1, q3, len(ordered), flops, escaped_ms)


def gemm_flops(m: int, n: int, k: int) -> float:
    return 2.0 * m * n * k


class L2Flusher:
    """Writes a buffer larger than the L2 so the next kernel starts cold."""

    def __init__(self, l2_bytes: int):
        import cupy

        self.buffer = cupy.empty(max(2 * l2_bytes, 1 << 20) // 4, dtype=cupy.float32)

    def __call__(self) -> None:
        self.buffer.fill(0.0)


def time_gpu(fn: Callable[[], Any], *, flops: float, l2_bytes: int = 0, warmup: int = 2,
             min_repeats: int = 5, max_repeats: int = 100, budget_s: float = 1.0,
             before_each: Callable[[], Any] | None = None) -> TimingResult:
    """Time ``fn`` (which launches GPU work) with CUDA events.

    Repeats until ``budget_s`` of measured GPU time or ``max_repeats``, never
    fewer than ``min_repeats``. ``before_each`` runs outside the timed region
    (e.g. to rotate inputs); the L2 is flushed before each call when l2_bytes > 0.
    """
    import cupy

    flush = L2Flusher(l2_bytes) if l2_bytes else None
    null = cupy.cuda.Stream.null
    for _ in range(warmup):
        fn()
    cupy.cuda.runtime.deviceSynchronize()
    times: list[float] = []
    escaped = 0.0
    spent = 0.0
    start, end = cupy.cuda.Event(), cupy.cuda.Event()
    while len(times) < max_repeats and (len(times) < min_repeats or spent < budget_s * 1e3):
        if before_each is not None:
            before_each()
        if flush is not None:
            flush()
        start.record(null)
        fn()
        end.record(null)
        end.synchronize()
        elapsed = cupy.cuda.get_elapsed_time(start, end)
        t0 = time.perf_counter()
        cupy.cuda.runtime.deviceSynchronize()  # work left on other streams shows up here
        escaped = max(escaped, (time.perf_counter() - t0) * 1e3)
        times.append(elapsed)
        spent += elapsed
    return summarize(times, flops, escaped)
