"""A course's ``gemm_require_confinement``: a level this machine lacks, or a mistyped one, refuses
to grade (exit status 4, one line) and still writes the Gradescope result saying why, so the
autograder shows a reason rather than nothing."""
from __future__ import annotations

import json

import pytest

import fakegpu
from pytest_gemm.kernels import confine


@pytest.mark.parametrize("level, said", [("bubblwrap", "gemm_require_confinement = 'bubblwrap'"),
                                         ("bubblewrap", "PYTEST_GEMM_BWRAP")])
def test_a_confinement_the_course_requires_but_cannot_have_is_refused_with_a_result(pytester, monkeypatch, level, said):
    for key, value in fakegpu.env(pytester.path).items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv(confine.BWRAP_ENV, str(pytester.path / "no-such-bwrap"))  # no bubblewrap here
    pytester.makeini(f"[pytest]\ngemm_require_confinement = {level}\n")
    (pytester.path / "fake_kernels.py").write_text(fakegpu.FAKE_KERNELS)
    result = pytester.runpytest_subprocess("-p", "fakegpu", "-p", "no:cacheprovider", "--gemm-kernel",
                                           "fake_kernels.py:ok", "--gemm-gradescope", "results.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str() + result.stderr.str()
    assert said in result.stderr.str()
    written = json.loads((pytester.path / "results.json").read_text())
    assert written["score"] == 0 and said in written["output"], written
