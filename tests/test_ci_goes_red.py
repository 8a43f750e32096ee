"""CI cannot go green untested: a run under CI whose NVRTC cannot load ends at once (exit status
1) rather than skipping every compile test, and the GPU run's summary fails when nothing passed."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from suite_helpers import ci_toolchain_problem, load_declarations

ROOT = Path(__file__).resolve().parent.parent


def test_ci_with_no_nvrtc_is_a_problem_and_elsewhere_a_skip():
    broken = lambda: "NVRTC cannot be loaded (libnvrtc.so.12: cannot open shared object file)"  # noqa: E731
    assert "libnvrtc.so.12" in ci_toolchain_problem({"CI": "true"}, broken)
    assert ci_toolchain_problem({"CI": "true"}, lambda: None) is None
    assert ci_toolchain_problem({}, broken) is None and ci_toolchain_problem({"CI": "false"}, broken) is None


#: What cuda-pathfinder says when the NVRTC wheel's library is gone: its message ends in a newline.
NOT_FOUND = ('Failure finding "libnvrtc.so.13 or libnvrtc.so.12": No such file: libnvrtc.so.13 or '
             'libnvrtc.so.12\n')


def test_nvrtc_that_cannot_load_is_one_line_in_ci_and_for_the_user(monkeypatch):
    nvrtc = pytest.importorskip("cuda.bindings.nvrtc")
    from pytest_gemm.kernels import compiler
    from suite_helpers import nvrtc_missing

    def broken():
        raise RuntimeError(NOT_FOUND)

    monkeypatch.setattr(nvrtc, "nvrtcVersion", broken)
    monkeypatch.setattr(compiler, "_NVRTC_LOADS", [])
    ci = ci_toolchain_problem({"CI": "true"})
    assert "libnvrtc.so.12" in ci and "\n" not in ci, ci
    with pytest.raises(compiler.GemmToolchainError) as failed:
        compiler._nvrtc()
    assert "libnvrtc.so.12; install" in str(failed.value) and "\n" not in str(failed.value), str(failed.value)
    assert "\n" not in (nvrtc_missing() or "\n")


def test_the_nvrtc_step_fails_under_ci_when_nvrtc_cannot_load(tmp_path):
    bindings = tmp_path / "cuda" / "bindings"  # shadows the CUDA bindings: libnvrtc does not load
    bindings.mkdir(parents=True)
    (tmp_path / "cuda" / "__init__.py").write_text("")
    (bindings / "__init__.py").write_text("")
    (bindings / "nvrtc.py").write_text("def nvrtcVersion():\n    raise RuntimeError('libnvrtc.so.12: cannot open')\n")
    env = dict(os.environ, CI="true", PYTHONPATH=os.pathsep.join([str(tmp_path), str(ROOT)]))
    env.pop("PYTEST_ADDOPTS", None)
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:randomly", "-p", "no:cacheprovider", "-q",
                           "-m", "gemm_nvrtc", "tests/test_ci_goes_red.py"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "CI: NVRTC cannot be loaded (libnvrtc.so.12: cannot open)" in done.stdout + done.stderr


def test_a_gpu_run_in_which_every_test_was_skipped_is_a_failure(tmp_path, capsys):
    summary = load_declarations(ROOT / "tools" / "gpu_tests_summary.py", "gemm_tools_gpu_tests_summary")
    xml = tmp_path / "junit.xml"
    xml.write_text('<testsuites><testsuite tests="242" failures="0" errors="0" skipped="242"/></testsuites>')
    assert summary.main([str(xml), "--wall", "3.0"]) == 1
    assert "0 passed, 0 failed, 242 skipped" in capsys.readouterr().out
    xml.write_text('<testsuites><testsuite tests="242" failures="0" errors="0" skipped="2"/></testsuites>')
    assert summary.main([str(xml), "--wall", "3.0"]) == 0
