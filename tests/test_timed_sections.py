"""Timed checks hold the GPU alone only for their timings, and a class measures the roofs and
cuBLAS once per GPU: the lock's reentrancy, waits not charged to a check's timeout, the run's
shared measurements, and the gradebook's use of them. No GPU."""
from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import textwrap
import time
import types
from pathlib import Path
from typing import Any

import pytest

import fakegpu
from pytest_gemm.checks import sandbox
from pytest_gemm.grading.classrun import grade_all
from pytest_gemm.grading.processes import RunOutcome
from pytest_gemm.grading.submissions import Submission
from pytest_gemm.measure import gpu_lock as lock_module
from pytest_gemm.measure import quiet, run_cache
from pytest_gemm.measure.gpu_lock import gpu_lock, lock_paths, running_path, warming_path
from pytest_gemm.measure.timing import TimingResult, summarize
from pytest_gemm.model.categories import TIMING_ESCAPE, GemmCheckFailure

# ---- the lock within one process -------------------------------------------------------------


def _held(directory: Path) -> bool | None:
    return lock_module._HELD.get(lock_paths("5", str(directory))[0])


def test_the_lock_is_reentrant_and_refuses_an_upgrade(tmp_path):
    with gpu_lock(True, key="5", directory=str(tmp_path)):
        with gpu_lock(True, key="5", directory=str(tmp_path)), gpu_lock(False, key="5", directory=str(tmp_path)):
            assert _held(tmp_path) is True
        assert _held(tmp_path) is True  # the inner holds did not release the outer one
    assert _held(tmp_path) is None
    with gpu_lock(False, key="5", directory=str(tmp_path)):
        with pytest.raises(RuntimeError, match="exclusive asked for inside a shared hold"):
            with gpu_lock(True, key="5", directory=str(tmp_path)):
                pass


HOLD = textwrap.dedent("""
    import sys, time
    from pytest_gemm.measure.gpu_lock import gpu_lock
    with gpu_lock(True):
        open(sys.argv[1], "w").close()
        time.sleep(float(sys.argv[2]))
""")


def _hold_exclusively(tmp_path: Path, seconds: float) -> subprocess.Popen:
    """Another process holding the GPU lock alone for ``seconds`` (returns once it holds it)."""
    (tmp_path / "hold.py").write_text(HOLD)
    flag = tmp_path / "holding"
    proc = subprocess.Popen([sys.executable, str(tmp_path / "hold.py"), str(flag), str(seconds)],
                            env=fakegpu.env(tmp_path))
    deadline = time.monotonic() + 30
    while not flag.exists():
        assert time.monotonic() < deadline and proc.poll() is None, "the holder never took the lock"
        time.sleep(0.02)
    return proc


def _speed_check_behind_a_holder(tmp_path: Path, kernel: str, hold_s: float) -> tuple[Exception | None, float, Any]:
    """Run ``kernel``'s (fake) speed check with a 1 s timeout while another process holds the
    GPU lock alone for ``hold_s``: (what it raised, wall seconds, the client)."""
    (tmp_path / "fake_kernels.py").write_text(fakegpu.FAKE_KERNELS)
    client = sandbox.SandboxClient(f"fake_kernels.py:{kernel}", 0, str(tmp_path), env=fakegpu.env(tmp_path))
    holder, raised = None, None
    try:
        client.start()
        holder = _hold_exclusively(tmp_path, hold_s)
        started = time.monotonic()
        try:
            client.run("speed", [64, 64, 64], {}, {}, timeout=1.0)
        except AssertionError as exc:
            raised = exc
        return raised, time.monotonic() - started, client
    finally:
        client.stop()
        if holder is not None:
            holder.wait(timeout=30)


def test_waiting_for_the_lock_is_not_charged_to_a_timed_checks_timeout(tmp_path):
    # slow's speed check takes the lock itself (as checks/speed.py does) and runs 0.3 s; another
    # process holds the lock for 2 s, longer than the check's 1 s timeout
    raised, took, client = _speed_check_behind_a_holder(tmp_path, "slow", 2.0)
    assert raised is None and took >= 1.5    # it did wait for the holder...
    assert 0.3 <= client.last_seconds < 1.0  # ...and its own time is the check's 0.3 s


