"""CUDA-event timing: warm-up, repeats within a time budget, median and spread.

Between timed calls the L2 is flushed (a buffer twice its size is written) so a
kernel is not timed on a warm cache. The events, the flush and ``before_each``
all run on the legacy default stream: it waits for every blocking stream (a
plain ``cupy.cuda.Stream()``, the per-thread default stream), so work a kernel
launches there is inside the timed region, and nothing of the harness's own is
left running when a timed call ends. A GPU-side wait in front of the start event keeps the
host's launch time out of the timed region (``launch_guard.py``).

Escaped work. After the end event has completed, a device synchronise waits for
whatever the call left running anywhere else: a ``Stream(non_blocking=True)``,
which the legacy stream does not wait for, or work on another thread. Its host
wall time is that call's escape (an honest call leaves nothing: a few
microseconds, the cost of the call itself). ``escaped_ms`` is the upper
quartile of the per-call escapes, so one call delayed by the operating system
cannot fire it, while a kernel that escapes on a quarter of its calls or more
does; ``escaped_max_ms`` is the largest. The pure judges: ``escaped_work`` (an
escape above ``max(ESCAPE_FLOOR_MS, ESCAPE_FRACTION * median)``) and
``above_roof`` (a rate above ``ROOF_MARGIN`` times the hardware roof); either is
a ``timing_escape``. ``escape_verdict`` applies both, escaped work first.
"""
from __future__ import annotations

import math
import statistics
import time
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Callable

ESCAPE_FLOOR_MS = 0.5   # escaped work below this is never flagged (host jitter, tiny shapes)
ESCAPE_FRACTION = 0.5   # ... nor below this fraction of the timed median
ROOF_MARGIN = 1.05      # a rate this far above the roof is physically impossible


@dataclass(frozen=True)
class TimingResult:
    median_ms: float
    min_ms: float
    q1_ms: float
    q3_ms: float
    repeats: int
    flops: float
    escaped_ms: float = 0.0      # upper quartile of the per-call escaped work
    escaped_max_ms: float = 0.0  # the largest per-call escape
    late_launches: int = 0       # calls kept although the launch guard may have run out (launch_guard.py)
    # every timed call's ms, in call order: what --gemm-compare's statistic reads (outputs/speed_stats.py)
    times_ms: tuple[float, ...] = field(default=(), repr=False)

    @property
    def spread(self) -> float:
        """Interquartile range over the median (0.02 = 2 %)."""
        return (self.q3_ms - self.q1_ms) / self.median_ms if self.median_ms > 0 else 0.0

    @property
    def tflops(self) -> float:
        return self.flops / (self.median_ms * 1e-3) / 1e12 if self.median_ms > 0 else 0.0

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.update(spread=self.spread, tflops=self.tflops, times_ms=list(self.times_ms))
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "TimingResult":
        """The inverse of ``as_dict`` (derived figures and unknown keys are ignored)."""
        kept = {f.name: d[f.name] for f in fields(cls) if f.name in d}
        kept["times_ms"] = tuple(kept.get("times_ms") or ())
        return cls(**kept)


def _quartiles(ordered: list[float]) -> tuple[float, float]:
    if len(ordered) >= 4:
        q1, _, q3 = statistics.quantiles(ordered, n=4, method="inclusive")
        return q1, q3
    return ordered[0], ordered[-1]


def summarize(times_ms: list[float], flops: float, escaped_ms: float | list[float] = 0.0,
              late_launches: int = 0) -> TimingResult:
    """Median, minimum and quartiles of a list of times (pure, testable without a GPU); the
    times themselves are kept in call order (``times_ms``, to the nanosecond).

    ``escaped_ms`` is one figure, or the per-call escapes (then their upper
    quartile and maximum are kept)."""
    if not times_ms:
        raise ValueError("no timings to summarise")
    ordered = sorted(times_ms)
    q1, q3 = _quartiles(ordered)
    if isinstance(escaped_ms, (int, float)):
        escaped, escaped_max = float(escaped_ms), float(escaped_ms)
    else:
        escapes = sorted(escaped_ms) or [0.0]
        escaped, escaped_max = _quartiles(escapes)[1], escapes[-1]
    return TimingResult(statistics.median(ordered), ordered[0], q1, q3, len(ordered), flops, escaped,
                        escaped_max, late_launches, tuple(round(float(t), 6) for t in times_ms))


