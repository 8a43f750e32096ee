"""Untrusted kernels: a fault, a hang or a cheat costs only its own tests.

Each kernel of ``tests/untrusted/kernels.py`` faults (illegal or misaligned
address, ``trap``), hangs (``while (true)``), ends its process (``os._exit``,
``sys.exit``) or cheats (work left on a side stream, results cached by address,
work done on the first calls only, memoised copies, writes past C, zeroed
inputs). They run together in one pytest subprocess (``--gemm-kernel
tests/untrusted/kernels.py:<name>`` for each, ``-n 4``; the hang in one of its
own with a short ``--gemm-timeout``; tests/gpu_runs.py), each with ``-k``
narrowed to the cases that matter, and the assertions read the ``--gemm-report``
JSON: the right check fails with the right category and telling words, the
checks the kernel passes still pass, and nothing else fails.

The key test runs one pytest session with a correct kernel and four kernels that
fault, hang or exit, with ``--gemm-timeout 10``: it must finish, each failure in
its own test, and every check of the correct kernel, run after the others'
faults, must pass. It prints the run's wall time.

Needs a GPU: skipped with the reason on a machine without one.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
from gpu_runs import SuiteRun, SuiteRuns
from suite_helpers import case_key, load_declarations, test_id

pytestmark = pytest.mark.gemm_gpu

KERNELS_PY = Path(__file__).resolve().parent / "untrusted" / "kernels.py"


KERNELS = load_declarations(KERNELS_PY, "gemm_untrusted_kernels")
UNTRUSTED: dict[str, tuple[Any, str, str]] = KERNELS.UNTRUSTED
CORRECT: dict[str, Any] = KERNELS.CORRECT

HANG_TIMEOUT = 10  # --gemm-timeout for runs with a kernel that hangs
# The combined run's healthy kernel also measures the roofs and times cuBLAS inside one
# check's limit; on a GPU shared with other xdist workers 10 s was not enough for that.
COMBINED_TIMEOUT = 30


@dataclass(frozen=True)
class Plan:
    """Which cases to run for one untrusted kernel and what they must show.

    ``fail``: cases of the kernel's own check (``"64x64x64"``; ``""`` for every
    case of a check with one case, such as speed) that must fail with its
    category. ``words``: groups of alternatives; each group must have a member
    in the message of every case in ``fail`` (case-insensitive). ``passes``:
    other cases (``"exact-64x64x64"``) that must pass. ``gemm_timeout``: the
    ``--gemm-timeout`` of the run (None: the default).
    """

    fail: tuple[str, ...]
    words: tuple[tuple[str, ...], ...] = ()
    passes: tuple[str, ...] = ()
    gemm_timeout: float | None = None
    timeout: int = 600


FAULT_WORDS = ("illegal", "address", "launch failure")
ESCAPED = ("still running after the timed region",)
BENCH = "4096x4096x4096"  # the default --gemm-bench-shape: the speed check's one case

PLANS: dict[str, Plan] = {
    # Two faulting cases: the second runs in a fresh process and faults on its own.
    "illegal_address": Plan(fail=("64x64x64", "17x33x65"), words=(FAULT_WORDS,)),
    # Two hangs: each killed, the second in a fresh process after a short budget (the kernel already hung).
    "endless_loop": Plan(fail=("1x1x1", "64x64x64"),
                         words=(("did not finish within 10 s", "within 3 s (a short budget"), ("killed",)),
                         gemm_timeout=HANG_TIMEOUT),
    "misaligned_float4": Plan(fail=("64x64x64",), words=(("misaligned",),)),
    "device_trap": Plan(fail=("64x64x64",), words=(("launch failure", "trap", "illegal instruction",
                                                     "unspecified", "exception"),)),
    # The process's exit status and what it printed last are in the diagnosis.
    "calls_exit": Plan(fail=("64x64x64", "17x33x65"),
                       words=(("exited with status 3",), ("ending the process with status 3",))),
    "calls_sys_exit": Plan(fail=("64x64x64",), words=(("sys.exit(3)",),)),
    # Correct wherever correctness is checked (the harness synchronises the device).
    "side_stream": Plan(fail=(BENCH,), words=(ESCAPED,), passes=("exact-64x64x64", "exact-17x33x65")),
    "too_fast": Plan(fail=(BENCH,), words=(ESCAPED + ("faster than",),), passes=("exact-64x64x64",)),
    # A fresh process: the first call at a shape computes; the timed calls reuse addresses with new data.
    "cached_result": Plan(fail=(BENCH,), words=(("wrong values", "never written"), ("timed calls",)),
                          passes=("exact-64x64x64",)),
    # Every correctness check passes: together they launch it at most 11 times at one shape (1000^3), in
    # whatever process xdist puts them, and it computes 12 (tests/untrusted/kernels.py FIRST_CALLS).
    "first_call_only": Plan(fail=(BENCH,), words=(("never written",),),
                            passes=("launch-64x64x64", "exact-64x64x64", "coverage-64x64x64", "guards-64x64x64",
                                    "exact-1000x1000x1000", "coverage-1000x1000x1000", "guards-1000x1000x1000",
                                    "deterministic-1000x1000x1000")),
    # Never wrong: only the rate gives it away.
    "memoized": Plan(fail=(BENCH,), words=(("faster than this gpu's fp32-accurate (3xtf32 on tensor cores) roof",),),
                     passes=("exact-64x64x64", "deterministic-1000x1000x1000",
                             "accuracy-256x256x16-distuniform", "accuracy-256x256x16-distheavy")),
    "writes_into_harness": Plan(fail=("17x33x65", "64x64x64", "1000x1000x1000"),
                                words=(("after the end of c",),),
                                # its values are right, but every value check's launch wrote outside C:
                                # those fail too (checks/common.reject_writes_outside_c); the launch check
                                # judges no values
                                passes=("launch-64x64x64",)),
    # its values are right, but A changes at every launch: every value check fails too, as input_modified
    # (checks/common.reject_modified_inputs, since a438c05); the launch check judges neither
    "modifies_inputs": Plan(fail=("17x33x65", "127x255x63"), words=(("a (",), ("modified",)),
                            passes=("launch-64x64x64",)),
}

# Checked at import, so a kernel added to kernels.py without a plan fails even with no GPU.
assert set(PLANS) == set(UNTRUSTED), f"kernels.py UNTRUSTED and PLANS differ: {set(PLANS) ^ set(UNTRUSTED)}"


# -- the runs: every kernel at once, the hang with a short timeout, the key test's run -----------

def _selection(name: str, check: str, plan: Plan) -> str:
    """The ``-k`` expression running exactly the plan's cases (test ids: check-kernel-MxNxK[-params])."""
    ids = [test_id(check, name, rest) for rest in plan.fail]
    for case in plan.passes:
        other, _, rest = case.partition("-")
        ids.append(test_id(other, name, rest))
    return " or ".join(dict.fromkeys(ids))


