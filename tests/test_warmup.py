"""Warm-up seen at run time (checks/warmup.py), with no GPU: the stack classification on real
frames of stand-in modules named like Triton's, Numba's and CuPy's; the parent's clock; and the
sandbox protocol with fake checks that really spend their time in such frames."""
from __future__ import annotations

import contextlib
import os
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable

import pytest

from pytest_gemm.checks.sandbox import DISPATCH_ENV, SandboxClient
from pytest_gemm.checks.warmup import BUDGET_ENV, WarmupClock, WarmupTimeout, budget_s, classify, stack
from pytest_gemm.model.categories import GemmCheckFailure

# A function defined in a module of the given name calls ``then`` inside it: its frame's module is
# that name, as a frame of the real package's is (the watcher reads f_globals["__name__"]).
STAND_IN = '''
def {function}(then):
    return then()
'''


def in_module(module: str, function: str = "run") -> Callable[[Callable[[], Any]], Any]:
    namespace: dict[str, Any] = {"__name__": module}
    exec(compile(STAND_IN.format(function=function), f"<{module}>", "exec"), namespace)
    return namespace[function]


def frames_inside(*where: tuple[str, str]) -> list[tuple[str, str]]:
    """The stack (module, function), outermost first, seen from inside the nested calls ``where``."""
    seen: list[list[tuple[str, str]]] = []

    def innermost() -> None:
        seen.append(stack(sys._getframe()))

    call: Callable[[], Any] = innermost
    for module, function in reversed(where):
        call = (lambda f, inner: (lambda: f(inner)))(in_module(module, function), call)
    call()
    return seen[0]


@pytest.mark.parametrize("where, said", [
    ((("triton.runtime.autotuner", "run"),), "Triton autotuning"),
    ((("triton.runtime.autotuner", "run"), ("triton.compiler.compiler", "compile")),
     "Triton autotuning (Triton compiling)"),
    ((("mylib.ops", "matmul"), ("triton.runtime.jit", "run"), ("triton.compiler.compiler", "compile")),
     "Triton compiling"),
    ((("triton.testing", "do_bench"),), "Triton benchmarking a config"),
    ((("triton.runtime.build", "_build"),), "Triton building its launcher"),
    ((("numba.cuda.dispatcher", "compile"),), "Numba JIT compiling"),
    ((("cupy.cuda.compiler", "compile_using_nvrtc"),), "CuPy compiling (NVRTC)"),
    ((("torch.utils.cpp_extension", "load_inline"),), "building a torch extension"),
    ((("mylib.ops", "matmul"), ("importlib._bootstrap", "_find_and_load"), ("importlib._bootstrap", "_load_unlocked")),
     "importing modules"),
    ((("torch.cuda", "_lazy_init"),), "torch initialising CUDA"),
    ((("pytest_gemm.checks.dispatch", "run_check"), ("pytest_gemm.measure.trace", "flush")), "reading the launch trace"),
    ((("mylib.ops", "load"), ("importlib._bootstrap_external", "exec_module")), "importing modules"),
])
def test_a_warm_up_is_named_by_the_frames_of_the_main_thread(where, said):
    assert classify(frames_inside(*where)) == said


@pytest.mark.parametrize("where", [
    (),                                              # this test's own frames
    (("triton.runtime.jit", "run"),),                # launching a compiled Triton kernel: no warm-up
    (("numba.cuda.dispatcher", "__call__"),),        # calling a compiled Numba kernel
    (("cupy.cuda.stream", "synchronize"),),          # blocked in a CUDA sync: a hang, if it lasts
    (("tritonish.compiler", "compile"),),            # a name that only starts like triton's
])
def test_running_or_waiting_is_no_warm_up(where):
    assert classify(frames_inside(*where)) is None


