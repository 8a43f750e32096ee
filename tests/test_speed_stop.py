"""The speed check's stopping rule (gemm_speed_stop, measure/timing.py ``median_settled``): its
repeats end before their budget once the median is known to within 0.1 %. No GPU: the rule is
pure, ``time_gpu``'s loop runs on a stand-in CuPy, and the rule is replayed on the per-call times
the H200 gave the GPU suite's kernels at b9cffe2 (tests/data/h200_speed_samples.json)."""
from __future__ import annotations

import contextlib
import json
import math
import statistics
import sys
import types
from pathlib import Path

import pytest

from pytest_gemm.measure import timing
from pytest_gemm.measure.timing import DEFAULT_STOP, STOP_MIN_CALLS, median_interval, median_settled

SAMPLES = Path(__file__).resolve().parent / "data" / "h200_speed_samples.json"


def _coverage(n: int, j: int) -> float:
    """P(the j-th smallest and j-th largest of n calls straddle the median)."""
    return 1 - 2 * sum(math.comb(n, i) for i in range(j)) / 2 ** n


def test_the_interval_is_the_order_statistics_with_95_percent_coverage():
    assert median_interval([1.0] * 5) is None  # 5 calls: even (min, max) covers only 93.75 %
    assert median_interval([3.0, 1.0, 2.0, 6.0, 5.0, 4.0]) == (1.0, 6.0)  # 96.9 %
    for n in range(6, 101):
        times = [float(i) for i in range(n)]
        lo, hi = median_interval(times)
        j = int(lo) + 1
        assert hi == n - j
        assert _coverage(n, j) >= 0.95 > _coverage(n, j + 1)  # the narrowest interval that still covers


def test_a_steady_kernel_settles_at_the_first_full_cycle_and_a_noisy_one_does_not():
    steady = [1.0 + 0.0001 * ((7 * i) % 5) for i in range(STOP_MIN_CALLS)]
    assert median_settled(steady, DEFAULT_STOP)
    assert not median_settled(steady[:-1], DEFAULT_STOP)  # fewer calls than one cycle of the inputs
    noisy = [1.0 + 0.01 * ((7 * i) % 5) for i in range(100)]  # a 4 % spread
    assert not median_settled(noisy, DEFAULT_STOP)
    assert median_settled(noisy, 0.05)
    one_slow = steady + [1.5]  # one call delayed by the operating system does not move the median's interval
    assert median_settled(one_slow, DEFAULT_STOP)


def test_replayed_on_the_h200s_samples_the_medians_stay_within_a_tenth_of_a_percent():
    data = json.loads(SAMPLES.read_text())
    spent = full = 0.0
    stopped_early = 0
    for series in data["series"]:
        times = series["times_ms"]
        n = next((n for n in range(STOP_MIN_CALLS, len(times) + 1) if median_settled(times[:n], DEFAULT_STOP)),
                 len(times))
        whole = statistics.median(times)
        assert abs(statistics.median(times[:n]) - whole) <= DEFAULT_STOP * whole, (series["kernel"], n)
        stopped_early += n < len(times)
        spent += sum(times[:n])
        full += sum(times)
    assert len(data["series"]) == 16 and stopped_early >= 12
    assert spent < 0.4 * full  # 35 % of the GPU time at b9cffe2 (docs/options.md)


class _FakeCuda:
    """Just enough of CuPy for ``time_gpu``: each timed call's elapsed time comes from ``times``."""

    def __init__(self, times: list[float]):
        self.times = iter(times)
        event = types.SimpleNamespace(record=lambda stream=None: None, synchronize=lambda: None)
        self.cuda = types.SimpleNamespace(
            Stream=types.SimpleNamespace(null=contextlib.nullcontext()),
            Event=lambda: event,
            get_elapsed_time=lambda start, end: next(self.times),
            runtime=types.SimpleNamespace(deviceSynchronize=lambda: None))


@pytest.mark.parametrize(("stop", "calls"), [(DEFAULT_STOP, STOP_MIN_CALLS), (None, 100)])
def test_time_gpu_stops_once_settled_and_otherwise_repeats_for_its_budget(monkeypatch, stop, calls):
    # 200 ms of settling calls, then steady 1 ms calls: 1 s of budget is 100 calls, the rule needs 12
    fake = _FakeCuda([100.0, 100.0] + [1.0 + 0.0001 * (i % 3) for i in range(200)])
    monkeypatch.setitem(sys.modules, "cupy", fake)
    monkeypatch.setitem(sys.modules, "pytest_gemm.measure.trace", types.SimpleNamespace(call_awaited=lambda: None))
    launched = []
    result = timing.time_gpu(lambda: launched.append(1), flops=1e9, guard_launches=False, stop_within=stop,
                             budget_s=1.0, max_repeats=100)
    assert result.repeats == calls
    assert len(launched) == 2 + 2 + calls  # warm-up, settling, timed


def test_the_ini_key_reaches_the_speed_check(monkeypatch):
    from pytest_gemm.checks import speed
    from pytest_gemm.runner.configure import _speed_stop

    class Ini:
        def __init__(self, value: str):
            self.value, self.inipath = value, "pytest.ini"

        def getini(self, key: str) -> str:
            assert key == "gemm_speed_stop"
            return self.value

    assert _speed_stop(Ini("")) == DEFAULT_STOP == 0.001
    assert _speed_stop(Ini("0.5%")) == pytest.approx(0.005)
    assert _speed_stop(Ini(" 0.002 ")) == 0.002
    assert _speed_stop(Ini("off")) is None
    for bad in ("fast", "0", "10%", "-1"):
        with pytest.raises(pytest.UsageError, match=r"gemm_speed_stop = .* \(in pytest.ini\): expected the precision"):
            _speed_stop(Ini(bad))
    seen = {}
    monkeypatch.setattr(speed, "check_speed", lambda h, shape, record, fraction, budget_s, stop_within:
                        seen.update(stop=stop_within))
    speed.run(None, (64, 64, 64), {}, lambda facts: None, {"min_cublas_fraction": None, "speed_stop": None})
    assert seen == {"stop": None}
    speed.run(None, (64, 64, 64), {}, lambda facts: None, {"min_cublas_fraction": None})
    assert seen == {"stop": DEFAULT_STOP}
