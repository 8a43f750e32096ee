"""The pieces behind class grading, with no GPU and no pytest run: hang budgets, whose
out-of-memory it was, memory release, the process bound, the GPU lock, start-up limits."""
from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import textwrap
import time
import types
from pathlib import Path

import pytest

import fakegpu
from pytest_gemm.checks import hangs, sandbox
from pytest_gemm.checks.hangs import HangLedger, flops_of
from pytest_gemm.checks.sandbox_child import (KernelCall, harness_oom_failure, is_harness_oom, is_out_of_memory,
                                              run_with_retry)
from pytest_gemm.model import categories as cat
from pytest_gemm.model.categories import GemmCheckFailure
from pytest_gemm.runner import execution
from pytest_gemm.measure.gpu_lock import gpu_key, gpu_lock, lock_paths

OOM = fakegpu.OutOfMemoryError


# ---- hang budgets ---------------------------------------------------------------------------

def test_the_budget_is_the_normal_timeout_until_the_first_timeout():
    ledger = HangLedger()
    ledger.done(0.01, flops_of((64, 64, 64)))
    assert ledger.budget(47.5, flops_of((4096,) * 3)) == (47.5, None)
    assert ledger.not_run() is None


def test_after_a_timeout_the_budget_is_the_floor_plus_the_work_at_the_hang_rate():
    ledger = HangLedger()
    ledger.timed_out("launch at 64x64x64")
    seconds, why = ledger.budget(20.0, flops_of((127, 255, 63)))
    assert seconds == pytest.approx(hangs.HANG_FLOOR_S, abs=0.01)
    assert why is not None and "already timed out (launch at 64x64x64)" in why
    big, _ = ledger.budget(47.5, flops_of((4096,) * 3))
    assert big == pytest.approx(hangs.HANG_FLOOR_S + 2 * 4096 ** 3 / hangs.HANG_RATE_FLOPS)
    assert ledger.budget(5.0, flops_of((4096,) * 3))[0] == 5.0  # never more than the normal timeout
    assert ledger.budget(47.5, flops_of((4096,) * 3), timed=True)[0] == hangs.TIMED_HANG_FLOOR_S


def test_completed_checks_of_comparable_work_raise_the_budget_and_tiny_ones_do_not():
    ledger = HangLedger()
    ledger.done(0.002, flops_of((64, 64, 64)))           # overheads: says nothing of 4096^3
    ledger.timed_out("exact at 127x127x127")
    assert ledger.estimate(flops_of((4096,) * 3)) is None
    ledger.done(4.0, flops_of((2048,) * 3))              # a slow kernel: 4 s at 2048^3
    assert ledger.estimate(flops_of((4096,) * 3)) == pytest.approx(32.0)
    seconds, why = ledger.budget(200.0, flops_of((4096,) * 3))
    assert seconds == pytest.approx(hangs.HANG_FACTOR * 32.0) and "its completed checks predict" in why


def test_only_a_kernel_that_never_completed_a_check_is_cut_off():
    never = HangLedger()
    for label in ("launch at 64x64x64", "exact at 1x1x1", "exact at 2x2x2"):
        assert never.not_run() is None
        never.timed_out(label)
    reason = never.not_run()
    assert reason is not None and "timed out in its first 3 checks (launch at 64x64x64, exact at 1x1x1" in reason
    some = HangLedger()
    some.done(0.1, 1.0)
    for _ in range(20):
        some.timed_out("exact at 4096x4096x4096")
    assert some.not_run() is None


def test_a_start_up_that_ran_out_of_time_is_not_tried_again():
    ledger = HangLedger(startup_failure="preparing the kernel did not finish within 180 s")
    assert "not run: starting this kernel already failed (preparing the kernel" in ledger.not_run()


def test_flops_of_a_sweep_counts_every_size():
    assert flops_of((2, 3, 4)) == 48
    assert flops_of((1, 1, 1), {"shapes": [[2, 3, 4], [1, 1, 1]]}) == 50


def test_the_default_timeout_is_20_s_plus_1_s_per_5_gflop_and_an_explicit_one_wins():
    st = types.SimpleNamespace(timeout=None)
    assert execution.check_timeout(st, (64, 64, 64)) == pytest.approx(20.0, abs=1e-3)
    assert execution.check_timeout(st, (4096, 4096, 4096)) == pytest.approx(20 + 2 * 4096 ** 3 / 5e9)
    assert execution.check_timeout(types.SimpleNamespace(timeout=7.0), (4096, 4096, 4096)) == 7.0