def test_a_check_that_hangs_after_its_wait_still_times_out(tmp_path):
    raised, took, _ = _speed_check_behind_a_holder(tmp_path, "hang", 1.0)
    assert "[timeout] speed at 64x64x64 did not finish within 1 s" in str(raised)
    assert 1.8 <= took < 10  # the wait (about 1 s), then its own 1 s


# ---- the speed check's lock regions ---------------------------------------------------------------

def _fake_speed_check_steps(monkeypatch, tmp_path, step):
    """check_speed's module with every GPU step faked by ``step(name, value)`` (a function that
    records the call and returns ``value``); the lock in ``tmp_path``. Returns the harness to pass."""
    from pytest_gemm.checks import speed

    monkeypatch.setenv("PYTEST_GEMM_LOCK_DIR", str(tmp_path))
    stream = types.SimpleNamespace(null=contextlib.nullcontext())
    runtime = types.SimpleNamespace(deviceSynchronize=step("synced"))
    monkeypatch.setitem(sys.modules, "cupy", types.SimpleNamespace(cuda=types.SimpleNamespace(Stream=stream,
                                                                                              runtime=runtime)))
    timing = summarize([1.0], flops=1e9)
    monkeypatch.setattr(speed, "problems_for", step("inputs", []))
    staging = step("staging", "the staged inputs")

    def stage_inputs(h, problems, each):  # each set's copies under each(): two sets here
        with each():
            staging()
        with each():
            return staging()

    monkeypatch.setattr(speed, "stage_inputs", stage_inputs)
    monkeypatch.setattr(speed, "open_clock_reader", step("clock reader"))
    monkeypatch.setattr(speed, "process_roofs", step("roofs", {}))
    monkeypatch.setattr(speed, "gpu_quiet", step("quiet", {"quiet": None}))
    monkeypatch.setattr(speed, "timed_run", step("kernel", (timing, step("verify"))))
    monkeypatch.setattr(speed, "time_cublas", step("cublas", timing))
    monkeypatch.setattr(speed, "roof_facts", lambda *a: {})
    monkeypatch.setattr(speed, "ceilings", lambda *a: types.SimpleNamespace(tflops=1e9))
    monkeypatch.setattr(speed, "reject_impossible_timing", lambda *a: None)
    return types.SimpleNamespace(kernel=types.SimpleNamespace(precision="fp32", name="k"), device=None)


def test_the_speed_check_holds_the_gpu_alone_for_roofs_timings_and_cublas_only(tmp_path, monkeypatch):
    from pytest_gemm.checks import speed

    seen: dict[str, list[bool | None]] = {}

    def held() -> bool | None:
        return lock_module._HELD.get(lock_paths()[0])

    def step(name, value=None):
        def fn(*args, **kwargs):
            seen.setdefault(name, []).append(held())
            return value
        return fn

    h = _fake_speed_check_steps(monkeypatch, tmp_path, step)
    asides: list = []

    def quiet_wait(device, measured, step_aside=None):
        seen["quiet"] = [held()]
        asides.append(step_aside)
        return {"quiet": None}

    monkeypatch.setattr(speed, "gpu_quiet", quiet_wait)
    monkeypatch.setattr(speed, "reject_tampering", step("integrity"))
    monkeypatch.setattr(speed, "tampered_timers", step("timers", []))
    facts: dict = {}
    timed_with: list = []
    kernel = speed.timed_run
    monkeypatch.setattr(speed, "timed_run", lambda *a, **kw: timed_with.append(kw.get("staged")) or kernel(*a, **kw))
    speed.check_speed(h, (64, 64, 64), facts.update, None)
    # the inputs go up to the GPU under shared holds, one per set (no timing runs beside the
    # copies, and one waiting waits for one set's), and the timed calls run on them; the last
    # output is verified after the GPU is let go of, under a shared hold: neither is timed
    assert seen == {"inputs": [None], "staging": [False, False], "clock reader": [None], "integrity": [True, None],
                    "roofs": [True], "quiet": [True], "kernel": [True], "timers": [True], "cublas": [True],
                    "verify": [False]}
    assert timed_with == ["the staged inputs"]
    # where the hold went, step by step (uploads and timed are timed_run's own laps: faked here)
    assert list(facts["alone_s"]) == ["roofs", "quiet", "cublas"]
    assert all(isinstance(v, float) and 0 <= v < 5 for v in facts["alone_s"].values())
    assert asides[0].__self__.exclusive and asides[0].__func__ is lock_module.GpuHold.step_aside  # it may step aside


