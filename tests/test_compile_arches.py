"""gemm_compile_arches = device: a grader on a GPU compile-checks only that GPU's architecture
(no GPU needed for these tests: the probe is replaced by a fake H200's)."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import fakegpu
from pytest_gemm.checks import compile as compile_check

ALICE = Path(__file__).resolve().parent.parent / "examples" / "course" / "submissions" / "alice"

PROBE_PLUGIN = '''
import fakegpu
import pytest_gemm.kernels.device as device


def pytest_configure(config):
    device.probe = lambda: fakegpu.device()  # an H200, sm_90
'''


def test_only_this_gpus_arch_is_checked_under_device(monkeypatch):
    monkeypatch.setattr("pytest_gemm.kernels.device.probe", fakegpu.device)
    assert compile_check.other_than_this_gpu("device", None, "sm_90") is None
    assert compile_check.other_than_this_gpu("device", None, "sm_90a") is None
    reason = compile_check.other_than_this_gpu("device", None, "sm_80")
    assert reason.startswith("gemm_compile_arches = device: compile-checked for this GPU's sm_90 only")
    assert compile_check.other_than_this_gpu("claimed", None, "sm_80") is None
    assert compile_check.other_than_this_gpu("device", ["sm_80"], "sm_80") is None  # --gemm-arch asks for it


def test_without_a_gpu_every_claimed_arch_is_checked(monkeypatch):
    monkeypatch.setattr("pytest_gemm.kernels.device.probe", lambda: "no usable GPU: none here")
    assert compile_check.other_than_this_gpu("device", None, "sm_80") is None


def _run(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, ini: str):
    for key, value in fakegpu.env(pytester.path).items():
        monkeypatch.setenv(key, value)
    shutil.copytree(ALICE, pytester.path / "alice")
    (pytester.path / "probe_h200.py").write_text(PROBE_PLUGIN)
    pytester.makeini(f"[pytest]\n{ini}\n")
    return pytester.runpytest_subprocess("-p", "fakegpu", "-p", "probe_h200", "-p", "no:cacheprovider",
                                         "--gemm-kernel", "alice/kernel.py:kernel", "--gemm-report", "r.json",
                                         "-k", "compile")


def test_a_grader_on_a_gpu_compiles_only_for_it(pytester, monkeypatch):
    pytest.importorskip("cuda.bindings")
    result = _run(pytester, monkeypatch, "gemm_compile_arches = device")
    (kernel,) = json.loads((pytester.path / "r.json").read_text())["kernels"]
    ran = [c["params"]["arch"] for c in kernel["checks"] if c["outcome"] == "passed"]
    skipped = [c for c in kernel["checks"] if c["outcome"] == "skipped"]
    assert ran == ["sm_90"], result.stdout.str()[-2000:]
    assert skipped and all("compile-checked for this GPU's sm_90 only" in c["message"] for c in skipped)


def test_a_mistyped_value_is_a_usage_error_listing_the_valid_ones(pytester, monkeypatch):
    result = _run(pytester, monkeypatch, "gemm_compile_arches = gpu")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*gemm_compile_arches = 'gpu'*expected claimed*or device*"])


# ---- gemm_speed_budget: a course's trade of repeats for minutes --------------------------------------

class _Ini:
    def __init__(self, value: str):
        self.value, self.inipath = value, "pytest.ini"

    def getini(self, key: str) -> str:
        assert key == "gemm_speed_budget"
        return self.value


def test_the_speed_budget_comes_from_the_ini_and_reaches_the_speed_check(monkeypatch):
    from pytest_gemm.checks import speed
    from pytest_gemm.runner.configure import _speed_budget

    assert _speed_budget(_Ini("")) == speed.DEFAULT_BUDGET_S == 1.0
    assert _speed_budget(_Ini(" 0.25 ")) == 0.25
    for bad in ("fast", "0", "-1", "100"):
        with pytest.raises(pytest.UsageError, match=r"gemm_speed_budget = .* \(in pytest.ini\): expected seconds"):
            _speed_budget(_Ini(bad))
    seen = {}
    monkeypatch.setattr(speed, "check_speed",
                        lambda h, shape, record, fraction, budget_s, stop_within: seen.update(budget=budget_s))
    speed.run(None, (64, 64, 64), {}, lambda facts: None, {"min_cublas_fraction": None, "speed_budget_s": 0.25})
    assert seen == {"budget": 0.25}
    speed.run(None, (64, 64, 64), {}, lambda facts: None, {"min_cublas_fraction": None})
    assert seen == {"budget": 1.0}


def test_a_mistyped_speed_budget_is_a_usage_error(pytester, monkeypatch):
    result = _run(pytester, monkeypatch, "gemm_speed_budget = quick")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*gemm_speed_budget = 'quick'*expected seconds of timed GPU work*"])


def test_a_mistyped_speed_stop_is_a_usage_error(pytester, monkeypatch):
    result = _run(pytester, monkeypatch, "gemm_speed_stop = quick")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*gemm_speed_stop = 'quick'*expected the precision*or off*"])
