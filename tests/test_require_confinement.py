"""A course's ``gemm_require_confinement``: a level this machine lacks, or a mistyped one, refuses
to grade (exit status 4, one line) and still writes the Gradescope result saying why, so the
autograder shows a reason rather than nothing."""
from __future__ import annotations

import json
import os

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


@pytest.mark.parametrize("lock_dir, readable, exposed", [
    ("/srv/course/locks", ["/srv/course", "/usr"], "/srv/course"),   # inside a folder the sandbox reads
    ("/srv/course", ["/srv/course"], "/srv/course"),                 # the folder itself
    ("/tmp", ["/tmp/site", "/usr"], None),                           # a readable folder inside it: its files are not
    ("/srv/course-locks", ["/srv/course"], None),                    # a name that only starts the same
])
def test_a_lock_folder_a_confined_kernel_can_read_is_found(lock_dir, readable, exposed):
    assert confine.exposed_lock_dir(lock_dir, readable) == exposed


@pytest.mark.skipif(confine.strongest() == "none", reason="no confinement works on this machine")
def test_confining_with_the_lock_in_a_folder_the_sandbox_reads_is_refused_with_a_result(pytester, monkeypatch):
    """issue 44: a submission must not be able to open the GPU lock's files (it could flock them
    from its import and stall every other student): a lock folder inside one the sandbox binds
    (here a PYTHONPATH folder of the grader's) refuses to grade, saying what to set."""
    for key, value in fakegpu.env(pytester.path).items():
        monkeypatch.setenv(key, value)
    shared = pytester.path / "shared"
    (shared / "locks").mkdir(parents=True)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in (str(shared), os.environ.get("PYTHONPATH")) if p))
    monkeypatch.setenv("PYTEST_GEMM_LOCK_DIR", str(shared / "locks"))
    (pytester.path / "fake_kernels.py").write_text(fakegpu.FAKE_KERNELS)
    result = pytester.runpytest_subprocess("-p", "fakegpu", "-p", "no:cacheprovider", "--gemm-kernel",
                                           "fake_kernels.py:ok", "--gemm-confine", "auto",
                                           "--gemm-gradescope", "results.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str() + result.stderr.str()
    said = f"the GPU lock's folder {shared / 'locks'} (PYTEST_GEMM_LOCK_DIR"  # inside the test's folder, or shared/
    assert said in result.stderr.str() and "which confined kernels can read" in result.stderr.str()
    assert "set PYTEST_GEMM_LOCK_DIR to a folder outside it" in result.stderr.str()
    written = json.loads((pytester.path / "results.json").read_text())
    assert written["score"] == 0 and said in written["output"], written