def test_the_clock_refunds_the_first_reports_seconds_and_stops_at_its_budget():
    said: list[str] = []
    clock = WarmupClock(5.0, said.append)
    assert clock.event({"event": "lock_wait"}) is None and not clock.warming
    assert clock.event({"event": "warmup", "what": "Triton autotuning", "seconds": 1.5}) == 1.5
    assert clock.warming and said == ["warming up: Triton autotuning, 2 s so far (not counted in the check's timeout)"]
    clock.spend(2.0)
    with pytest.raises(WarmupTimeout) as timeout:
        clock.spend(2.0)
    assert "was still warming up (Triton autotuning) after 5 s (PYTEST_GEMM_WARMUP_TIMEOUT)" in \
        timeout.value.summary("exact", "64x64x64")
    assert clock.event({"event": "warmup_end"}) == 0.0 and not clock.warming


def test_the_budget_reads_its_environment_variable():
    assert budget_s({}) == 600.0 and budget_s({BUDGET_ENV: "900"}) == 900.0
    with pytest.raises(ValueError, match="PYTEST_GEMM_WARMUP_TIMEOUT='soon': expected a number of seconds"):
        budget_s({BUDGET_ENV: "soon"})


# -- the protocol: a child whose check really spends its time in a stand-in compiler's frame --------

KERNELS = '''
from pytest_gemm import kernel


@kernel(name="launcher")
def launcher(a, b, c):
    raise AssertionError("the fake dispatcher never launches a kernel")
'''

DISPATCH = '''
import time

_SEEN = set()
_NAMESPACE = {"__name__": "triton.runtime.autotuner"}
exec("def run(then):\\n    return then()\\n", _NAMESPACE)
tune = _NAMESPACE["run"]  # a frame of a module named like Triton's autotuner
_TRACE = {"__name__": "pytest_gemm.measure.trace"}
exec("def flush(then):\\n    return then()\\n", _TRACE)
read_trace = _TRACE["flush"]  # the launch trace's reading of a check's records, as its frame shows it


def run_check(kernel, check, shape, params, options, facts):
    warm, hang = float(params.get("warm", 0)), float(params.get("then", 0))
    if warm and tuple(shape) not in _SEEN:  # the first call at a shape only, like an autotuner
        _SEEN.add(tuple(shape))
        if params.get("compiler"):  # a compiler run as a child process: no warm-up frame at all
            import subprocess
            subprocess.run([params["compiler"], str(warm)], check=True)
        else:
            tune(lambda: time.sleep(warm))
    time.sleep(hang)  # outside any warm-up frame: a hang, if long
    if params.get("read"):
        read_trace(lambda: time.sleep(float(params["read"])))
'''


@pytest.fixture
def client(tmp_path: Path, monkeypatch):
    monkeypatch.setenv(BUDGET_ENV, "6")  # the parent's: it keeps the warm-up's clock
    (tmp_path / "warm_kernels.py").write_text(KERNELS)
    (tmp_path / "warm_dispatch.py").write_text(DISPATCH)
    made = SandboxClient("warm_kernels.py:launcher", 0, str(tmp_path),
                         env={**os.environ, DISPATCH_ENV: "warm_dispatch:run_check"})
    said: list[str] = []
    made.progress = said.append
    made.said = said  # type: ignore[attr-defined]
    yield made
    made.stop()


def test_a_first_call_that_tunes_is_not_charged_to_the_checks_timeout(client):
    client.run("exact", [64, 64, 64], {"warm": 3.0}, {}, timeout=1.0)  # 3 s warm-up, a 1 s budget
    assert 2.5 <= client.last_warmup_s < 4.0 and client.last_seconds < 1.0
    assert client.said[0].startswith("warming up: Triton autotuning, ") and client.said[-1].startswith("done warming up")
    client.run("exact", [64, 64, 64], {"warm": 3.0}, {}, timeout=1.0)  # tuned: no warm-up at that shape again
    assert client.last_warmup_s == 0.0