def _run_of(name: str) -> str:
    return "hang" if PLANS[name].gemm_timeout is not None else "untrusted"


def _message(record: dict[str, Any]) -> str:
    return (record.get("message") or "").lower()


def assert_caught(name: str, check: str, category: str, plan: Plan, entry: dict[str, Any], output: str) -> None:
    records = {case_key(c): c for c in entry["checks"]}
    seen = "\n".join(f"  {key}: {c['outcome']} {c['category'] or ''}" for key, c in records.items())

    for rest in plan.fail:
        key = f"{check}-{rest}" if rest else check
        assert key in records, f"{name}: {key} did not run; ran:\n{seen}\n{output[-4000:]}"
        rec = records[key]
        assert rec["outcome"] == "failed", f"{name}: {key} must fail with {category}, but {rec['outcome']}\n{seen}"
        assert rec["category"] == category, \
            f"{name}: {key} failed as {rec['category']!r}, expected {category!r}:\n{rec['message']}"
        text = _message(rec)
        for group in plan.words:
            assert any(w.lower() in text for w in group), \
                f"{name}: {key}: the message names none of {group}:\n{rec['message']}"

    for case in plan.passes:
        assert case in records, f"{name}: {case} did not run; ran:\n{seen}\n{output[-4000:]}"
        rec = records[case]
        assert rec["outcome"] == "passed", \
            f"{name}: {case} must pass (the kernel misbehaves in one way only), but {rec['outcome']}:\n{rec['message']}"

    for key, rec in records.items():
        if rec["outcome"] == "failed":
            assert rec["category"] == category, \
                f"{name}: {key} failed as {rec['category']!r}; only {category!r} is expected here:\n{rec['message']}"
    # one root cause, this one, and no other category among its failures
    assert entry["verdict"] == "failed" and entry["primary_category"] == category \
        and entry["consequences"] == [], entry


SPEED_PAIR = ("healthy", "head_start")  # an honest speed check, and one that tries a head start
SUITE_RUNS = [
    SuiteRun("untrusted", tuple(f"{KERNELS_PY}:{name}" for name in (*UNTRUSTED, *SPEED_PAIR) if name != "endless_loop"),
             select=" or ".join([*(f"({_selection(name, check, PLANS[name])})" for name, (_, _, check)
                                   in UNTRUSTED.items() if _run_of(name) == "untrusted"),
                                 *(f"speed-{name}" for name in SPEED_PAIR)]),
             options=("-n", "4"), timeout=480),
    SuiteRun("hang", (f"{KERNELS_PY}:endless_loop",), select=_selection("endless_loop", "exact", PLANS["endless_loop"]),
             options=("--gemm-timeout", str(HANG_TIMEOUT)), timeout=480),
]


