"""Many kernels per run, hangs that cost seconds, no resource failure blamed on a kernel:
the whole plugin run through pytester on a fake GPU (``tests/fakegpu.py``: a device for
``gemm_check`` and fake checks in the sandbox children), so every test here runs with no GPU.
"""
from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import pytest

import fakegpu
from pytest_gemm.model import categories as cat


@pytest.fixture
def fake(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    (pytester.path / "fake_kernels.py").write_text(fakegpu.FAKE_KERNELS)
    for key, value in fakegpu.env(pytester.path).items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("PYTEST_GEMM_MAX_PROCESSES", raising=False)
    return pytester


def _run(p: pytest.Pytester, *args: str) -> tuple[Any, dict[str, Any], float]:
    """(pytester's result, the JSON report's kernels by name, wall seconds)."""
    started = time.monotonic()
    result = p.runpytest_subprocess("-p", "fakegpu", "-p", "no:cacheprovider", "--gemm-report", "r.json", *args)
    took = time.monotonic() - started
    report = json.loads((p.path / "r.json").read_text())
    return result, {k["name"]: k for k in report["kernels"]}, took


def _collected(p: pytest.Pytester, *args: str) -> list[str]:
    """The ids of the check tests the same options collect: what a kernel gets a record for, derived
    from the registry through collection rather than counted here (a new check changes it)."""
    result = p.runpytest_subprocess("-p", "fakegpu", "--collect-only", "-q", *args)
    return [line.split("[", 1)[1].rstrip("]") for line in result.outlines if "::test_check[" in line]


def _log(p: pytest.Pytester) -> list[dict[str, Any]]:
    rows = []
    for line in (p.path / "fake.log").read_text().splitlines():
        name, check, pid, releases, siblings, start, end = line.split()
        rows.append({"kernel": name, "check": check, "pid": int(pid), "releases": int(releases),
                     "siblings": int(siblings), "start": float(start), "end": float(end)})
    return rows


# ---- hangs cost seconds -------------------------------------------------------------------

def test_a_kernel_that_always_hangs_is_graded_in_under_60_s_with_default_options(fake):
    result, kernels, took = _run(fake, "--gemm-kernel", "fake_kernels.py:hang")
    assert took < 60, f"a hanging kernel took {took:.0f} s"
    checks = kernels["hang"]["checks"]
    collected = len(_collected(fake, "--gemm-kernel", "fake_kernels.py:hang"))
    assert len(checks) == collected and all(c["category"] == cat.TIMEOUT for c in checks)  # a result for every check
    first, second, third, fourth = checks[:4]
    assert "launch at 64x64x64 did not finish within 20 s (the default" in first["message"]
    assert "did not finish within 3 s (a short budget, since this kernel already timed out (launch at 64x64x64)" \
        in second["message"]
    assert third["wall_s"] < 10
    assert "not run: this kernel timed out in its first 3 checks (launch at 64x64x64, exact at 1x1x1, " \
           "exact at 2x2x2) without completing any" in fourth["message"]
    assert all(c["wall_s"] < 1 for c in checks[3:])
    result.assert_outcomes(failed=collected, skipped=2)


def test_after_a_timeout_a_kernel_that_completes_checks_runs_each_one_with_a_short_budget(fake):
    result, kernels, took = _run(fake, "--gemm-kernel", "fake_kernels.py:hang_big", "--gemm-shapes", "quick",
                                 "--gemm-timeout", "4", "-k", "exact or coverage")
    by = {(c["check"], tuple(c["shape"]), json.dumps(c["params"])): c for c in kernels["hang_big"]["checks"]}
    small = [c for key, c in by.items() if key[1][0] * key[1][1] * key[1][2] <= 64 ** 3]
    big = [c for key, c in by.items() if key[1][0] * key[1][1] * key[1][2] > 64 ** 3]
    assert small and all(c["outcome"] == "passed" for c in small)  # never cut off: it completes checks
    assert big and all(c["category"] == cat.TIMEOUT for c in big)
    first = by[("exact", (127, 255, 63), "{}")]
    assert "within 4 s (--gemm-timeout)" in first["message"]
    later = [c for c in big if c is not first]
    assert all("a short budget" in c["message"] and "not run" not in c["message"] for c in later)
    # 3 s budgets, not 4 s: read from what each says it allowed (its wall time also holds the fresh
    # process the timeout left it, which a loaded machine stretched past 4 s)
    budgets = [float(re.search(r"did not finish within ([\d.]+) s", c["message"]).group(1)) for c in later]
    assert all(b < 3.5 for b in budgets), budgets
    assert all(c["wall_s"] < 8 for c in later), [c["wall_s"] for c in later]
    assert took < 4 + 4 * len(later) + 20


def test_start_up_is_not_counted_in_a_checks_timeout(fake, monkeypatch):
    monkeypatch.setenv("FAKEGPU_PREPARE_S", "2.5")  # compiling, say, takes longer than the check's timeout
    result, kernels, _ = _run(fake, "--gemm-kernel", "fake_kernels.py:ok", "--gemm-timeout", "1",
                              "--gemm-shapes", "quick", "-k", "exact")
    assert [c["outcome"] for c in kernels["ok"]["checks"]] == ["passed"] * 5
    assert kernels["ok"]["checks"][0]["wall_s"] > 2.5  # the test's wall time includes it; the check's does not


# ---- faults cost what hangs cost ---------------------------------------------------------

def _pids(rows: list[dict[str, Any]], kernel: str) -> set[int]:
    """The kernel's processes (each logs its prepare)."""
    return {r["pid"] for r in rows if r["kernel"] == kernel}


@pytest.mark.parametrize("name", ["fault", "exits"])
def test_a_kernel_that_faults_in_every_check_runs_three_then_the_rest_are_not_run(fake, monkeypatch, name):
    monkeypatch.setenv("FAKEGPU_LOG", str(fake.path / "fake.log"))
    result, kernels, took = _run(fake, "--gemm-kernel", f"fake_kernels.py:{name}")
    checks = kernels[name]["checks"]
    collected = len(_collected(fake, "--gemm-kernel", f"fake_kernels.py:{name}"))
    assert len(checks) == collected and all(c["category"] == cat.FAULT for c in checks)  # a record for every check
    ran = [c for c in checks if "not run" not in c["message"]]
    assert len(ran) == 3 and ran == checks[:3]                   # three fresh processes, a probe, then no more
    assert len(_pids(_log(fake), name)) == 4
    assert ("not run: the kernel faulted in 3 checks, first at launch at 64x64x64, and in a probe at a large "
            "shape (exact at 1024x1024x1024), without completing any" in checks[3]["message"])
    assert all(c["wall_s"] < 1 for c in checks[3:])
    result.assert_outcomes(failed=collected, skipped=2)


MEASURE_SPY = """
import os

import pytest_gemm.checks.sandbox as sandbox  # bound first: the children stay the fake GPU's, unconfined
from pytest_gemm.checks import sandbox_confine
from pytest_gemm.measure import trusted_measures


def pytest_configure(config):
    # The judging process believes its kernels confined, so it measures for their speed checks.
    sandbox_confine.confines = lambda spec: True
    sandbox.confined_command = lambda cmd, spec, rootdir, env: (cmd, {}, env)

    def spy(precision, shape, options):
        with open(os.environ["MEASURE_SPY_LOG"], "a") as log:
            log.write("x".join(map(str, shape)) + "\\n")
        return True

    trusted_measures.measure_for_confined = spy
"""


def test_a_confined_kernel_that_is_cut_off_asks_for_no_measurement_of_the_roofs(fake, monkeypatch):
    """The roofs a confined speed check reads are measured, holding the GPU alone, only for a check
    that runs: measured before the cut-off, a class's faulting students each queued for the GPU
    alone at its start, behind the hanging students' marks."""
    (fake.path / "measure_spy.py").write_text(MEASURE_SPY)
    log = fake.path / "measures.log"
    monkeypatch.setenv("MEASURE_SPY_LOG", str(log))
    args = ("-p", "measure_spy", "-k", "launch or exact or speed", "--gemm-shapes", "quick")
    _, kernels, _ = _run(fake, "--gemm-kernel", "fake_kernels.py:fault", *args)
    speed = [c for c in kernels["fault"]["checks"] if c["check"] == "speed"]
    assert speed and all("not run" in c["message"] for c in speed)
    assert not log.exists()  # cut off: nothing measured for it
    _, kernels, _ = _run(fake, "--gemm-kernel", "fake_kernels.py:ok", *args)
    speed = [c for c in kernels["ok"]["checks"] if c["check"] == "speed"]
    assert speed and all(c["outcome"] == "passed" for c in speed)
    assert log.read_text().split() == ["x".join(map(str, c["shape"])) for c in speed]  # the spy is live


RESEED_SPY = """
import os

import pytest_gemm.checks.sandbox as sandbox


def pytest_configure(config):
    def spy(spec):
        with open(os.environ["RESEED_SPY_LOG"], "a") as log:
            log.write(os.path.basename(spec) + "\\n")
        return 0

    sandbox.reseed_confined = spy
"""


def test_the_judging_process_reseeds_a_kernels_cache_before_each_check_it_runs(fake, monkeypatch):
    """What the class's priming runs compiled since a kernel's process started reaches it before
    each check (``sandbox_confine.reseed_confined``: a no-op unless confined), not only at its start."""
    (fake.path / "reseed_spy.py").write_text(RESEED_SPY)
    log = fake.path / "reseeds.log"
    monkeypatch.setenv("RESEED_SPY_LOG", str(log))
    _, kernels, _ = _run(fake, "--gemm-kernel", "fake_kernels.py:ok", "-p", "reseed_spy", "-k", "launch or exact",
                         "--gemm-shapes", "quick")
    ran = [c for c in kernels["ok"]["checks"] if c["outcome"] == "passed"]
    assert len(ran) >= 3 and log.read_text().split() == ["fake_kernels.py:ok"] * len(ran)


def test_a_kernel_that_faults_only_at_some_shapes_earns_every_check_it_passes(fake, monkeypatch):
    monkeypatch.setenv("FAKEGPU_LOG", str(fake.path / "fake.log"))
    result, kernels, _ = _run(fake, "--gemm-kernel", "fake_kernels.py:fault_m1")
    checks = kernels["fault_m1"]["checks"]
    m1 = [c for c in checks if c["shape"][0] == 1]
    others = [c for c in checks if c["shape"][0] != 1]
    assert len(m1) >= 5 and all(c["category"] == cat.FAULT and "not run" not in c["message"] for c in m1)
    assert others and all(c["outcome"] == "passed" for c in others), [c["message"] for c in others
                                                                       if c["outcome"] != "passed"]
    # each fault ran in a process of its own: every M=1 check really ran
    assert len(_pids(_log(fake), "fault_m1")) == len(m1) + 1


def test_a_kernel_that_faults_at_every_small_shape_is_probed_at_a_large_one_and_never_cut_off(fake, monkeypatch):
    monkeypatch.setenv("FAKEGPU_LOG", str(fake.path / "fake.log"))
    result, kernels, _ = _run(fake, "--gemm-kernel", "fake_kernels.py:fault_small", "-k", "exact or launch")
    checks = kernels["fault_small"]["checks"]
    small = [c for c in checks if min(c["shape"]) < 128]
    large = [c for c in checks if min(c["shape"]) >= 128]
    assert small[:3] == checks[:3]  # launch at 64x64x64, exact at 1x1x1 and 2x2x2: all fault
    assert all(c["category"] == cat.FAULT and "not run" not in c["message"] for c in small)
    assert large and all(c["outcome"] == "passed" for c in large)


def test_probe_case_takes_the_largest_smallest_dimension_up_to_1024_then_the_least_work():
    from pytest_gemm.checks.hangs import probe_case

    cases = [("exact", (1, 1, 1), {}), ("exact", (4096, 4096, 4096), {}), ("exact", (1024, 1024, 1024), {}),
             ("exact", (1, 4096, 4096), {}), ("coverage", (1000, 1000, 1000), {}), ("accuracy", (129, 131, 4096),
                                                                                    {"dist": "heavy"})]
    assert probe_case(cases, ["exact at 1x1x1"]) == ("exact", (1024, 1024, 1024), {})
    assert probe_case(cases, ["exact at 1024x1024x1024"]) == ("exact", (4096, 4096, 4096), {})
    assert probe_case([], []) is None


def test_a_kernel_that_faults_first_then_completes_a_check_is_never_cut_off(fake, monkeypatch):
    from pytest_gemm.checks.hangs import HangLedger

    ledger = HangLedger()
    ledger.faulted("exact at 1x1x1")
    ledger.faulted("exact at 1x1x4096")
    ledger.done(0.01, 2.0)
    for _ in range(10):
        ledger.faulted("exact at 1x128x1")
    assert ledger.cut_off() is None
    mixed = HangLedger()
    mixed.timed_out("launch at 64x64x64")
    mixed.faulted("exact at 1x1x1")
    assert mixed.cut_off() is None
    mixed.faulted("exact at 2x2x2")
    category, why = mixed.cut_off()
    assert category == cat.FAULT
    assert why.startswith("not run: the kernel faulted in 2 checks, first at exact at 1x1x1 (and timed out in 1, "
                          "first at launch at 64x64x64)")
    launch = HangLedger()
    for label in ("launch at 64x64x64", "exact at 1x1x1", "exact at 2x2x2"):
        launch.faulted(label, cat.LAUNCH_ERROR)
    category, why = launch.cut_off()
    assert category == cat.LAUNCH_ERROR and why.startswith("not run: the kernel's launch failed in 3 checks, first at "
                                                           "launch at 64x64x64, without completing any")


# ---- out of memory ------------------------------------------------------------------------

def test_a_harness_out_of_memory_is_retried_once_then_the_harnesss_problem_not_the_kernels(fake):
    result, kernels, _ = _run(fake, "--gemm-kernel", "fake_kernels.py:harness_oom", "--gemm-kernel",
                              "fake_kernels.py:harness_oom_once", "--gemm-kernel", "fake_kernels.py:launcher_oom",
                              "--gemm-shapes", "quick", "-k", "exact")
    persistent = kernels["harness_oom"]["checks"]
    assert persistent and {c["category"] for c in persistent} == {cat.HARNESS_OUT_OF_MEMORY}
    message = persistent[0]["message"]
    assert "the test harness ran out of GPU memory (Out of memory allocating 1,073,741,824 bytes" in message
    assert "after freeing its memory pools and retrying once" in message and "not a verdict on the kernel" in message
    once = kernels["harness_oom_once"]["checks"]
    assert [c["outcome"] for c in once] == ["passed"] * len(once)  # freed, retried, passed
    launcher = kernels["launcher_oom"]["checks"]
    assert {c["category"] for c in launcher} == {cat.FAULT}  # the launcher's own allocation: the kernel's
    assert "the launcher's workspace" in launcher[0]["message"]


# ---- bounded processes, memory released between checks --------------------------------

def test_a_worker_keeps_at_most_the_bound_of_kernel_processes_alive(fake, monkeypatch):
    monkeypatch.setenv("FAKEGPU_LOG", str(fake.path / "fake.log"))
    monkeypatch.setenv("PYTEST_GEMM_MAX_PROCESSES", "2")
    result, kernels, _ = _run(fake, "--gemm-kernel", "fake_kernels.py:oks", "--gemm-shapes", "quick",
                              "-k", "launch or exact")
    result.assert_outcomes(passed=6 * 6)
    rows = _log(fake)
    assert max(r["siblings"] for r in rows) <= 2
    # more kernels than the bound: each kernel's checks run together, so each starts one process
    assert len({r["pid"] for r in rows}) == 6
    order = [r["kernel"] for r in rows]
    assert order == sorted(order, key=lambda name: int(name[2:])), order


def test_tests_are_grouped_by_kernel_only_when_kernels_outnumber_the_process_bound(fake, monkeypatch):
    args = ("--gemm-kernel", "fake_kernels.py:ok", "--gemm-kernel", "fake_kernels.py:slow", "--gemm-shapes", "quick")
    few = _collected(fake, *args)
    assert few[:2] == ["launch-ok-64x64x64", "launch-slow-64x64x64"]  # the registry's order, check by check
    monkeypatch.setenv("PYTEST_GEMM_MAX_PROCESSES", "1")
    many = _collected(fake, *args)
    assert sorted(many) == sorted(few)
    split = [i for i, test_id in enumerate(many) if "-slow-" in test_id]
    assert split == list(range(split[0], len(many))) and many[0] == "launch-ok-64x64x64"


def test_with_the_default_bound_few_kernels_keep_their_processes(fake, monkeypatch):
    monkeypatch.setenv("FAKEGPU_LOG", str(fake.path / "fake.log"))
    _run(fake, "--gemm-kernel", "fake_kernels.py:ok", "--gemm-kernel", "fake_kernels.py:slow",
         "--gemm-kernel", "fake_kernels.py:wrong", "--gemm-shapes", "quick")
    rows = _log(fake)
    assert len({r["pid"] for r in rows}) == 3
    assert max(r["siblings"] for r in rows) == 3


def test_each_child_releases_its_memory_pools_after_every_check(fake, monkeypatch):
    monkeypatch.setenv("FAKEGPU_LOG", str(fake.path / "fake.log"))
    _run(fake, "--gemm-kernel", "fake_kernels.py:ok", "--gemm-kernel", "fake_kernels.py:wrong",
         "--gemm-shapes", "quick")
    for kernel in ("ok", "wrong"):
        releases = [r["releases"] for r in _log(fake) if r["kernel"] == kernel and r["check"] != "prepare"]
        assert releases == list(range(len(releases))), releases  # one release after each check, failed or not


# ---- the GPU lock ---------------------------------------------------------------------------

def test_timed_checks_have_the_gpu_to_themselves_across_xdist_workers(fake, monkeypatch):
    """... apart from correctness checks and from processes preparing a kernel (a CUDA context,
    a module load), which share the GPU with each other. crashy's process ends after each of
    its correctness checks (a CUDA error), so a fresh one prepares all along (never cut off here:
    FAKEGPU_STREAK)."""
    pytest.importorskip("xdist")
    monkeypatch.setenv("FAKEGPU_LOG", str(fake.path / "fake.log"))
    monkeypatch.setenv("FAKEGPU_STREAK", "1000")
    monkeypatch.setenv("FAKEGPU_PREPARE_S", "0.2")
    result, _, _ = _run(fake, "-n", "2", "--gemm-kernel", "fake_kernels.py:slow", "--gemm-kernel",
                        "fake_kernels.py:crashy", "--gemm-shapes", "quick", "-k", "speed or exact or guards")
    result.assert_outcomes(passed=1 + 5 + 2 + 1, failed=5 + 2)
    rows = _log(fake)
    timed = [r for r in rows if r["check"] == "speed"]
    others = [r for r in rows if r["check"] != "speed"]
    assert len(timed) == 2 and sum(r["check"] == "prepare" for r in rows) >= 7
    overlaps_seen = any(a["start"] < b["end"] and b["start"] < a["end"] and a["pid"] != b["pid"]
                        for a in others for b in others)
    assert overlaps_seen, "checks and prepares of two workers never ran at once: the shared lock serialised them"
    for t in timed:
        for o in rows:
            if o is not t:
                assert not (t["start"] < o["end"] and o["start"] < t["end"]), (t, o)


# ---- quick shapes, wall time ---------------------------------------------------------------

def test_quick_shapes_run_a_small_set_per_check_and_the_report_has_each_checks_wall_time(fake):
    result, kernels, _ = _run(fake, "--gemm-kernel", "fake_kernels.py:slow", "--gemm-shapes", "quick")
    checks = kernels["slow"]["checks"]
    from pytest_gemm.checks import registry

    expected = {"launch": 1, "exact": len(registry.QUICK_EXACT), "coverage": len(registry.QUICK_EDGE),
                "guards": len(registry.QUICK_EDGE), "deterministic": 1, "accuracy": 2 * len(registry.QUICK_ACCURACY), "speed": 1}
    assert {c: sum(1 for r in checks if r["check"] == c) for c in expected} == expected
    assert all(c["wall_s"] >= 0.3 for c in checks)  # each fake check sleeps 0.3 s


def test_gemm_shapes_from_the_ini_and_its_errors(fake):
    fake.makeini("[pytest]\ngemm_shapes = quick\n")
    result = fake.runpytest_subprocess("-p", "fakegpu", "--gemm-kernel", "fake_kernels.py:ok", "--collect-only", "-q")
    assert sum(1 for line in result.outlines if "::test_check[exact-" in line) == 5
    full = fake.runpytest_subprocess("-p", "fakegpu", "--gemm-kernel", "fake_kernels.py:ok", "--gemm-shapes", "full",
                                     "--collect-only", "-q")
    assert sum(1 for line in full.outlines if "::test_check[exact-" in line) == 34
    fake.makeini("[pytest]\ngemm_shapes = fast\n")
    bad = fake.runpytest_subprocess("-p", "fakegpu", "--gemm-kernel", "fake_kernels.py:ok")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    bad.stderr.fnmatch_lines(["*gemm_shapes = 'fast' (in *): expected quick or full*"])
    cli = fake.runpytest_subprocess("-p", "fakegpu", "--gemm-kernel", "fake_kernels.py:ok", "--gemm-shapes", "some")
    cli.stderr.fnmatch_lines(["*--gemm-shapes: invalid choice: 'some' (choose from*quick*full*"])