# ---- whose out of memory ------------------------------------------------------------------

def _wrapped_by_the_harness(exc: BaseException) -> GemmCheckFailure:
    """What checks/common.run_kernel does with a CUDA error: a fault, raised from None."""
    try:
        try:
            raise exc
        except BaseException:
            raise GemmCheckFailure(cat.FAULT, "'k' at 64x64x64: Out of memory", []) from None
    except GemmCheckFailure as failure:
        return failure


def test_an_out_of_memory_is_found_through_the_chain_even_raised_from_none():
    failure = _wrapped_by_the_harness(OOM("Out of memory allocating 512 bytes"))
    assert is_out_of_memory(failure) and is_harness_oom(failure)
    cuda = type("CUDARuntimeError", (RuntimeError,), {})("cudaErrorMemoryAllocation: out of memory")
    assert is_harness_oom(cuda)
    assert not is_out_of_memory(ValueError("Out of memory"))  # not CUDA's, not CuPy's
    assert not is_out_of_memory(_wrapped_by_the_harness(RuntimeError("cudaErrorIllegalAddress")))


def test_what_the_kernels_launcher_raises_stays_the_kernels():
    def launcher() -> None:
        raise OOM("Out of memory allocating 8 GB")

    with pytest.raises(OOM) as info:
        KernelCall(launcher)()
    assert is_out_of_memory(info.value) and not is_harness_oom(info.value)
    assert not is_harness_oom(_wrapped_by_the_harness(info.value))
    guard = KernelCall(types.SimpleNamespace(compiled="cubin", __call__=None))
    assert guard.compiled == "cubin"  # attributes reach the wrapped kernel


def test_run_with_retry_frees_and_retries_once():
    calls, releases = [], []

    def flaky(kernel, check, shape, params, options, facts):
        calls.append(1)
        facts["attempt"] = len(calls)
        if len(calls) == 1:
            raise OOM("Out of memory allocating 1 GB")

    facts: dict = {}
    run_with_retry(flaky, lambda: releases.append(1), None, "exact", [8, 8, 8], {}, {}, facts)
    assert (len(calls), len(releases), facts) == (2, 1, {"attempt": 2})

    def always(kernel, check, shape, params, options, facts):
        raise OOM("Out of memory allocating 1 GB")

    with pytest.raises(GemmCheckFailure) as info:
        run_with_retry(always, lambda: None, None, "speed", [4096] * 3, {}, {}, {})
    assert info.value.category == cat.HARNESS_OUT_OF_MEMORY
    assert info.value.summary.startswith("speed at 4096x4096x4096: the test harness ran out of GPU memory")

    def wrong(kernel, check, shape, params, options, facts):
        calls.append(1)
        raise GemmCheckFailure(cat.WRONG_VALUES, "rows are wrong", [])

    calls.clear()
    with pytest.raises(GemmCheckFailure):
        run_with_retry(wrong, lambda: None, None, "exact", [8, 8, 8], {}, {}, {})
    assert len(calls) == 1  # only an out of memory is retried


def test_the_harness_oom_category_is_a_known_category_and_says_it_is_no_verdict():
    failure = harness_oom_failure("exact", [1, 2, 3], OOM("Out of memory allocating 4 bytes"))
    assert cat.HARNESS_OUT_OF_MEMORY in cat.ALL and failure.category == cat.HARNESS_OUT_OF_MEMORY
    assert "not a verdict on the kernel" in str(failure)


# ---- memory release --------------------------------------------------------------------------

class _Pool:
    def __init__(self, held: int):
        self.held, self.freed = held, 0

    def total_bytes(self) -> int:
        return self.held

    def free_all_blocks(self) -> None:
        self.freed += 1
        self.held = 0