# -- one kernel at a time ------------------------------------------------------------------

#: Kernels whose timed calls launch nothing after their first ones: with the launch trace the
#: speed check sees that first (``timing_escape``, "launched none", which outranks the stale data,
#: outputs/verdicts.py ROOT_CAUSE_ORDER); without it (no CUPTI) the data says ``stale_output``.
TRACE_SEES_FIRST = ("cached_result", "first_call_only")


def _speed_traced(entry: dict[str, Any]) -> bool:
    speed = [c for c in entry["checks"] if c["check"] == "speed"]
    return bool(speed) and "kernels" in (speed[0].get("launches") or {})


@pytest.mark.parametrize("name", list(UNTRUSTED))
def test_untrusted_kernel_costs_only_its_own_tests(suite_runs: SuiteRuns, name: str):
    kernel, category, check = UNTRUSTED[name]
    run = suite_runs.result(_run_of(name))
    entry = run.entry(name)
    plan = PLANS[name]
    if name in TRACE_SEES_FIRST and _speed_traced(entry):
        category = "timing_escape"
        plan = replace(plan, words=(("fewer launches than calls",), ("launched none",)))
    assert_caught(name, check, category, plan, entry, run.output)
    assert run.returncode == pytest.ExitCode.TESTS_FAILED, run.output[-4000:]
    print(f"{name}: {len(entry['checks'])} checks; its run took {run.wall_s:.1f} s")


def test_honest_kernel_passes_the_speed_check(suite_runs: SuiteRuns):
    """No spurious timing_escape or stale_output for an honest kernel: the rotated,
    refilled inputs and the escape measurement leave a correct kernel alone."""
    entry = suite_runs.result("untrusted").entry("healthy")
    (rec,) = [c for c in entry["checks"] if c["check"] == "speed"]
    assert rec["outcome"] == "passed", rec.get("message")
    (timing,) = entry["timings"]
    assert timing["median_ms"] > 0 and timing["tflops"] > 0, timing
    assert entry["verdict"] == "incomplete" and entry["primary_category"] is None, entry  # timed only: not "passed"


def test_work_started_early_on_another_stream_gets_no_head_start(suite_runs: SuiteRuns):
    """head_start grows the launch guard's wait with late launches, then starts its work on a
    side stream during that wait. The guard takes every SM, so the work cannot run before the
    start event: a timed call's events must hold all of its kernels' GPU time.

    With the launch trace that is read directly: the event median against the median GPU time of
    each timed call's own kernels, both from the same calls. Without it, head_start is held
    against healthy (the same kernel) timed in the same run; that comparison also moves with the
    suite's other runs (a check warming up or presumed hung may run beside a timed one: at e9ef861 on an H100
    healthy read 37.2 ms, mostly time-sliced, beside head_start's 16.7 ms, whose kernels ran
    16.7 ms), so the trace is used where there is one."""
    run = suite_runs.result("untrusted")
    timings = {}
    for name in SPEED_PAIR:
        entry = run.entry(name)
        (rec,) = [c for c in entry["checks"] if c["check"] == "speed"]
        assert rec["outcome"] == "passed", (name, rec.get("message"))
        (timings[name],) = entry["timings"]
    head_start = timings["head_start"]
    if head_start.get("kernel_ms") is not None:
        assert head_start["median_ms"] >= 0.97 * head_start["kernel_ms"], (head_start, run.output[-4000:])
    else:
        medians = {name: t["median_ms"] for name, t in timings.items()}
        assert medians["head_start"] >= 0.97 * medians["healthy"], (medians, run.output[-4000:])


# -- the key test: one run, a correct kernel among faults, a hang and an exit -----------------

HEALTHY_RUN_FAILS: dict[str, tuple[str, tuple[str, ...]]] = {
    "illegal_address": ("fault", ("64x64x64", "17x33x65")),
    "endless_loop": ("timeout", ("64x64x64",)),
    "misaligned_float4": ("fault", ("64x64x64",)),
    "calls_exit": ("fault", ("64x64x64", "17x33x65")),
}


_BROKEN_CASES = " or ".join(f"exact-{name}-{shape}" for name, (_, shapes) in HEALTHY_RUN_FAILS.items()
                           for shape in shapes)