def test_a_python_launcher_warms_up_at_the_timed_shape_before_the_gpu_is_taken_alone(tmp_path, monkeypatch):
    # An autotuner's first call at 4096^3 (compiling and benchmarking its configs) inside the
    # exclusive hold stopped every other process on the GPU for as long as it took.
    from pytest_gemm.checks import speed

    seen: dict[str, bool | None] = {}

    def step(name, value=None):
        def fn(*args, **kwargs):
            seen[name] = lock_module._HELD.get(lock_paths()[0])
            return value
        return fn

    h = _fake_speed_check_steps(monkeypatch, tmp_path, step)
    order: list[str] = []
    monkeypatch.setattr(speed, "warm_outside_lock", lambda *a: order.append("warm") or step("warm")())
    monkeypatch.setattr(speed, "process_roofs", lambda *a: order.append("roofs") or {})
    speed.check_speed(h, (64, 64, 64), lambda facts: None, None)
    assert order == ["warm", "roofs"] and seen["warm"] is None  # first, and with the GPU not held alone


def test_the_warm_up_call_marks_the_gpu_warming_and_holds_no_lock_the_others_wait_for(tmp_path, monkeypatch):
    from pytest_gemm.measure import timed
    from pytest_gemm.model.contract import PyKernel

    monkeypatch.setenv("PYTEST_GEMM_LOCK_DIR", str(tmp_path))
    synced: list[bool] = []
    runtime = types.SimpleNamespace(deviceSynchronize=lambda: synced.append(True))
    monkeypatch.setitem(sys.modules, "cupy", types.SimpleNamespace(cuda=types.SimpleNamespace(runtime=runtime)))
    during: list[tuple] = []

    def loaded(a, b, c, m, n, k):
        during.append((lock_module._HELD.get(lock_paths()[0]), lock_module._marked_running(warming_path()), (m, n, k)))

    buffers = [types.SimpleNamespace(array=name) for name in "abc"]
    h = types.SimpleNamespace(kernel=PyKernel(lambda a, b, c: None, name="tuned"), upload=lambda p: buffers,
                              loaded=loaded)
    timed.warm_outside_lock(h, (64, 32, 16), ["problem"])
    assert during == [(None, True, (64, 32, 16))] and synced == [True]
    assert not lock_module._marked_running(warming_path())  # the mark ends with the call
    assert not lock_module._marked_running(running_path())  # a warming mark, never a hang mark

    during.clear()  # a CUDA C kernel was compiled and loaded when its process started: no call here
    timed.warm_outside_lock(types.SimpleNamespace(kernel=object(), loaded=loaded), (64, 32, 16), ["problem"])
    assert during == []


def _steps_with_a_timer_replaced_after(monkeypatch, replaced_after: str):
    """(ran, step): ``step(name, value)`` makes a fake GPU step that logs its name in ``ran``; the
    timer reads as replaced from step ``replaced_after`` on ("start": before the check), as a
    launcher that patches it in its first call."""
    from pytest_gemm.measure import integrity

    ran: list[str] = []
    replaced = [replaced_after == "start"]
    monkeypatch.setattr(integrity, "tampered", lambda: ["cupy.cuda.get_elapsed_time"] if replaced[0] else [])

    def step(name, value=None):
        def fn(*args, **kwargs):
            ran.append(name)
            if name == replaced_after:
                replaced[0] = True
            return value
        return fn
    return ran, step