def test_release_memory_frees_the_default_and_pinned_pools(monkeypatch):
    from pytest_gemm.checks.dispatch import release_memory

    device, pinned = _Pool(3 << 30), _Pool(1 << 20)
    fake = types.SimpleNamespace(get_default_memory_pool=lambda: device,
                                 get_default_pinned_memory_pool=lambda: pinned,
                                 cuda=types.SimpleNamespace(runtime=types.SimpleNamespace(getDeviceCount=lambda: 1)))
    monkeypatch.setitem(sys.modules, "cupy", fake)
    assert release_memory() == {"pool_bytes": 3 << 30}
    assert (device.freed, pinned.freed) == (1, 1)

    def no_driver():
        raise RuntimeError("cudaErrorInsufficientDriver")

    fake.cuda.runtime.getDeviceCount = no_driver  # CuPy imported on a machine with no GPU: nothing to free
    assert release_memory() == {} and device.freed == 1
    monkeypatch.delitem(sys.modules, "cupy")
    assert release_memory() == {}  # a process that never imported CuPy has nothing to free


# ---- the process bound -------------------------------------------------------------------------

class _Client:
    def __init__(self, name: str):
        self.name, self.alive = name, False

    def stop(self) -> None:
        self.alive = False


def test_acquire_keeps_the_bound_stopping_the_least_recently_used():
    clients: dict = {}

    def use(key: str) -> _Client:
        client = execution.acquire(clients, key, lambda: _Client(key), bound=2)
        client.alive = True  # it runs a check
        return client

    for key in ("a", "b", "a", "c"):
        use(key)
    assert {k for k, c in clients.items() if c.alive} == {"a", "c"}  # b was the least recently used
    assert list(clients) == ["b", "a", "c"]  # kept (stopped), in use order
    assert use("b") is clients["b"]
    assert {k for k, c in clients.items() if c.alive} == {"c", "b"}


def test_the_bound_comes_from_the_environment_with_a_clear_error():
    assert execution.max_live_sandboxes({}) == execution.MAX_LIVE_SANDBOXES
    assert execution.max_live_sandboxes({"PYTEST_GEMM_MAX_PROCESSES": "8"}) == 8
    with pytest.raises(pytest.UsageError, match="PYTEST_GEMM_MAX_PROCESSES='0': expected a whole number >= 1"):
        execution.max_live_sandboxes({"PYTEST_GEMM_MAX_PROCESSES": "0"})


# ---- start-up limits ----------------------------------------------------------------------------

def test_a_prepare_over_its_limit_is_reported_as_start_up_not_as_the_check(tmp_path, monkeypatch):
    (tmp_path / "fake_kernels.py").write_text(fakegpu.FAKE_KERNELS)
    monkeypatch.setattr(sandbox, "PREPARE_TIMEOUT", 1.0)
    client = sandbox.SandboxClient("fake_kernels.py:ok", 0, str(tmp_path),
                                   env=fakegpu.env(tmp_path, FAKEGPU_PREPARE_S="30"))
    try:
        with pytest.raises(GemmCheckFailure) as info:
            client.run("exact", [1, 1, 1], {}, {}, timeout=60)
    finally:
        client.stop()
    assert info.value.category == cat.TIMEOUT
    assert info.value.summary == ("preparing the kernel (CUDA initialisation, compiling and loading it) did not "
                                  "finish within 1 s")
    assert "not --gemm-timeout" in info.value.details[0]
    assert not client.check_timed_out and client.last_seconds is None


def test_a_reply_carries_the_checks_own_seconds_and_the_pool_figure(tmp_path):
    (tmp_path / "fake_kernels.py").write_text(fakegpu.FAKE_KERNELS)
    client = sandbox.SandboxClient("fake_kernels.py:slow", 0, str(tmp_path),
                                   env=fakegpu.env(tmp_path, FAKEGPU_PREPARE_S="1"))
    try:
        client.run("exact", [1, 1, 1], {}, {}, timeout=60)
        client.run("exact", [1, 1, 1], {}, {}, timeout=60)
    finally:
        client.stop()
    assert 0.3 <= client.last_seconds < 1.0  # the check's 0.3 s, not the 1 s prepare
    assert client.peak_pool_bytes == 2000    # what the fake release reported the second time


# ---- the GPU lock --------------------------------------------------------------------------------

HOLDER = textwrap.dedent("""
    import sys, time
    from pytest_gemm.measure.gpu_lock import gpu_lock
    exclusive, hold, directory, log = sys.argv[1] == "x", float(sys.argv[2]), sys.argv[3], sys.argv[4]
    with gpu_lock(exclusive, key="7", directory=directory):
        start = time.time()
        time.sleep(hold)
        end = time.time()
    with open(log, "a") as fh:
        fh.write(f"{sys.argv[1]} {start} {end}\\n")
""")