def escaped_work(timing: TimingResult) -> tuple[str, list[str]] | None:
    """(summary, details) when work was still running after the timed region ended, else None."""
    if timing.escaped_ms <= max(ESCAPE_FLOOR_MS, ESCAPE_FRACTION * timing.median_ms):
        return None
    return (f"{timing.escaped_ms:.2f} ms of GPU work was still running after the timed region ended "
            f"(median {timing.median_ms:.3f} ms): not ranked",
            [f"a device synchronise after the end event still waited {timing.escaped_ms:.2f} ms "
             f"(upper quartile over {timing.repeats} calls; largest {timing.escaped_max_ms:.2f} ms)",
             "launch all work on the current stream (cupy.cuda.get_current_stream()); a "
             "Stream(non_blocking=True) or another thread escapes the timed region"])


def above_roof(timing: TimingResult, roof_tflops: float, precision: str = "fp32") -> tuple[str, list[str]] | None:
    """(summary, details) when the rate is above ``ROOF_MARGIN`` x the roof (> 0), else None."""
    if roof_tflops <= 0 or timing.tflops <= ROOF_MARGIN * roof_tflops:
        return None
    return (f"{timing.tflops:.1f} TFLOP/s is faster than this GPU's {precision} roof "
            f"({roof_tflops:.1f} TFLOP/s): not ranked",
            [f"median {timing.median_ms:.4f} ms for {timing.flops / 1e9:.1f} GFLOP",
             "work was probably left outside the timed region (another stream or thread), "
             "or results were reused instead of computed"])


def escape_verdict(timing: TimingResult, roof_tflops: float = 0.0,
                   precision: str = "fp32") -> tuple[str, list[str]] | None:
    """Why a timing cannot be ranked (summary, details), or None when it is credible:
    escaped work first (it says what happened), then a rate above the roof."""
    escaped = escaped_work(timing)
    if escaped is not None:
        roof = above_roof(timing, roof_tflops, precision)
        if roof is not None:
            escaped[1].insert(1, "the timed part alone: " + roof[0].replace(": not ranked", ""))
        return escaped
    return above_roof(timing, roof_tflops, precision)


def gemm_flops(m: int, n: int, k: int) -> float:
    return 2.0 * m * n * k