def _speed_check_in_a_process_whose_timer_is_replaced(monkeypatch, tmp_path, replaced_after: str):
    """check_speed with every GPU step faked; the timer reads as replaced from step
    ``replaced_after`` on ("start": before the check). Returns the steps that ran and the failure."""
    from pytest_gemm.checks import speed

    ran, step = _steps_with_a_timer_replaced_after(monkeypatch, replaced_after)
    h = _fake_speed_check_steps(monkeypatch, tmp_path, step)
    with pytest.raises(GemmCheckFailure) as failure:
        speed.check_speed(h, (64, 64, 64), lambda facts: None, None)
    return ran, failure.value


def test_a_process_whose_timer_is_already_replaced_measures_nothing(monkeypatch, tmp_path):
    # Its roofs and cuBLAS times would be shared with every other process of the run
    # (PYTEST_GEMM_MEASURE_CACHE), off by whatever the replaced timer says.
    ran, failure = _speed_check_in_a_process_whose_timer_is_replaced(monkeypatch, tmp_path, "start")
    assert ran == ["inputs", "staging", "staging", "clock reader"]  # uploaded, nothing measured
    assert failure.category == TIMING_ESCAPE and "get_elapsed_time" in str(failure)


def test_a_timer_replaced_by_the_timed_calls_keeps_cublas_untimed(monkeypatch, tmp_path):
    ran, failure = _speed_check_in_a_process_whose_timer_is_replaced(monkeypatch, tmp_path, "kernel")
    # no "cublas"; the last output is still verified (a stale one is named before the timer)
    assert ran == ["inputs", "staging", "staging", "clock reader", "roofs", "quiet", "kernel", "verify"]
    assert failure.category == TIMING_ESCAPE


def _sweep_in_a_process_whose_timer_is_replaced(monkeypatch, tmp_path, replaced_after: str):
    """check_sweep with every GPU step faked, as ``_speed_check_in_a_process_whose_timer_is_replaced``:
    the sweep shares the roofs with the run too, so a replaced timer must be seen before they are measured."""
    from pytest_gemm.checks import sweep
    from pytest_gemm.kernels import harness
    from pytest_gemm.measure import cublas, roofs, timed

    ran, step = _steps_with_a_timer_replaced_after(monkeypatch, replaced_after)

    monkeypatch.setenv("PYTEST_GEMM_LOCK_DIR", str(tmp_path))
    pool = types.SimpleNamespace(free_all_blocks=lambda: None)
    monkeypatch.setitem(sys.modules, "cupy", types.SimpleNamespace(
        cuda=types.SimpleNamespace(Stream=types.SimpleNamespace(null=contextlib.nullcontext())),
        get_default_memory_pool=lambda: pool))
    timing = summarize([1.0], flops=1e9)
    baseline = object()
    monkeypatch.setattr(timed, "process_roofs", step("roofs", {}))
    monkeypatch.setattr(timed, "gpu_quiet", step("quiet", {"quiet": None}))
    monkeypatch.setattr(timed, "problems_for", lambda *a: [])
    monkeypatch.setattr(timed, "reject_escaped_work", lambda *a, **k: None)
    monkeypatch.setattr(timed, "reject_impossible_timing", lambda *a, **k: None)
    monkeypatch.setattr(timed, "timed_run",
                        lambda hh, *a: (step("cublas" if hh is baseline else "kernel")(), (timing, lambda: None))[1])
    monkeypatch.setattr(roofs, "ceilings", lambda *a: types.SimpleNamespace(tflops=1e9))
    monkeypatch.setattr(harness, "harness_for", lambda *a: baseline)
    monkeypatch.setitem(cublas.CUBLAS, "fp32", None)
    h = types.SimpleNamespace(kernel=types.SimpleNamespace(precision="fp32", name="k", multiple_of=(1, 1, 1)),
                              device=None)
    monkeypatch.setattr("pytest_gemm.checks.cases.skip_reason", lambda *a: None)
    with pytest.raises(GemmCheckFailure) as failure:
        # seed 0: the kernel is timed before cuBLAS at the first size (measure/sweep.py's order)
        sweep.check_sweep(h, [(64, 64, 64), (128, 128, 128)], lambda facts: None, seed=_kernel_first_seed())
    return ran, failure.value


