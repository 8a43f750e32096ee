"""The sandbox protocol and the timing judges, tested with no GPU.

The sandbox child runs each check through ``pytest_gemm.checks.dispatch.run_check``; the
``PYTEST_GEMM_DISPATCH`` test hook points it at ``fake_dispatch.run_check``
below instead, whose checks sleep, raise, print, exit or abort on request. The
kernel the child loads is a plain ``@kernel`` Python function, which needs no
CUDA to declare. So everything here runs in CI: a normal reply, a failure
crossing with its category, summary, details and facts, a hang killed after the
timeout with the next check in a fresh process, exit statuses and signals
reported as ``fault`` with the process's last output, skips and usage errors
crossing as themselves.
"""
from __future__ import annotations

import os
import textwrap
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

from pytest_gemm.model import categories as cat
from pytest_gemm.model.categories import GemmCheckFailure
from pytest_gemm.checks.sandbox import DISPATCH_ENV, SandboxClient
from pytest_gemm.measure.timing import (ESCAPE_FLOOR_MS, ROOF_MARGIN, TimingResult, above_roof, escape_verdict,
                                escaped_work, summarize)

FAKE_KERNELS = '''
from pytest_gemm import kernel


@kernel(name="fake")
def fake(a, b, c):
    raise AssertionError("the fake dispatcher never launches a kernel")


@kernel(name="other")
def other(a, b, c):
    raise AssertionError("the fake dispatcher never launches a kernel")


both = [fake, other]
'''

EXITS_AT_IMPORT = '''
import os

print("exits_at_import: bye", flush=True)
os._exit(5)
'''

FAKE_DISPATCH = '''
import os
import sys
import time

from pytest_gemm.model.categories import GemmCheckFailure


class CUDARuntimeError(RuntimeError):
    """Named like CuPy's: the child treats it as a poisoned CUDA context."""


def run_check(kernel, check, shape, params, options, facts):
    facts["pid"] = os.getpid()
    facts["kernel"] = kernel.name
    if check == "ok":
        facts["echo"] = {"shape": shape, "params": params, "options": options}
    elif check == "fail":
        facts["recorded_before_failing"] = 42
        print("fake: about to fail", flush=True)
        raise GemmCheckFailure("wrong_values", "rows 3..4 of C are wrong", ["detail one", "detail two"])
    elif check == "sleep":
        if params.get("grandchild"):
            import subprocess
            child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
            with open(params["grandchild"], "w") as f:
                f.write(str(child.pid))
        print("fake: sleeping", flush=True)
        time.sleep(float(params.get("seconds", 120)))
    elif check == "exit":
        print("fake: giving up, exit status 3", flush=True)
        os._exit(3)
    elif check == "sys_exit":
        sys.exit(3)
    elif check == "abort":
        import resource
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # no core file
        print("fake: aborting", flush=True)
        os.abort()
    elif check == "skip":
        import pytest
        pytest.skip("needs a fake capability")
    elif check == "usage":
        import pytest
        raise pytest.UsageError("--fake-option: bad value; try 1")
    elif check == "bug":
        raise ValueError("a bug in the check itself")
    elif check == "harness_bug":  # pytest-gemm's own code raises: here, bad arguments to a judge
        from pytest_gemm.judges.inputs import exact_inputs
        exact_inputs(0, 1, 1)
    elif check == "bad_declaration":  # pytest-gemm's own code rejects what the kernel declared
        from pytest_gemm.model.contract import parse_signature
        parse_signature("A,B,X")
    elif check == "harness_bug_in_kernel_call":  # the same, raised while the kernel's call ran
        from pytest_gemm.checks.sandbox_child import KernelCall
        from pytest_gemm.judges.inputs import exact_inputs
        KernelCall(exact_inputs)(0, 1, 1)
    elif check == "collectable":
        import gc
        facts["frozen"], facts["collectable"] = gc.get_freeze_count(), len(gc.get_objects())
    elif check == "cuda_error":
        raise CUDARuntimeError("cudaErrorIllegalAddress: an illegal memory access was encountered")
    else:
        raise ValueError(f"unknown fake check {check!r}")
'''


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    (tmp_path / "fake_kernels.py").write_text(FAKE_KERNELS)
    (tmp_path / "exits_at_import.py").write_text(EXITS_AT_IMPORT)
    (tmp_path / "fake_dispatch.py").write_text(FAKE_DISPATCH)
    return tmp_path