def _holders(tmp_path: Path, plan: list[tuple[str, float, float]]) -> list[tuple[str, float, float]]:
    """Start one process per (kind, hold seconds, delay before it starts); their held intervals."""
    (tmp_path / "holder.py").write_text(HOLDER)
    log = tmp_path / "held.log"
    procs = []
    for kind, hold, delay in plan:
        time.sleep(delay)
        procs.append(subprocess.Popen([sys.executable, str(tmp_path / "holder.py"), kind, str(hold),
                                       str(tmp_path / "locks"), str(log)], env=fakegpu.env(tmp_path)))
    for p in procs:
        assert p.wait(timeout=60) == 0
    return [(k, float(s), float(e)) for k, s, e in (line.split() for line in log.read_text().splitlines())]


def _overlap(a: tuple[str, float, float], b: tuple[str, float, float]) -> bool:
    return a[1] < b[2] and b[1] < a[2]


def test_exclusive_holders_never_overlap_and_shared_ones_do(tmp_path):
    held = _holders(tmp_path, [("s", 1.0, 0), ("s", 1.0, 0), ("x", 0.5, 0.3), ("x", 0.5, 0)])
    shared = [h for h in held if h[0] == "s"]
    exclusive = [h for h in held if h[0] == "x"]
    assert _overlap(*shared)
    for x in exclusive:
        assert not any(_overlap(x, other) for other in held if other is not x)


def test_a_waiting_timed_check_goes_before_later_shared_ones(tmp_path):
    # a shared holder, then a writer waits, then another shared one arrives: it must wait for the writer
    held = _holders(tmp_path, [("s", 1.5, 0), ("x", 0.5, 0.5), ("s", 0.2, 0.4)])
    writer = next(h for h in held if h[0] == "x")
    late_reader = max((h for h in held if h[0] == "s"), key=lambda h: h[1])
    assert late_reader[1] >= writer[2] - 0.01


def test_the_lock_is_keyed_by_the_gpu_this_process_uses(tmp_path):
    assert gpu_key({"CUDA_VISIBLE_DEVICES": "3,1"}) == "3"
    assert gpu_key({}) == "0"
    assert gpu_key({"CUDA_VISIBLE_DEVICES": "GPU-1a2b/c"}) == "GPU-1a2b_c"
    lock, turnstile = lock_paths("3", str(tmp_path))
    assert lock.name == "pytest-gemm-gpu-3.lock" and turnstile.parent == tmp_path
    with gpu_lock(True, key="3", directory=str(tmp_path)):
        assert lock.exists()


STEPPER = textwrap.dedent("""
    import json, os, sys, time
    import pytest_gemm.measure.gpu_lock as lock_module
    from pytest_gemm.measure.gpu_lock import gpu_lock
    lock_module.MARK_PATIENCE_S = float(os.environ.get("STEPPER_PATIENCE", getattr(lock_module, "MARK_PATIENCE_S", 10)))
    exclusive, act, at, then, directory, log = sys.argv[1] == "x", sys.argv[2], float(sys.argv[3]), \\
        float(sys.argv[4]), sys.argv[5], sys.argv[6]
    after, delay, asking = sys.argv[7], float(sys.argv[8]), sys.argv[9]
    while after != "-" and not os.path.exists(after):  # the one before has asked for the lock
        time.sleep(0.005)
    time.sleep(delay)
    open(asking, "w").close()
    events = []
    with gpu_lock(exclusive, key="7", directory=directory, what=act) as hold:
        events.append(("held", time.time()))
        time.sleep(at)
        if act.startswith(("presume", "warm")):
            hold.presume_hung(warming=act.startswith("warm"))
            events.append(("presumed", time.time()))
        elif act == "aside":
            assert hold.step_aside(then)
            events.append(("back", time.time()))
        time.sleep(then if act.startswith(("presume", "warm")) else 0.2)
        events.append(("end", time.time()))
    with open(log, "a") as fh:
        fh.write(json.dumps({"kind": sys.argv[1], "act": act, "events": dict(events)}) + "\\n")
""")