def _kernel_first_seed() -> int:
    from pytest_gemm.measure.sweep import timing_order

    return next(s for s in range(100) if timing_order([(64, 64, 64), (128, 128, 128)], s)[0][1][0] == "kernel")


def test_a_sweep_whose_timer_is_already_replaced_measures_nothing(monkeypatch, tmp_path):
    # the roofs it would measure are shared with the whole run (PYTEST_GEMM_MEASURE_CACHE)
    ran, failure = _sweep_in_a_process_whose_timer_is_replaced(monkeypatch, tmp_path, "start")
    assert ran == []
    assert failure.category == TIMING_ESCAPE and "get_elapsed_time" in str(failure)


def test_a_timer_replaced_by_the_sweeps_timed_calls_keeps_cublas_untimed(monkeypatch, tmp_path):
    ran, failure = _sweep_in_a_process_whose_timer_is_replaced(monkeypatch, tmp_path, "kernel")
    assert ran == ["roofs", "quiet", "kernel"]  # no "cublas" at that size, and no later size
    assert failure.category == TIMING_ESCAPE


# ---- measurements shared by a run ---------------------------------------------------------------------

DEVICE = types.SimpleNamespace(index=0, name="NVIDIA H200")


def test_without_a_cache_folder_every_call_measures(monkeypatch):
    monkeypatch.delenv(run_cache.CACHE_ENV, raising=False)
    calls = []
    assert run_cache.shared(DEVICE, "roofs", lambda: calls.append(1) or {"x": 1}) == {"x": 1}
    run_cache.shared(DEVICE, "roofs", lambda: calls.append(1) or {"x": 1})
    assert len(calls) == 2


def test_a_runs_cache_measures_once_per_gpu_and_what(tmp_path):
    calls = []

    def measure(value):
        return lambda: calls.append(value) or {"value": value}

    first = run_cache.shared(DEVICE, "roofs", measure(1), directory=tmp_path, gpu="0")
    again = run_cache.shared(DEVICE, "roofs", measure(2), directory=tmp_path, gpu="0")
    other_gpu = run_cache.shared(DEVICE, "roofs", measure(3), directory=tmp_path, gpu="1")
    other_what = run_cache.shared(DEVICE, "cublas-fp32-4096x4096x4096-1s", measure(4), directory=tmp_path, gpu="0")
    assert first == {"value": 1} and again == {"value": 1, "shared": True}
    assert other_gpu == {"value": 3} and other_what == {"value": 4} and calls == [1, 3, 4]
    (tmp_path / run_cache.entry_name(DEVICE, "roofs", "0")).write_text("{not json")
    assert run_cache.shared(DEVICE, "roofs", measure(5), directory=tmp_path, gpu="0") == {"value": 5}
    assert not list(tmp_path.glob("*.tmp"))  # written whole, then renamed


def test_a_timing_survives_the_round_trip_through_the_cache():
    timing = summarize([1.0, 1.2, 0.9, 1.1], flops=2e12, escaped_ms=[0.0, 0.01], late_launches=1)
    back = TimingResult.from_dict(json.loads(json.dumps(timing.as_dict())))
    assert back == timing and back.tflops == timing.tflops