class L2Flusher:
    """Writes a buffer larger than the L2 so the next kernel starts cold."""

    def __init__(self, l2_bytes: int):
        import cupy  # lazy: CuPy (the plugin loads with no GPU)

        self.buffer = cupy.empty(max(2 * l2_bytes, 1 << 20) // 4, dtype=cupy.float32)

    def __call__(self) -> None:
        release_persisting_l2()
        self.buffer.fill(0.0)


PERSISTING_L2_LIMIT = 0x06  # cudaLimitPersistingL2CacheSize


def release_persisting_l2() -> None:
    """No L2 set aside for persisting accesses: a launcher that marks its inputs persisting
    (an access policy window) cannot keep them in L2 across the flush. sm_80 and later; a
    device without the limit refuses it, which is fine."""
    import cupy  # lazy: CuPy (the plugin loads with no GPU)

    try:
        if cupy.cuda.runtime.deviceGetLimit(PERSISTING_L2_LIMIT):
            cupy.cuda.runtime.deviceSetLimit(PERSISTING_L2_LIMIT, 0)
    except cupy.cuda.runtime.CUDARuntimeError:
        pass


DEFAULT_BUDGET_S = 1.0  # measured GPU seconds a timing repeats for (the speed check's default; gemm_speed_budget)
SETTLE_MS = 200.0  # GPU time spent in untimed calls before the first timed one (clocks settle)
# The speed check's stopping rule (gemm_speed_stop): repeats end, before the budget, once the
# median is known to within this fraction. Replayed on the H200's speed-check samples at b9cffe2
# (tests/data/h200_speed_samples.json: 16 timings, 52 to 100 calls of 0.06 to 19 ms): stopping at
# 0.1 % after at least 12 calls kept every median within 0.06 % of its full run's, in 35 % of the GPU time.
DEFAULT_STOP = 0.001


def speed_settings(options: dict[str, Any]) -> tuple[float, float | None]:
    """(budget_s, stop_within) of a speed check from the options the runner sends it."""
    return float(options.get("speed_budget_s") or DEFAULT_BUDGET_S), options.get("speed_stop", DEFAULT_STOP)


STOP_MIN_CALLS = 12  # one full cycle of the speed check's inputs (3 buffer sets x 4 data sets)
STOP_CONFIDENCE = 0.95


def median_interval(times_ms: list[float], confidence: float = STOP_CONFIDENCE) -> tuple[float, float] | None:
    """A distribution-free interval holding the median of the times' distribution with at least
    ``confidence`` (order statistics: the true median lies below the j-th smallest of n calls with
    a binomial probability), or None when n calls are too few for it. Pure."""
    n = len(times_ms)
    ordered = sorted(times_ms)
    tail, j = 0.0, 0
    for i in range(n // 2):
        tail += math.comb(n, i) / 2 ** n  # P(fewer than i + 1 calls fall below the median)
        if tail > (1 - confidence) / 2:
            break
        j = i + 1
    if j == 0:
        return None
    return ordered[j - 1], ordered[n - j]


def median_settled(times_ms: list[float], within: float, min_calls: int = STOP_MIN_CALLS) -> bool:
    """Is the median of these timed calls known to within ``within`` (a fraction of it), after at
    least ``min_calls``? Pure: the speed check's stopping rule."""
    if len(times_ms) < min_calls:
        return False
    interval = median_interval(times_ms)
    if interval is None:
        return False
    median = statistics.median(times_ms)
    return median > 0 and interval[1] - median <= within * median and median - interval[0] <= within * median


def time_gpu(fn: Callable[[], Any], *, flops: float, l2_bytes: int = 0, warmup: int = 2,
             min_repeats: int = 5, max_repeats: int = 100, budget_s: float = DEFAULT_BUDGET_S,
             before_each: Callable[[], Any] | None = None, settle_ms: float = SETTLE_MS,
             guard_launches: bool = True, stop_within: float | None = None) -> TimingResult:
    """Time ``fn`` (which launches GPU work) with CUDA events.

    ``warmup`` plain calls first (lazy loading, caches), then untimed calls exactly like the
    timed ones until ``settle_ms`` of GPU time has passed: a GPU that was idle, or busy with
    something lighter, runs its first tens of milliseconds at other clocks, and a median taken
    there moves from one process to the next. Then repeats until ``budget_s`` of measured
    (and escaped) GPU time or ``max_repeats``, never fewer than ``min_repeats``; with
    ``stop_within`` also once the median is known to within that fraction (``median_settled``).
    ``before_each`` runs outside the timed region (e.g. to rotate inputs); the L2 is flushed
    before each call when l2_bytes > 0. Both run on the legacy default stream, whatever
    stream ``fn`` left current. With ``guard_launches`` a GPU-side wait sits in front of the
    start event so the host's launch time stays outside the timed region (launch_guard.py).
    """
    import cupy  # lazy: CuPy (the plugin loads with no GPU)

    from .trace import call_awaited  # lazy: keeps judges, judges.launches, measure.trace out of the plugin's load

    null = cupy.cuda.Stream.null
    with null:
        flush = L2Flusher(l2_bytes) if l2_bytes else None
    for _ in range(warmup):
        fn()
    cupy.cuda.runtime.deviceSynchronize()
    start, end = cupy.cuda.Event(), cupy.cuda.Event()
    guard = None
    if guard_launches:
        # lazy: keeps kernels.compiler, kernels.package_kernels, measure.launch_guard out of the plugin's load
        from .launch_guard import LaunchGuard

        guard = LaunchGuard()

    def one_call() -> tuple[float, float]:
        """(event-timed ms, escaped ms) of one call, prepared like every timed call; a call
        whose launch may have outlasted the guard is timed again with a longer guard."""
        while True:
            with null:  # a kernel may have made another stream current (Stream.use())
                if before_each is not None:
                    before_each()
                if flush is not None:
                    flush()
                if guard is not None:
                    guard.hold(null)
            start.record(null)
            fn()
            end.record(null)
            late = guard is not None and guard.late()
            end.synchronize()
            call_awaited()  # the harness's wait for this call ended (the launch trace judges after it)
            elapsed = cupy.cuda.get_elapsed_time(start, end)
            t0 = time.perf_counter()
            cupy.cuda.runtime.deviceSynchronize()  # work left on other streams shows up here
            escaped = (time.perf_counter() - t0) * 1e3
            if guard is None or not guard.policy.retime(late):
                return elapsed, escaped

    settled = 0.0
    for _ in range(max_repeats):
        if settled >= settle_ms:
            break
        elapsed, escaped = one_call()
        settled += elapsed + escaped
    late_before = guard.policy.late_kept if guard is not None else 0  # the settling calls are not kept
    times: list[float] = []
    escapes: list[float] = []
    spent = 0.0
    while len(times) < max_repeats and (len(times) < min_repeats or spent < budget_s * 1e3):
        if stop_within and len(times) >= min_repeats and median_settled(times, stop_within):
            break
        elapsed, escaped = one_call()
        escapes.append(escaped)
        times.append(elapsed)
        spent += elapsed + escaped  # escaped work counts against the budget too
    return summarize(times, flops, escapes, guard.policy.late_kept - late_before if guard is not None else 0)
