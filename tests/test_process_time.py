"""Where a kernel's seconds went: the summary of its check records (no GPU), and the phases a
kernel's process reports through the sandbox (fake checks, no GPU)."""
from __future__ import annotations

import json

import pytest

import fakegpu
from pytest_gemm.outputs.process_time import START_PHASES, time_summary


def test_the_summary_adds_each_kernels_checks_waits_and_start_ups():
    start = {"process_s": 1.5, "kernel_import_s": 0.1, "lock_wait_s": 2.0, "imports_s": 0.6, "cuda_context_s": 0.4,
             "compile_s": 0.05, "module_load_s": 0.01, "harness_kernels_s": 0.2, "prepare_s": 1.3}
    records = [
        {"kernel": "k", "check": "launch", "wall_s": 5.0, "check_s": 0.1, "process_start": start},
        {"kernel": "k", "check": "exact", "wall_s": 0.5, "check_s": 0.2, "lock_wait_s": 0.25},
        {"kernel": "k", "check": "speed", "wall_s": 3.0, "check_s": 2.0, "lock_wait_s": 0.5,
         "gpu_quiet": {"quiet": True, "waited_s": 0.3}},
        {"kernel": "k", "check": "exact", "wall_s": 4.0, "process_start": dict(start, lock_wait_s=0.0)},
        {"kernel": "other", "check": "exact", "wall_s": 100.0, "check_s": 100.0},
        {"kernel": "k", "check": "compile", "wall_s": 0.04},  # in pytest's own process: no process facts
    ]
    got = time_summary(records, "k")
    assert got["checks"] == 5 and got["wall_s"] == pytest.approx(12.54)
    assert got["check_s"] == pytest.approx(2.3) and got["lock_wait_s"] == pytest.approx(0.75)
    assert got["quiet_wait_s"] == pytest.approx(0.3)
    assert got["process_starts"] == 2
    assert got["start_s"] == pytest.approx((1.5 + 0.1 + 2.0 + 1.3) + (1.5 + 0.1 + 0.0 + 1.3))
    assert set(got["start"]) == set(START_PHASES) and got["start"]["cuda_context_s"] == pytest.approx(0.8)
    assert time_summary(records)["checks"] == 6


def test_a_run_records_each_start_ups_phases_and_the_summary_reaches_report_and_gradescope(pytester, monkeypatch):
    (pytester.path / "fake_kernels.py").write_text(fakegpu.FAKE_KERNELS)
    for key, value in fakegpu.env(pytester.path).items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("FAKEGPU_PREPARE_S", "0.3")
    # unconfined: Gradescope's default (auto) confines where bubblewrap or Landlock works, and a
    # confined child sees none of the fake's settings (kernels/sandbox_env.py), so its prepare was
    # instant and the 0.3 s below held only where the process start and import took as long
    result = pytester.runpytest_subprocess("-p", "fakegpu", "-p", "no:cacheprovider", "--gemm-report", "r.json",
                                           "--gemm-confine", "none",
                                           "--gemm-gradescope", "g.json", "--gemm-kernel", "fake_kernels.py:fault",
                                           "--gemm-kernel", "fake_kernels.py:ok", "--gemm-shapes", "quick",
                                           "-k", "exact or speed")
    report = {k["name"]: k for k in json.loads((pytester.path / "r.json").read_text())["kernels"]}
    ok, fault = report["ok"]["time"], report["fault"]["time"]
    assert ok["process_starts"] == 1 and fault["process_starts"] == 3  # 3 faults, then the rest not run
    assert ok["start"]["process_s"] > 0 and ok["start"]["kernel_import_s"] >= 0
    assert ok["start_s"] >= 0.3  # the fake prepare's 0.3 s are in it
    assert ok["check_s"] > 0 and ok["checks"] == 6
    grades = json.loads((pytester.path / "g.json").read_text())["extra_data"]["pytest_gemm"]
    assert grades["time"]["process_starts"] == 3  # the submission is the first kernel: fault
    assert result.ret == 1