def test_cublas_is_timed_once_for_a_run(tmp_path, monkeypatch):
    from pytest_gemm.measure import timed

    monkeypatch.setenv(run_cache.CACHE_ENV, str(tmp_path))
    calls = []

    def fake_timed_run(h, shape, budget_s, problems, stop_within=None, staged=None):
        calls.append((shape, staged))
        return summarize([2.0, 2.0, 2.0], flops=1e12), lambda: None

    monkeypatch.setattr(timed, "timed_run", fake_timed_run)
    monkeypatch.setattr(timed, "harness_for", lambda *a: None)
    first = timed.time_cublas("fp32", (64, 64, 64), DEVICE, 1.0, staged="inputs on the GPU")
    monkeypatch.setattr(timed, "_CUBLAS_TIMES", {})  # another process of the same run
    second = timed.time_cublas("fp32", (64, 64, 64), DEVICE, 1.0)
    assert calls == [((64, 64, 64), "inputs on the GPU")] and first == second and first.median_ms == 2.0


# ---- the gradebook -----------------------------------------------------------------------------------

def _env_runner(seen: list[dict[str, str]]):
    def runner(cmd, *, cwd, timeout, env):
        seen.append(dict(env))
        Path(cmd[2]).write_text(json.dumps({"score": 1, "tests": [], "extra_data": {}}))
        return RunOutcome(0, False, "", 0.0)
    return runner


def _builder(kernel_file, attr, results_path, **_):
    return [sys.executable, str(kernel_file), str(results_path)]


def test_a_class_shares_one_measurement_folder_that_is_gone_afterwards(tmp_path, monkeypatch):
    monkeypatch.delenv(run_cache.CACHE_ENV, raising=False)
    subs = [Submission(n, tmp_path / f"{n}.py") for n in ("ann", "ben", "cy")]
    seen: list[dict[str, str]] = []
    grade_all(subs, jobs=2, gpus=["0"], runner=_env_runner(seen), command_builder=_builder)
    folders = {env.get(run_cache.CACHE_ENV) for env in seen}
    assert len(folders) == 1 and None not in folders and not Path(folders.pop()).exists()
    seen.clear()
    grade_all(subs, jobs=2, gpus=["0"], runner=_env_runner(seen), command_builder=_builder, share_measurements=False)
    assert all(run_cache.CACHE_ENV not in env for env in seen)


def test_students_graded_at_once_share_the_cores_for_their_blas_threads(tmp_path, monkeypatch):
    from pytest_gemm.grading import classrun

    assert classrun.thread_limits({}, jobs=12, cores=16) == dict.fromkeys(classrun.THREAD_ENV, "1")
    assert classrun.thread_limits({}, jobs=4, cores=16) == dict.fromkeys(classrun.THREAD_ENV, "4")
    assert classrun.thread_limits({"OMP_NUM_THREADS": "2"}, jobs=4, cores=16) == \
        {"OPENBLAS_NUM_THREADS": "4", "MKL_NUM_THREADS": "4"}  # what the staff set stays
    assert classrun.thread_limits({}, jobs=1, cores=16) == {}  # one at a time: the libraries' own defaults
    for name in classrun.THREAD_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(classrun, "cpu_cores", lambda: 8)
    subs = [Submission(n, tmp_path / f"{n}.py") for n in ("ann", "ben", "cy")]
    seen: list[dict[str, str]] = []
    grade_all(subs, jobs=2, gpus=["0"], runner=_env_runner(seen), command_builder=_builder)
    assert len(seen) == 3 and all(env["OPENBLAS_NUM_THREADS"] == env["OMP_NUM_THREADS"] == "4" for env in seen)


# ---- a quiet GPU before timing ---------------------------------------------------------------------

def _clocked(rates: list[float]):
    """A probe returning ``rates`` in turn, each taking 0.1 s of a fake clock."""
    now = [0.0]
    it = iter(rates)

    def probe() -> float:
        now[0] += 0.1
        return next(it)

    return probe, (lambda: now[0])


def test_a_quiet_gpu_is_timed_at_once():
    probe, clock = _clocked([55.0])
    assert quiet.wait_until_quiet(probe, 56.6, clock=clock) == \
        {"quiet": True, "waited_s": 0.1, "probes": 1, "probe_fraction": round(55 / 56.6, 4), "stepped_aside": 0}