# healthy last: in each test function its cases run after the others'. 2048: healthy's speed check
# (inputs for it and for cuBLAS, two timed runs) stays well inside its limit
SUITE_RUNS.append(SuiteRun(
    "combined", tuple(f"{KERNELS_PY}:{name}" for name in (*HEALTHY_RUN_FAILS, "healthy")),
    select=f"healthy or {_BROKEN_CASES}",
    options=("-v", "--gemm-timeout", str(COMBINED_TIMEOUT), "--gemm-bench-shape", "2048"), timeout=480))


def test_faults_a_hang_and_an_exit_cost_only_their_own_tests(suite_runs: SuiteRuns, record_property: Any):
    run = suite_runs.result("combined")
    entries, output = run.kernels, run.output
    print(f"\none run, healthy + {', '.join(HEALTHY_RUN_FAILS)} with --gemm-timeout {COMBINED_TIMEOUT}: "
          f"{run.wall_s:.1f} s wall")
    record_property("gemm_untrusted_run_wall_s", round(run.wall_s, 1))

    # each failure in its own test, with its category
    for name, (category, shapes) in HEALTHY_RUN_FAILS.items():
        records = {case_key(c): c for c in entries[name]["checks"]}
        assert set(records) == {f"exact-{s}" for s in shapes}, (name, sorted(records))
        for key, rec in records.items():
            assert rec["outcome"] == "failed" and rec["category"] == category, (name, key, rec)

    # every check of the correct kernel passed, whatever ran before it
    healthy = entries["healthy"]
    failed = [f"{case_key(c)}: [{c['category']}] {c.get('message')}" for c in healthy["checks"]
              if c["outcome"] == "failed"]
    assert not failed, "the correct kernel is hurt by the others:\n" + "\n".join(failed)
    passed = {c["check"] for c in healthy["checks"] if c["outcome"] == "passed"}
    for check in ("compile", "launch", "exact", "coverage", "guards", "deterministic", "accuracy", "speed"):
        assert check in passed, f"no {check} check of healthy ran: {sorted(passed)}\n{output[-4000:]}"
    assert healthy["verdict"] == "passed"

    # ... including its exact checks that ran after every fault, hang and exit
    order = re.findall(r"::test_check\[exact-(\w+)-[\dx]+\] (PASSED|FAILED)", output)
    assert order, output[-4000:]
    last_bad = max(i for i, (name, _) in enumerate(order) if name != "healthy")
    after = [outcome for name, outcome in order[last_bad + 1:] if name == "healthy"]
    assert after and set(after) == {"PASSED"}, order

    expected_failures = sum(len(shapes) for _, shapes in HEALTHY_RUN_FAILS.values())
    assert re.search(rf"\b{expected_failures} failed\b", output), output[-4000:]
    assert run.returncode == pytest.ExitCode.TESTS_FAILED, output[-4000:]


# -- a fault costs what a hang costs ----------------------------------------------------

SUITE_RUNS.append(SuiteRun("faults", (f"{KERNELS_PY}:illegal_address", f"{KERNELS_PY}:faults_at_m1"),
                           select="not sweep", timeout=480))


def test_a_kernel_faulting_everywhere_costs_seconds_and_one_faulting_at_m1_earns_every_other_check(
        suite_runs: SuiteRuns, record_property: Any):
    """The whole suite (default options) on ``illegal_address`` (faults at every shape) and
    ``faults_at_m1`` (faults only with M == 1): the first runs 3 checks, each in a fresh
    process, and fails the rest without running them, saying why; the second runs every check,
    faults at each M == 1 shape and passes every other check (it is never cut off)."""
    run = suite_runs.result("faults")
    entries = run.kernels
    print(f"\nillegal_address + faults_at_m1, full suite: {run.wall_s:.1f} s wall")
    record_property("gemm_fault_run_wall_s", round(run.wall_s, 1))
    everywhere = [c for c in entries["illegal_address"]["checks"] if c["check"] != "compile"]
    ran = [c for c in everywhere if "not run" not in _message(c)]
    assert len(ran) == 3 and all(c["category"] == "fault" for c in everywhere), [c.get("message") for c in ran]
    not_run = [c for c in everywhere if c not in ran]
    assert len(not_run) > 40 and all("not run: the kernel faulted in 3 checks, first at launch at 64x64x64"
                                     in (c.get("message") or "") for c in not_run)
    partial = [c for c in entries["faults_at_m1"]["checks"] if c["check"] != "compile"]
    m1 = [c for c in partial if c["shape"][0] == 1]
    assert len(m1) >= 6 and all(c["category"] == "fault" and "not run" not in _message(c) for c in m1), m1
    wrong = [f"{case_key(c)}: {c.get('message')}" for c in partial if c["shape"][0] != 1 and c["outcome"] != "passed"]
    assert not wrong, "faults_at_m1 lost checks it passes:\n" + "\n".join(wrong)