def test_reading_a_long_launch_trace_is_not_charged_to_the_checks_timeout_nor_said_when_short(client):
    # an autotuner's 20,000 launches at a shape took 3 to 12 s to read after its warm-up had ended
    # (H100, c43cd1e), and the check timed out there: the harness's own work, not the kernel's
    client.run("exact", [64, 64, 64], {"read": 3.0}, {}, timeout=1.0)
    assert 2.5 <= client.last_warmup_s < 4.0 and client.last_seconds < 1.0
    assert not [line for line in client.said if "launch trace" in line]  # under 10 s: no terminal line


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="children are found through Linux's /proc")
def test_a_launcher_that_runs_a_compiler_as_a_child_is_warming_up_whatever_started_it(client, tmp_path):
    """issue 43 (2): a first call that runs nvcc itself (a course's launcher, a build step) shows
    no Python frame of any package pytest-gemm knows; the compiler process is seen instead."""
    nvcc = tmp_path / "bin" / "nvcc"  # a stand-in: the name is what is seen, as for the real one
    nvcc.parent.mkdir()
    nvcc.write_text('#!/bin/sh\nsleep "$1"\n')
    nvcc.chmod(0o755)
    client.run("exact", [64, 64, 64], {"warm": 3.0, "compiler": str(nvcc)}, {}, timeout=1.0)  # 3 s, a 1 s budget
    assert 2.0 <= client.last_warmup_s < 4.0 and client.last_seconds < 1.5, (client.last_warmup_s, client.last_seconds)
    assert client.said[0].startswith("warming up: compiling (nvcc), "), client.said


def test_a_warm_up_ends_the_checks_shared_hold_at_once_so_no_check_queues_behind_it(client):
    # A timed check waiting for a shared hold queues every new shared holder behind itself: a
    # minute of autotuning under a shared hold stalled the whole GPU suite (79 % of its time).
    presumed: list[float] = []
    started = [0.0]

    @contextlib.contextmanager
    def guard():
        started[0] = time.monotonic()
        yield SimpleNamespace(presume_hung=lambda warming=False: presumed.append(
            (time.monotonic() - started[0], warming)))

    client.run("exact", [8, 8, 8], {"warm": 2.5}, {}, timeout=30.0, guard=guard, hold_s=60.0)
    assert presumed and presumed[0][0] < 1.5 and presumed[0][1], presumed  # when the warm-up was seen, not after 60 s
    # marked as warming up (timed checks wait for that a while only), and as presumed hung again if
    # the check goes on after its warm-up
    assert [warming for _, warming in presumed] in ([True], [True, False]), presumed
    presumed.clear()
    client.run("exact", [8, 8, 8], {"warm": 2.5}, {}, timeout=30.0, guard=guard, hold_s=60.0)  # tuned: no warm-up
    assert presumed == []


def test_a_hang_after_a_warm_up_is_still_a_timeout_within_the_checks_budget(client):
    with pytest.raises(GemmCheckFailure) as failure:
        client.run("exact", [32, 32, 32], {"warm": 2.0, "then": 120}, {}, timeout=1.5)
    assert failure.value.category == "timeout" and "did not finish within 1.5 s" in failure.value.summary


def test_a_warm_up_past_its_own_budget_is_a_timeout_that_says_so(client):
    with pytest.raises(GemmCheckFailure) as failure:
        client.run("exact", [16, 16, 16], {"warm": 120}, {}, timeout=1.0)
    assert failure.value.category == "timeout"
    assert "was still warming up (Triton autotuning) after 6 s (PYTEST_GEMM_WARMUP_TIMEOUT)" in failure.value.summary


