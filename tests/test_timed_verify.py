"""The speed check's verification of timed outputs (measure/timed.py ``timed_run``), on numpy
standing in for CuPy: no GPU. A result kept per buffer address must be caught whatever the
number of timed calls (the data sets cycle through the buffers, 12 calls a cycle)."""
from __future__ import annotations

import contextlib
import sys
import time
import types
from typing import Any

import numpy as np
import pytest

from pytest_gemm.judges.inputs import exact_inputs
from pytest_gemm.kernels import harness as harness_module
from pytest_gemm.measure import timed
from pytest_gemm.measure.laps import Laps
from pytest_gemm.measure.timing import summarize
from pytest_gemm.model.categories import STALE_OUTPUT, GemmCheckFailure

SHAPE = (8, 12, 16)
PROBLEMS = [exact_inputs(*SHAPE, seed=100 + i) for i in range(timed.DATA_SETS)]


def _product(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float32)


def _cached_result() -> Any:
    """tests/untrusted/kernels.py's cached_result: C kept per (A, B) address, returned on a repeat."""
    cache: dict[tuple[int, int], np.ndarray] = {}

    def launch(a, b, c, m, n, k) -> None:
        key = (a.__array_interface__["data"][0], b.__array_interface__["data"][0])
        if key not in cache:
            cache[key] = _product(a, b)
        c[...] = cache[key]
    return launch


def _right(a, b, c, m, n, k) -> None:
    c[...] = _product(a, b)


@pytest.fixture
def numpy_cupy(monkeypatch):
    fake = types.SimpleNamespace(asarray=np.asarray, copyto=np.copyto, uint32=np.uint32, float32=np.float32,
                                 float64=np.float64, matmul=np.matmul, array_equal=np.array_equal, all=np.all,
                                 ascontiguousarray=np.ascontiguousarray,
                                 cuda=types.SimpleNamespace(runtime=types.SimpleNamespace(deviceSynchronize=lambda: None)))
    monkeypatch.setitem(sys.modules, "cupy", fake)
    monkeypatch.setattr(harness_module, "_SECRETS", [])


def _upload(p):
    m, n, _ = SHAPE
    return tuple(types.SimpleNamespace(array=x) for x in (p.a.copy(), p.b.copy(), np.zeros((m, n), np.float32)))


def _timed(monkeypatch, launch, calls: int, laps=None, timed_s: float = 0.0, upload=_upload, staged=None):
    """timed_run with ``calls`` timed calls (two warm-up calls before them, as time_gpu makes),
    which take ``timed_s`` of wall time; ``staged``: inputs already uploaded (``stage_inputs``)."""
    def time_gpu(fn, *, flops, l2_bytes, budget_s, before_each, stop_within=None):
        time.sleep(timed_s)
        fn()
        fn()
        for _ in range(calls):
            before_each()
            fn()
        return summarize([1.0] * calls, flops=flops)

    monkeypatch.setattr(timed, "time_gpu", time_gpu)
    h = types.SimpleNamespace(kernel=types.SimpleNamespace(precision="fp32", name="k"),
                              device=types.SimpleNamespace(l2_bytes=0), upload=upload, loaded=launch)
    return timed.timed_run(h, SHAPE, 0.1, PROBLEMS, laps=laps, staged=staged)


@pytest.mark.parametrize("calls", range(12, 36))
def test_a_result_kept_per_address_is_stale_whatever_the_number_of_timed_calls(numpy_cupy, monkeypatch, calls):
    # with the last call's index 12, 13 or 14 (mod 12: 0 to 2) its buffers hold the data they held
    # when the copy was taken: the last timed output alone is right there
    _, verify = _timed(monkeypatch, _cached_result(), calls)
    with pytest.raises(GemmCheckFailure) as failure:
        verify()
    assert failure.value.category == STALE_OUTPUT


@pytest.mark.parametrize("calls", (5, 12, 13, 25))
def test_a_kernel_that_computes_every_call_passes(numpy_cupy, monkeypatch, calls):
    _, verify = _timed(monkeypatch, _right, calls)
    verify()


def test_the_call_after_the_timed_calls_starts_once_its_inputs_are_in_place(numpy_cupy, monkeypatch):
    # verified under a shared hold, on a GPU other processes use: a launcher whose stream does
    # not wait for the caller's read A half negated (head_start, stale_output on the H100 at c435a10)
    events: list[str] = []

    def launch(a, b, c, m, n, k):
        events.append("call")
        _right(a, b, c, m, n, k)

    _, verify = _timed(monkeypatch, launch, 12)
    cupy = sys.modules["cupy"]
    monkeypatch.setattr(cupy, "copyto", lambda dst, src: events.append("copy") or np.copyto(dst, src))
    monkeypatch.setattr(cupy.cuda.runtime, "deviceSynchronize", lambda: events.append("synced"))
    events.clear()
    verify()
    assert events == ["copy", "copy", "synced", "call"]


def test_the_laps_of_a_timed_run_are_its_uploads_then_its_timed_calls(numpy_cupy, monkeypatch):
    laps = Laps()
    _timed(monkeypatch, _right, 12, laps=laps, timed_s=0.2)
    assert list(laps.seconds) == ["uploads", "timed"]
    assert 0.2 <= laps.seconds["timed"] < 2 and 0 <= laps.seconds["uploads"] < 0.2
    laps.lap("timed")  # a lap of the same name adds to it
    assert laps.seconds["timed"] >= 0.2


def test_staging_holds_each_set_apart_and_lets_go_only_once_its_copies_have_ended(numpy_cupy, monkeypatch):
    # one shared hold a set: a timing elsewhere waits for one set's copies (a 4096^3 staging in
    # one hold was a 0.42 s wait in the H100 class at 52edbee), and none runs on past its hold
    events: list[str] = []
    cupy = sys.modules["cupy"]
    monkeypatch.setattr(cupy.cuda.runtime, "deviceSynchronize", lambda: events.append("synced"))
    monkeypatch.setattr(cupy, "asarray", lambda x: events.append("copy") or np.asarray(x))

    @contextlib.contextmanager
    def each():
        events.append("held")
        yield
        events.append("let go")

    h = types.SimpleNamespace(upload=lambda p: events.append("copy") or _upload(p))
    staged = timed.stage_inputs(h, PROBLEMS, each=each)
    assert len(staged.buffers) == timed.ROTATE and len(staged.sources) == timed.DATA_SETS
    buffer_set, input_set = ["held", "copy", "synced", "let go"], ["held", "copy", "copy", "synced", "let go"]
    assert events == buffer_set * timed.ROTATE + input_set * timed.DATA_SETS


def test_a_timed_run_on_staged_inputs_uploads_nothing_and_still_catches_a_kept_result(numpy_cupy, monkeypatch):
    # the speed check stages the inputs under a shared hold, then times them holding the GPU alone
    uploads: list[int] = []
    staged = timed.stage_inputs(types.SimpleNamespace(upload=lambda p: uploads.append(1) or _upload(p)), PROBLEMS)
    assert len(uploads) == timed.ROTATE and len(staged.sources) == timed.DATA_SETS

    def no_upload(p):
        raise AssertionError("uploaded while holding the GPU alone")

    for launch, stale in ((_right, False), (_cached_result(), True)):
        laps = Laps()
        _, verify = _timed(monkeypatch, launch, 13, laps=laps, upload=no_upload, staged=staged)
        assert laps.seconds["uploads"] < 0.05
        if stale:
            with pytest.raises(GemmCheckFailure) as failure:
                verify()
            assert failure.value.category == STALE_OUTPUT
        else:
            verify()