def _steppers(tmp_path: Path, plan: list[tuple[str, str, float, float, float]], **env: str) -> dict[str, dict]:
    """One process per (kind, act, at, then, delay): each asks for the lock ``delay`` s after the
    one before it asked (counted from that moment, not from the processes' start, which a loaded
    machine can slow by more than the delays); act "presume" is presumed hung after ``at`` s and
    runs on ``then`` s (act "warm...": marked as warming up instead); "aside" steps aside after ``at`` s for ``then`` s; "hold" (and any other
    name) holds ``at`` s. Their events by act."""
    (tmp_path / "stepper.py").write_text(STEPPER)
    log = tmp_path / "events.log"
    procs, after = [], "-"
    for n, (kind, act, at, then, delay) in enumerate(plan):
        asking = str(tmp_path / f"asking-{n}")
        procs.append(subprocess.Popen([sys.executable, str(tmp_path / "stepper.py"), kind, act, str(at), str(then),
                                       str(tmp_path / "locks"), str(log), after, str(delay), asking],
                                      env=fakegpu.env(tmp_path, **env)))
        after = asking
    for proc in procs:
        assert proc.wait(timeout=60) == 0
    import json

    return {(r := json.loads(line))["act"]: r["events"] for line in log.read_text().splitlines()}


def test_a_check_presumed_hung_no_longer_queues_the_others_behind_a_waiting_timed_check(tmp_path):
    # a shared holder is presumed hung 0.5 s in and runs on 2 s; a timed check asks at 0.2 s and
    # a second shared holder at 1.0 s: the second one runs at once (not after the timed check),
    # and the timed check holds the GPU only once the presumed-hung check has ended
    ev = _steppers(tmp_path, [("s", "presume", 0.5, 2.0, 0), ("x", "hold", 0.3, 0, 0.2), ("s", "later", 0.2, 0, 0.8)])
    hung, writer, later = ev["presume"], ev["hold"], ev["later"]
    assert later["held"] < hung["end"] - 0.5 and later["held"] < writer["held"]
    assert writer["held"] >= hung["end"] - 0.01


def test_marks_that_keep_coming_do_not_starve_a_timed_check(tmp_path):
    # The H200's GPU suite at 1cab236: presumed-hung checks overlapped so that one was always
    # running, and the timed checks, stepping out while one was, held the GPU once in 505 s. Here
    # a second check arrives (1.5 s) while the first one's mark still runs (0.1 to 2.1 s) and
    # would be presumed hung in turn (to 4.6 s): past its patience (0.5 s) the timed check keeps
    # the lock, so the second one waits for it, and it times once the first mark has ended
    ev = _steppers(tmp_path, [("s", "presume", 0.1, 2.0, 0), ("x", "hold", 0.3, 0, 0.2),
                              ("s", "presume2", 0.1, 3.0, 1.3)], STEPPER_PATIENCE="0.5")
    first, writer, second = ev["presume"], ev["hold"], ev["presume2"]
    assert writer["held"] >= first["end"] - 0.01
    assert writer["held"] < second["held"]


def test_a_timed_check_waits_for_a_warm_up_only_as_long_as_its_patience(tmp_path):
    # a check warming up (an autotuner's search: minutes, mostly on the CPU) from 0.2 s to 4.2 s;
    # a timed check asks at 0.4 s: it holds the GPU about its patience (1 s) later, not at 4.2 s
    ev = _steppers(tmp_path, [("s", "warm", 0.2, 4.0, 0), ("x", "hold", 0.3, 0, 0.2)], STEPPER_PATIENCE="1.0")
    warm, writer = ev["warm"], ev["hold"]
    assert warm["presumed"] < writer["held"] < warm["end"] - 1.0


def test_a_patient_timed_check_does_not_queue_the_others_behind_a_long_shared_hold(tmp_path):
    # a check warms up from 0.1 s to 5.1 s; a long shared hold runs 0 to 3 s; a timed check asks
    # at about 0.5 s (patience 3 s) and a short check at about 1 s: the short one runs at once,
    # not after the long hold (a timed check draining the shared holders while a mark stands), and
    # the timed check holds the GPU once its patience is over and the long hold has ended
    ev = _steppers(tmp_path, [("s", "warm", 0.1, 5.0, 0), ("s", "long", 3.0, 0, 0.0),
                              ("x", "hold", 0.2, 0, 0.5), ("s", "short", 0.1, 0, 0.5)], STEPPER_PATIENCE="3.0")
    long_, writer, short = ev["long"], ev["hold"], ev["short"]
    assert short["held"] < long_["end"] - 1.0
    assert writer["held"] >= long_["end"] - 0.01 and writer["held"] < ev["warm"]["end"]