def test_a_gpu_shared_with_a_killed_kernel_is_waited_for_until_it_is_quiet():
    # one other context time-slicing with ours: about half the roof, twice, then quiet
    probe, clock = _clocked([28.0, 27.5, 56.0])
    out = quiet.wait_until_quiet(probe, 56.6, clock=clock)
    assert out["quiet"] is True and out["probes"] == 3 and out["waited_s"] == 0.3


def test_a_gpu_that_stays_busy_is_timed_anyway_and_marked():
    probe, clock = _clocked([20.0] * 1000)
    out = quiet.wait_until_quiet(probe, 56.6, limit_s=5.0, clock=clock)
    assert out["quiet"] is False and 5.0 <= out["waited_s"] < 5.2 and out["probes"] >= 50
    facts = quiet.busy_marked({"gpu_quiet": out, "device_warnings": ["clock unreadable"]})
    assert facts["device_warnings"][0] == "clock unreadable"
    assert "busy with work outside this run's lock" in facts["device_warnings"][1]
    assert quiet.busy_marked({"gpu_quiet": {"quiet": True}}) == {"gpu_quiet": {"quiet": True}}


def test_a_busy_gpu_is_stepped_aside_from_so_that_the_shared_holders_run():
    # busy for 20 probes of 0.125 s, then quiet: after every 0.5 s of busy probes the hold steps
    # aside for 1.5 s (on the same clock), and the pauses count in the wait
    now, rates = [0.0], iter([28.0] * 20 + [56.0])
    pauses: list[float] = []

    def probe() -> float:
        now[0] += 0.125
        return next(rates)

    def step_aside(pause_s: float) -> bool:
        pauses.append(pause_s)
        now[0] += pause_s
        return True

    out = quiet.wait_until_quiet(probe, 56.6, clock=lambda: now[0], step_aside=step_aside)
    assert out["quiet"] is True and out["probes"] == 21
    assert out["stepped_aside"] == len(pauses) == 5 and set(pauses) == {quiet.STEP_ASIDE_PAUSE_S}
    assert out["waited_s"] == pytest.approx(21 * 0.125 + 5 * quiet.STEP_ASIDE_PAUSE_S)


def test_a_gpu_that_stays_busy_is_waited_for_longer_when_the_wait_steps_aside():
    probe, clock = _clocked([20.0] * 2000)
    out = quiet.wait_until_quiet(probe, 56.6, clock=clock, step_aside=lambda pause: True)
    assert out["quiet"] is False and quiet.STEPPING_LIMIT_S <= out["waited_s"] < quiet.STEPPING_LIMIT_S + 0.2
    # a hold that cannot step aside (nested in another) says so, and the probes go on without pauses
    probe, clock = _clocked([20.0] * 2000)
    out = quiet.wait_until_quiet(probe, 56.6, limit_s=3.0, clock=clock, step_aside=lambda pause: False)
    assert out["stepped_aside"] == 0 and out["probes"] >= 30


def test_without_a_measured_roof_quiet_is_not_checked():
    assert quiet.wait_until_quiet(lambda: 1 / 0, None)["quiet"] is None
    assert quiet.busy_note({"quiet": None}) is None


def test_a_busy_timing_is_labelled_in_the_ranking_and_in_gradescope():
    from pytest_gemm.grading.gradescope import build_results
    from pytest_gemm.outputs.report import ranking_rows

    busy = {"quiet": False, "waited_s": 60.0, "probes": 200, "probe_fraction": 0.47}
    rec = {"kernel": "k", "check": "speed", "shape": [64, 64, 64], "outcome": "passed", "precision": "fp32",
           "timing": {"shape": [64, 64, 64], "median_ms": 1.0, "min_ms": 1.0, "spread": 0.0, "tflops": 1.0},
           "fraction_of_cublas": 0.2, "gpu_quiet": busy}
    ranked, _ = ranking_rows([rec])
    assert "(GPU busy with another process's work)" in ranked[0][1]
    speed = next(t for t in build_results([rec])["tests"] if t["name"].startswith("speed"))
    assert "note: the GPU was busy with work outside this run's lock for all of 60 s" in speed["output"]