def test_a_kernel_seen_autotuning_at_run_time_gets_the_quick_shape_set():
    """Issue 43: a tuner found while it runs gets what one found in the launcher's code gets: after
    its process reported Triton autotuning, its checks at shapes of the full set only are skipped,
    saying why; the quick set's shapes run; --gemm-shapes full (or quick) is left as chosen."""

    import pytest

    from pytest_gemm.checks import registry
    from pytest_gemm.checks.warmup import WarmupClock
    from pytest_gemm.runner import execution

    st = SimpleNamespace(shapes="auto", tuned_at_run_time=set())
    key = ("launchers.py:inside", 0)
    exact = registry.get("exact")
    full_only = next(s for s in exact.shapes if tuple(s) not in map(tuple, exact.quick))
    quick = tuple(exact.quick[0])

    execution._quick_after_tuning(st, key, "exact", full_only)  # not seen tuning yet: runs

    no_terminal = SimpleNamespace(pluginmanager=SimpleNamespace(get_plugin=lambda name: None))  # says it on stderr
    progress = execution.Progress(no_terminal, "k exact at 1x1x1", lambda what: execution._note_tuning(st, key, what))
    clock = WarmupClock(60.0, progress)
    clock.event({"event": "warmup", "what": "CuPy compiling (NVRTC)", "seconds": 0.5})
    assert key not in st.tuned_at_run_time  # a compile is a warm-up, not a tuner
    clock.event({"event": "warmup", "what": "Triton autotuning", "seconds": 0.5})
    assert st.tuned_at_run_time == {key}

    with pytest.raises(pytest.skip.Exception, match="autotuning found at run time"):
        execution._quick_after_tuning(st, key, "exact", full_only)
    execution._quick_after_tuning(st, key, "exact", quick)  # a quick shape still runs
    execution._quick_after_tuning(st, ("other.py:k", 0), "exact", full_only)  # another kernel: unaffected
    st.shapes = "full"
    execution._quick_after_tuning(st, key, "exact", full_only)  # --gemm-shapes full: every shape


def test_a_warm_up_seen_just_after_a_lock_wait_starts_when_the_wait_ended(monkeypatch):
    # The wait for the GPU lock is taken off a check's time already; a warm-up dated back to the
    # sample before (inside that wait) was taken off twice: a fake check importing a module right
    # after its wait, under load, read 0.0 s of its 0.3 s (CI at 4602d0c)
    import threading

    from pytest_gemm.checks import warmup

    sent: list[dict] = []
    watch = warmup.Watch(sent.append, threading.get_ident())
    watch.last = 100.0  # the previous sample, during the wait
    monkeypatch.setattr(warmup, "wait_ended", lambda: 100.2)
    monkeypatch.setattr(warmup, "classify", lambda frames: "importing modules")
    watch.sample(100.25)
    monkeypatch.setattr(warmup, "classify", lambda frames: None)
    watch.sample(100.5)
    assert watch.total_s == pytest.approx(0.05) and [e["event"] for e in sent] == ["warmup", "warmup_end"]
    assert sent[0]["seconds"] == pytest.approx(0.05)  # what the parent refunds: not the wait's end either


def test_a_warm_up_ends_at_the_last_sample_that_saw_it(monkeypatch):
    # An import ending just after a sample, then the check's own 0.3 s: counted to the next
    # sample, the warm-up took 0.25 s of the check's time (CI at 8874373 read 0.05 s of its 0.3 s)
    import threading

    from pytest_gemm.checks import warmup

    sent: list[dict] = []
    watch = warmup.Watch(sent.append, threading.get_ident())
    watch.last = 100.0
    monkeypatch.setattr(warmup, "wait_ended", lambda: 0.0)
    monkeypatch.setattr(warmup, "classify", lambda frames: "importing modules")
    watch.sample(100.25)
    watch.sample(100.5)  # still importing
    monkeypatch.setattr(warmup, "classify", lambda frames: None)
    monkeypatch.setattr(warmup, "compiling_child", lambda: None)
    watch.sample(100.75)
    assert watch.total_s == pytest.approx(0.5)  # 100.0 (the sample before it) to 100.5, not to 100.75
    watch.what, watch.started, watch.seen = "importing modules", 101.0, 101.25
    watch.end(101.4)  # the check ended while warming up: also to the last sample that saw it
    assert watch.total_s == pytest.approx(0.75)