def test_a_timed_check_that_steps_aside_lets_the_shared_holders_run_and_comes_back(tmp_path):
    # a writer holds the GPU, a reader asks, the writer steps aside for 1 s: the reader runs in the
    # pause, and the writer holds the GPU again only once the reader has let it go
    ev = _steppers(tmp_path, [("x", "aside", 0.5, 1.0, 0), ("s", "hold", 0.3, 0, 0.2)])
    writer, reader = ev["aside"], ev["hold"]
    assert writer["held"] + 0.45 <= reader["held"] < writer["back"]
    assert writer["back"] >= reader["end"] - 0.01


def test_the_lock_log_has_one_line_per_hold(tmp_path):
    log = tmp_path / "lock.jsonl"
    _steppers(tmp_path, [("x", "aside", 0.3, 0.5, 0), ("s", "hold", 0.2, 0, 0.1), ("s", "presume", 0.1, 0.3, 1.5)],
              PYTEST_GEMM_LOCK_LOG=str(log))
    import json

    lines = [json.loads(line) for line in log.read_text().splitlines()]
    # the writer's hold before it stepped aside, the reader's, the writer's after; the presumed-hung
    # reader's hold, then its mark
    assert sorted((r["kind"], r["what"]) for r in lines) == [("r", "presume"), ("s", "hold"), ("s", "presume"),
                                                              ("x", "aside"), ("x", "aside")]
    mark = next(r for r in lines if r["kind"] == "r")
    assert mark["released"] - mark["held"] >= 0.25
    for r in lines:
        assert r["asked"] <= r["held"] <= r["released"] and r["pid"] > 0
    reader = next(r for r in lines if r["kind"] == "s")
    first = min((r for r in lines if r["kind"] == "x"), key=lambda r: r["held"])
    # it waited for the writer's first hold (to its end, in the log's 0.1 ms steps), not a set time:
    # on a loaded machine the reader's process asks later than planned, and waits less
    assert reader["asked"] < first["released"] <= reader["held"] + 0.0002


def test_a_nested_hold_owns_nothing_and_cannot_end_the_outer_one(tmp_path):
    with gpu_lock(True, key="8", directory=str(tmp_path)) as outer:
        with gpu_lock(False, key="8", directory=str(tmp_path)) as inner:
            assert inner.step_aside(0.01) is False
            inner.release()
            inner.presume_hung()
            assert outer.holding
        outer.presume_hung()  # a timed check's own hold is never presumed hung
        assert outer.holding
    assert not outer.holding


WRITER = textwrap.dedent("""
    import os, sys, time
    from pytest_gemm.measure.gpu_lock import gpu_lock
    while not os.path.exists(sys.argv[3]):  # the hold under test has begun
        time.sleep(0.005)
    time.sleep(float(sys.argv[1]))
    asked = time.time()
    with gpu_lock(True):
        held = time.time()
    open(sys.argv[2], "w").write(f"{asked} {held}")
""")


READER = textwrap.dedent("""
    import os, sys, time
    from pytest_gemm.measure.gpu_lock import gpu_lock
    while not os.path.exists(sys.argv[3]):
        time.sleep(0.005)
    time.sleep(float(sys.argv[1]))
    with gpu_lock(False):
        held = time.time()
    open(sys.argv[2], "w").write(f"{held}")
""")


def _others_during(tmp_path: Path, run) -> tuple[float, float, float, float, Exception | None]:
    """A timed check's process asking for the GPU 0.3 s after the hold under test begins, and a
    correctness check's 1.5 s after: (when the hold began, when run ended, when the timed check held
    the GPU, when the correctness check did, what run raised). ``run(guard)`` gets the guard to hold.
    The offsets count from the hold, not from the processes' start: on a loaded machine the child's
    start-up can take longer than 0.3 s, and a timed check asking before the hold is taken rightly
    goes first."""
    (tmp_path / "writer.py").write_text(WRITER)
    (tmp_path / "reader.py").write_text(READER)
    wrote, read, began = tmp_path / "writer.txt", tmp_path / "reader.txt", tmp_path / "hold-began"
    held_at: list[float] = []

    @contextlib.contextmanager
    def guard():
        with gpu_lock(False) as hold:
            held_at.append(time.time())
            began.touch()
            yield hold

    procs = [subprocess.Popen([sys.executable, str(tmp_path / "writer.py"), "0.3", str(wrote), str(began)],
                              env=fakegpu.env(tmp_path)),
             subprocess.Popen([sys.executable, str(tmp_path / "reader.py"), "1.5", str(read), str(began)],
                              env=fakegpu.env(tmp_path))]
    raised = None
    try:
        run(guard)
    except Exception as exc:  # noqa: BLE001 - the test reads it
        raised = exc
    ended = time.time()
    began.touch()  # never leave the two waiting
    for proc in procs:
        assert proc.wait(timeout=60) == 0
    assert held_at, "the hold under test was never taken"
    return held_at[0], ended, float(wrote.read_text().split()[1]), float(read.read_text()), raised