def _client(workdir: Path, spec: str = "fake_kernels.py:fake") -> SandboxClient:
    env = {**os.environ, DISPATCH_ENV: "fake_dispatch:run_check"}
    return SandboxClient(spec, 0, str(workdir), env=env)


@pytest.fixture
def sandbox(workdir: Path) -> Iterator[SandboxClient]:
    client = _client(workdir)
    yield client
    client.stop()


def run(client: SandboxClient, check: str, timeout: float = 60.0, **params: Any) -> dict[str, Any]:
    return client.run(check, [2, 3, 4], params, {"budget_s": 0.5}, timeout)


def test_what_the_start_up_made_is_out_of_the_collections_after_each_check(sandbox):
    # release_memory collects garbage after every check (a class's student runs about 60): a
    # collection through every module, the kernel and CuPy's kernels took 16 to 42 ms each time
    facts = run(sandbox, "collectable")
    assert facts["frozen"] > 5000 and facts["collectable"] < facts["frozen"] / 2


def _gone(pid: int) -> bool:
    """The process no longer runs (reaped, or a zombie waiting for its reaper)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return True
    return state in ("Z", "X")


# -- replies ------------------------------------------------------------------------

def test_a_normal_reply_returns_the_facts(sandbox: SandboxClient):
    facts = run(sandbox, "ok", seed=7)
    assert facts["kernel"] == "fake"
    assert facts["echo"] == {"shape": [2, 3, 4], "params": {"seed": 7}, "options": {"budget_s": 0.5}}
    assert facts["pid"] != os.getpid()


def test_checks_of_one_kernel_share_one_process(sandbox: SandboxClient):
    pids = {run(sandbox, "ok")["pid"] for _ in range(3)}
    assert len(pids) == 1


def test_a_retargeted_client_runs_the_other_kernel_in_the_same_process(workdir: Path):
    client = _client(workdir, "fake_kernels.py:both")
    try:
        first = run(client, "ok")
        client.target("fake_kernels.py:both", 1)
        second = run(client, "ok")
        client.target("fake_kernels.py:both", 0)
        third = run(client, "ok")
    finally:
        client.stop()
    assert [first["kernel"], second["kernel"], third["kernel"]] == ["fake", "other", "fake"]
    assert first["pid"] == second["pid"] == third["pid"]  # one process, reloaded, not restarted


def test_a_retargeted_client_loads_its_target_after_a_restart(workdir: Path):
    client = _client(workdir, "fake_kernels.py:both")
    try:
        run(client, "ok")
        client.target("fake_kernels.py:both", 1)
        with pytest.raises(GemmCheckFailure):
            run(client, "exit")  # the process ends; the next check starts a fresh one
        after = run(client, "ok")
    finally:
        client.stop()
    assert after["kernel"] == "other"


def test_a_failure_crosses_with_category_summary_details_and_facts(sandbox: SandboxClient):
    with pytest.raises(GemmCheckFailure) as info:
        run(sandbox, "fail")
    exc = info.value
    assert exc.category == cat.WRONG_VALUES
    assert exc.summary == "rows 3..4 of C are wrong"
    assert exc.details[:2] == ["detail one", "detail two"]
    assert exc.facts["recorded_before_failing"] == 42  # type: ignore[attr-defined]
    # what the check printed is part of the diagnosis, and only what this check printed
    assert any("fake: about to fail" in d for d in exc.details), exc.details
    # an ordinary failure does not cost the process
    assert run(sandbox, "ok")["pid"] == exc.facts["pid"]  # type: ignore[attr-defined]


def test_output_of_an_earlier_check_is_not_repeated(sandbox: SandboxClient):
    with pytest.raises(GemmCheckFailure):
        run(sandbox, "fail")
    with pytest.raises(GemmCheckFailure) as info:
        run(sandbox, "bug")
    assert not any("about to fail" in d for d in info.value.details), info.value.details


def test_a_skip_crosses_as_a_skip(sandbox: SandboxClient):
    with pytest.raises(pytest.skip.Exception, match="needs a fake capability"):
        run(sandbox, "skip")
    assert run(sandbox, "ok")["kernel"] == "fake"


def test_a_usage_error_crosses_as_a_usage_error(sandbox: SandboxClient):
    with pytest.raises(pytest.UsageError, match="--fake-option: bad value"):
        run(sandbox, "usage")


def test_an_exception_outside_pytest_gemm_is_a_launch_error_with_its_traceback(sandbox: SandboxClient):
    # raised in a file of the user's side (here the test hook): the kernel's launch_error
    with pytest.raises(GemmCheckFailure) as info:
        run(sandbox, "bug")
    assert info.value.category == cat.LAUNCH_ERROR
    assert "ValueError: a bug in the check itself" in info.value.summary
    assert any("fake_dispatch.py" in d for d in info.value.details), info.value.details


def test_an_exception_of_pytest_gemm_itself_is_a_harness_error(sandbox: SandboxClient):
    # raised inside pytest-gemm's package, not during the kernel's call: our bug, no verdict
    with pytest.raises(GemmCheckFailure) as info:
        run(sandbox, "harness_bug")
    assert info.value.category == cat.HARNESS_ERROR
    assert "a bug in pytest-gemm" in info.value.summary and "ValueError" in info.value.summary
    assert any("inputs.py" in d for d in info.value.details), info.value.details
    assert run(sandbox, "ok")["kernel"] == "fake"  # the same process goes on


@pytest.mark.parametrize("check", ["harness_bug_in_kernel_call", "bad_declaration"])
def test_an_exception_during_the_kernels_call_or_about_its_declaration_is_the_kernels(sandbox: SandboxClient,
                                                                                      check: str):
    with pytest.raises(GemmCheckFailure) as info:
        run(sandbox, check)
    assert info.value.category == cat.LAUNCH_ERROR


def test_a_cuda_error_is_a_fault_and_the_next_check_gets_a_fresh_process(sandbox: SandboxClient):
    before = run(sandbox, "ok")["pid"]
    with pytest.raises(GemmCheckFailure) as info:
        run(sandbox, "cuda_error")
    assert info.value.category == cat.FAULT
    assert "illegal memory access" in info.value.summary
    assert _gone(before)
    assert run(sandbox, "ok")["pid"] != before


# -- hangs ------------------------------------------------------------------------------

def test_a_hang_is_killed_after_the_timeout_and_the_next_check_runs_in_a_fresh_process(
        sandbox: SandboxClient, workdir: Path):
    before = run(sandbox, "ok")["pid"]
    grandchild_file = workdir / "grandchild.pid"
    t0 = time.monotonic()
    with pytest.raises(GemmCheckFailure) as info:
        run(sandbox, "sleep", timeout=2.0, seconds=120, grandchild=str(grandchild_file))
    took = time.monotonic() - t0
    exc = info.value
    assert exc.category == cat.TIMEOUT
    assert "sleep at 2x3x4 did not finish within 2 s" in exc.summary
    assert "killed" in exc.summary
    assert any("fake: sleeping" in d for d in exc.details), exc.details
    # and where it was when its time ran out: the launcher's own line, innermost first
    assert any(d.startswith("where it was, innermost first: ") and "fake_dispatch.py:" in d and "in run_check" in d
               for d in exc.details), exc.details
    assert took < 30, f"the timeout of 2 s took {took:.1f} s to act"
    assert _gone(before)
    # everything the kernel started dies with it (the child is its own process group)
    grandchild = int(grandchild_file.read_text())
    deadline = time.monotonic() + 10
    while not _gone(grandchild) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _gone(grandchild), "a process the kernel started outlived the timeout"
    after = run(sandbox, "ok")
    assert after["pid"] != before


# -- the process ends -------------------------------------------------------------------

def test_exit_is_a_fault_naming_the_status_with_the_last_output(sandbox: SandboxClient):
    before = run(sandbox, "ok")["pid"]
    with pytest.raises(GemmCheckFailure) as info:
        run(sandbox, "exit")
    exc = info.value
    assert exc.category == cat.FAULT
    assert exc.summary == "exit at 2x3x4: the process exited with status 3"
    assert any("fake: giving up, exit status 3" in d for d in exc.details), exc.details
    assert any("fresh process" in d for d in exc.details)
    assert run(sandbox, "ok")["pid"] != before


def test_sys_exit_is_a_fault_and_the_process_is_replaced(sandbox: SandboxClient):
    before = run(sandbox, "ok")["pid"]
    with pytest.raises(GemmCheckFailure) as info:
        run(sandbox, "sys_exit")
    assert info.value.category == cat.FAULT
    assert "sys.exit(3)" in info.value.summary
    assert run(sandbox, "ok")["pid"] != before


def test_a_signal_is_a_fault_naming_the_signal(sandbox: SandboxClient):
    with pytest.raises(GemmCheckFailure) as info:
        run(sandbox, "abort")
    exc = info.value
    assert exc.category == cat.FAULT
    assert "the process was killed by signal SIGABRT" in exc.summary
    assert any("fake: aborting" in d for d in exc.details), exc.details
    assert run(sandbox, "ok")["kernel"] == "fake"


def test_a_process_that_ends_while_loading_the_kernel_is_a_fault(workdir: Path):
    client = _client(workdir, "exits_at_import.py:nothing")
    try:
        with pytest.raises(GemmCheckFailure) as info:
            run(client, "ok")
    finally:
        client.stop()
    assert info.value.category == cat.FAULT
    assert "loading the kernel" in info.value.summary and "exited with status 5" in info.value.summary
    assert any("exits_at_import: bye" in d for d in info.value.details)


def test_a_spec_the_child_cannot_load_fails_with_the_reason(workdir: Path):
    client = _client(workdir, "fake_kernels.py:missing")
    try:
        with pytest.raises(GemmCheckFailure) as info:
            run(client, "ok")
    finally:
        client.stop()
    assert info.value.category == cat.LAUNCH_ERROR
    assert "has no attribute 'missing'" in info.value.summary


def test_stop_ends_the_child_and_a_later_check_starts_another(sandbox: SandboxClient):
    before = run(sandbox, "ok")["pid"]
    sandbox.stop()
    assert _gone(before)
    sandbox.stop()  # twice is fine
    assert run(sandbox, "ok")["pid"] != before


# -- timing: pure -----------------------------------------------------------------------

def test_summarize_median_quartiles_and_spread():
    t = summarize([5.0, 1.0, 3.0, 2.0, 4.0], flops=2e12)
    assert (t.median_ms, t.min_ms, t.q1_ms, t.q3_ms, t.repeats) == (3.0, 1.0, 2.0, 4.0, 5)
    assert t.spread == pytest.approx((4.0 - 2.0) / 3.0)
    assert t.tflops == pytest.approx(2e12 / 3e-3 / 1e12)
    d = t.as_dict()
    assert d["spread"] == pytest.approx(t.spread) and d["tflops"] == pytest.approx(t.tflops)
    assert d["escaped_ms"] == 0.0 and d["escaped_max_ms"] == 0.0


def test_summarize_few_repeats_uses_the_extremes_as_quartiles():
    t = summarize([2.0, 1.0, 4.0], flops=1.0)
    assert (t.median_ms, t.q1_ms, t.q3_ms) == (2.0, 1.0, 4.0)
    one = summarize([1.5], flops=1.0)
    assert (one.median_ms, one.q1_ms, one.q3_ms, one.spread) == (1.5, 1.5, 1.5, 0.0)


def test_summarize_needs_timings():
    with pytest.raises(ValueError, match="no timings"):
        summarize([], flops=1.0)


def test_summarize_zero_median_has_no_rate():
    t = summarize([0.0, 0.0], flops=1e9)
    assert t.tflops == 0.0 and t.spread == 0.0


def test_escape_keeps_the_upper_quartile_and_the_maximum():
    t = summarize([1.0] * 8, flops=1.0, escaped_ms=[0.01] * 7 + [40.0])
    assert t.escaped_ms == pytest.approx(0.01) and t.escaped_max_ms == 40.0
    assert summarize([1.0], flops=1.0, escaped_ms=3.0).escaped_ms == 3.0


def _timing(median_ms: float, escapes: list[float] | float = 0.0, flops: float = 2 * 4096 ** 3) -> TimingResult:
    return summarize([median_ms] * 20, flops=flops, escaped_ms=escapes)


def test_one_call_delayed_by_the_host_is_not_an_escape():
    # one deviceSynchronize that took 30 ms (the process was descheduled) among honest ones
    assert escaped_work(_timing(2.7, [0.01] * 19 + [30.0])) is None


def test_work_left_running_on_every_call_is_an_escape():
    verdict = escaped_work(_timing(0.004, [17.0] * 20))
    assert verdict is not None
    summary, details = verdict
    assert "17.00 ms of GPU work was still running after the timed region ended" in summary
    assert any("non_blocking" in d for d in details)


def test_work_left_running_on_half_the_calls_is_an_escape():
    assert escaped_work(_timing(2.0, [0.01, 17.0] * 10)) is not None


def test_small_escapes_are_below_the_floor_or_the_fraction():
    assert escaped_work(_timing(0.004, [0.9 * ESCAPE_FLOOR_MS] * 20)) is None
    assert escaped_work(_timing(10.0, [4.0] * 20)) is None   # under half the median
    assert escaped_work(_timing(10.0, [6.0] * 20)) is not None


def test_a_rate_above_the_roof_is_flagged():
    roof = 67.0
    honest = _timing(2.7)                      # 50.9 TFLOP/s: cuBLAS FP32 at 4096 on an H200
    assert above_roof(honest, roof) is None
    cheat = _timing(0.03)                      # a 64 MB copy: thousands of TFLOP/s
    verdict = above_roof(cheat, roof, "fp32")
    assert verdict is not None and "faster than this GPU's fp32 roof (67.0 TFLOP/s)" in verdict[0]
    flops = 2 * 4096 ** 3
    just_below = summarize([flops / (0.99 * ROOF_MARGIN * roof * 1e12) * 1e3], flops=flops)
    just_above = summarize([flops / (1.01 * ROOF_MARGIN * roof * 1e12) * 1e3], flops=flops)
    assert above_roof(just_below, roof) is None and above_roof(just_above, roof) is not None


def test_an_unknown_roof_flags_nothing():
    assert above_roof(_timing(1e-6), 0.0) is None


def test_the_verdict_names_escaped_work_first_and_adds_the_roof():
    verdict = escape_verdict(_timing(0.004, [17.0] * 20), 67.0, "fp32")
    assert verdict is not None
    summary, details = verdict
    assert summary.startswith("17.00 ms of GPU work was still running")
    assert any("faster than this GPU's fp32 roof" in d for d in details), details
    only_roof = escape_verdict(_timing(0.03), 67.0)
    assert only_roof is not None and "roof" in only_roof[0]
    assert escape_verdict(_timing(2.7, [0.01] * 20), 67.0) is None


def test_timing_module_docstring_documents_the_criterion():
    import pytest_gemm.measure.timing as timing

    doc = " ".join((timing.__doc__ or "").split())
    for words in ("upper quartile", "non_blocking", "legacy default stream", "ESCAPE_FLOOR_MS",
                  "ROOF_MARGIN", "timing_escape"):
        assert words in doc, words


def test_the_dispatch_hook_is_documented():
    import pytest_gemm.checks.sandbox as sandbox

    assert DISPATCH_ENV == "PYTEST_GEMM_DISPATCH"
    assert DISPATCH_ENV in (sandbox.__doc__ or "")


def test_fake_modules_are_valid_python():
    compile(textwrap.dedent(FAKE_DISPATCH), "fake_dispatch.py", "exec")
    compile(textwrap.dedent(FAKE_KERNELS), "fake_kernels.py", "exec")


def test_a_busy_sandbox_child_dies_with_the_pytest_process(workdir: Path):
    """A CI timeout kills pytest while a kernel spins: the kernel's process (its own
    session, not reading its pipe) must not outlive it and keep the GPU busy."""
    import subprocess
    import sys
    import textwrap

    # Kill the parent while the child sleeps inside a check, as a spinning kernel would.
    (workdir / "parent.py").write_text(textwrap.dedent("""
        import os, time
        from pytest_gemm.checks.sandbox import DISPATCH_ENV, SandboxClient
        client = SandboxClient("fake_kernels.py:fake", 0, os.getcwd(),
                               env={**os.environ, DISPATCH_ENV: "fake_dispatch:run_check"})
        client._start()
        assert client._receive(timeout=60)["status"] == "ok"
        client._send({"op": "check", "check": "sleep", "shape": [1, 1, 1], "params": {"seconds": 120},
                      "options": {}})
        time.sleep(1.0)  # the child is now inside the check, not reading its pipe
        print(client.proc.pid, flush=True)
        time.sleep(120)
    """))
    parent = subprocess.Popen([sys.executable, "parent.py"], cwd=workdir, stdout=subprocess.PIPE, text=True)
    child_pid = int(parent.stdout.readline())
    parent.kill()
    parent.wait()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{child_pid}/stat") as f:
                if f.read().rsplit(")", 1)[-1].split()[0] == "Z":
                    return  # killed; only waiting to be reaped
        except FileNotFoundError:
            return
        time.sleep(0.1)
    os.kill(child_pid, 9)
    raise AssertionError(f"sandbox child {child_pid} outlived its pytest process")