def test_a_check_presumed_hung_keeps_timings_off_the_gpu_but_not_the_other_checks(tmp_path, monkeypatch):
    # a hanging check holds the lock shared; 1 s in, it is presumed hung: a correctness check
    # asking 1.5 s in runs at once, although a timed check (asking 0.3 s in) is waiting, and the
    # timed check holds the GPU only once the hanging check has timed out and been killed
    monkeypatch.setenv("PYTEST_GEMM_LOCK_DIR", fakegpu.env(tmp_path)["PYTEST_GEMM_LOCK_DIR"])  # the child's
    (tmp_path / "fake_kernels.py").write_text(fakegpu.FAKE_KERNELS)
    client = sandbox.SandboxClient("fake_kernels.py:hang", 0, str(tmp_path), env=fakegpu.env(tmp_path))
    try:
        client.start()
        started, ended, timed, other, raised = _others_during(tmp_path, lambda guard: client.run(
            "exact", [64, 64, 64], {}, {}, timeout=6.0, guard=guard, hold_s=1.0))
    finally:
        client.stop()
    assert isinstance(raised, GemmCheckFailure) and raised.category == cat.TIMEOUT
    assert "did not finish within 6 s" in raised.summary
    # the correctness check did not wait for the hang (2.5 s of slack for a loaded machine: with
    # 1 s, a run at load average 30 on 2 cores failed it)
    assert other < started + 4.0 < ended - 1.0
    assert timed >= ended - 0.05                 # the timing waited for it
    # without the presumption the correctness check queues behind the waiting timed check
    client = sandbox.SandboxClient("fake_kernels.py:hang", 0, str(tmp_path), env=fakegpu.env(tmp_path))
    try:
        client.start()
        started, ended, timed, other, raised = _others_during(tmp_path, lambda guard: client.run(
            "exact", [64, 64, 64], {}, {}, timeout=3.0, guard=guard))
    finally:
        client.stop()
    assert other >= timed >= ended - 0.05


def test_a_start_up_presumed_hung_lets_the_other_checks_run(tmp_path, monkeypatch):
    monkeypatch.setenv("PYTEST_GEMM_LOCK_DIR", fakegpu.env(tmp_path)["PYTEST_GEMM_LOCK_DIR"])  # the child's
    (tmp_path / "fake_kernels.py").write_text(fakegpu.FAKE_KERNELS)
    client = sandbox.SandboxClient("fake_kernels.py:ok", 0, str(tmp_path),
                                   env=fakegpu.env(tmp_path, FAKEGPU_PREPARE_S="3.5"))
    try:
        started, ended, timed, other, raised = _others_during(tmp_path, lambda guard: client.start(
            "64x64x64", guard, hold_s=0.8))
    finally:
        client.stop()
    assert raised is None and ended >= started + 3.5  # the start-up ran its 3.5 s...
    assert other <= started + 2.5 and timed >= ended - 0.05  # ...the check went on, the timing waited


def test_a_check_is_presumed_hung_after_the_budget_a_hung_kernel_gets():
    assert hangs.presumed_hung_after(0) == hangs.HANG_FLOOR_S == 3.0
    assert hangs.presumed_hung_after(2 * 1024 ** 3) == pytest.approx(3.0 + 2 * 1024 ** 3 / 20e9)


def test_the_lock_can_be_turned_off(tmp_path, monkeypatch):
    monkeypatch.setenv("PYTEST_GEMM_GPU_LOCK", "off")
    with gpu_lock(True, key="9", directory=str(tmp_path / "nowhere")):
        pass
    assert not (tmp_path / "nowhere").exists()
    assert os.environ["PYTEST_GEMM_GPU_LOCK"] == "off"
