"""A confined submission does not see the grader's environment (issue 44, "reads nothing it
should not"): a token or credential of the grader's is withheld, what running GPU code needs is
kept, and a course passes names of its own with PYTEST_GEMM_SANDBOX_ENV (kernels/sandbox_env.py).
Found by the outside kit of hostile submissions: under bubblewrap a submission read
``GRADER_SECRET`` from its environment."""
from __future__ import annotations

import pytest

import fakegpu
from pytest_gemm.checks.sandbox_confine import confined_command
from pytest_gemm.kernels import confine
from pytest_gemm.kernels.sandbox_env import EXTRA_ENV, sandbox_environ

GRADER = {"PATH": "/usr/bin", "LD_LIBRARY_PATH": "/usr/local/cuda/lib64", "CUDA_VISIBLE_DEVICES": "0",
          "PYTHONPATH": "/course", "LC_ALL": "C.UTF-8", "USER": "grader", "TRITON_CACHE_DIR": "/x",
          "PYTEST_GEMM_LOCK_DIR": "/locks", "GRADESCOPE_TOKEN": "t0ken", "AWS_SECRET_ACCESS_KEY": "k3y",
          "GITHUB_TOKEN": "ghp", "COURSE_HIDDEN_TESTS": "/srv/hidden", "SSH_AUTH_SOCK": "/run/ssh",
          "NVIDIA_API_KEY": "nvapi-x", "TORCH_HUB_TOKEN": "hub", "PYTEST_GEMM_TEST_PASSWORD": "pw"}
# the last three belong to passed families (NVIDIA_, TORCH_, PYTEST_) but read like credentials
SECRETS = {"GRADESCOPE_TOKEN", "AWS_SECRET_ACCESS_KEY", "GITHUB_TOKEN", "COURSE_HIDDEN_TESTS", "SSH_AUTH_SOCK",
           "NVIDIA_API_KEY", "TORCH_HUB_TOKEN", "PYTEST_GEMM_TEST_PASSWORD"}
AVAILABLE = [level for level in ("bubblewrap", "landlock") if confine.why_not(level) is None]


def test_secrets_are_withheld_and_what_gpu_code_needs_is_kept():
    seen = sandbox_environ(GRADER)
    assert not SECRETS & set(seen)
    assert seen == {k: v for k, v in GRADER.items() if k not in SECRETS}


def test_a_course_passes_names_and_patterns_of_its_own():
    seen = sandbox_environ({**GRADER, EXTRA_ENV: "COURSE_HIDDEN_TESTS, GITHUB_* NVIDIA_API_KEY"})
    assert {"COURSE_HIDDEN_TESTS", "GITHUB_TOKEN", "NVIDIA_API_KEY"} <= set(seen)  # named on purpose: passed
    assert not {"GRADESCOPE_TOKEN", "AWS_SECRET_ACCESS_KEY", "SSH_AUTH_SOCK", "TORCH_HUB_TOKEN"} & set(seen)


def test_the_check_process_of_a_confined_kernel_gets_the_filtered_environment(tmp_path, monkeypatch):
    (tmp_path / "mine.py").write_text("kernel = None\n")
    monkeypatch.setattr(confine, "_active", "landlock")  # the command is only built, never run
    _, _, env = confined_command(["python3", "-c", "pass"], f"{tmp_path}/mine.py:kernel", str(tmp_path), GRADER)
    assert not SECRETS & set(env) and env["CUDA_VISIBLE_DEVICES"] == "0" and env["PATH"] == "/usr/bin"
    monkeypatch.setattr(confine, "_active", "none")
    _, _, env = confined_command(["python3", "-c", "pass"], f"{tmp_path}/mine.py:kernel", str(tmp_path), GRADER)
    assert env == GRADER  # unconfined: the whole environment, as before


SEES = '''import os
from pytest_gemm import kernel


@kernel(name="sees_" + ("the_secret" if os.environ.get("GEMM_TEST_GRADER_SECRET") else "nothing"))
def mine(a, b, c):
    raise AssertionError("never launched: only its declaration is read")
'''


@pytest.fixture
def sees(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    pytester.makepyfile(sees=SEES)
    pytester.path.chmod(0o755)  # a confined child runs as a user of its own when the tests run as root
    for key, value in fakegpu.env(pytester.path).items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("GEMM_TEST_GRADER_SECRET", "s3cr3t")
    return pytester


def _collected(pytester: pytest.Pytester, level: str) -> str:
    result = pytester.runpytest_subprocess("-p", "fakegpu", "-p", "no:cacheprovider", "--gemm-kernel", "sees.py:mine",
                                           "--gemm-confine", level, "--collect-only", "-q")
    return result.stdout.str()


@pytest.mark.parametrize("level", AVAILABLE or [pytest.param("bubblewrap", marks=pytest.mark.skip(
    reason=f"no confinement works here: bubblewrap: {confine.why_not('bubblewrap')}; "
           f"landlock: {confine.why_not('landlock')}"))])
def test_a_confined_submission_does_not_read_the_graders_secret(sees, level, monkeypatch):
    out = _collected(sees, level)
    assert "sees_nothing" in out and "sees_the_secret" not in out, out[-2000:]
    monkeypatch.setenv(EXTRA_ENV, "GEMM_TEST_*")  # the course passes it on purpose
    assert "sees_the_secret" in _collected(sees, level)
    monkeypatch.delenv(EXTRA_ENV)
    assert "sees_the_secret" in _collected(sees, "none")  # unconfined: today's behaviour


RAISES = '''import os
from pytest_gemm import kernel


@kernel(name="says")
def mine(a, b, c):
    raise ValueError("launcher saw secret=" + str(os.environ.get("GEMM_TEST_GRADER_SECRET")))
'''


@pytest.mark.parametrize("level", AVAILABLE or [pytest.param("bubblewrap", marks=pytest.mark.skip(
    reason=f"no confinement works here: bubblewrap: {confine.why_not('bubblewrap')}; "
           f"landlock: {confine.why_not('landlock')}"))])
def test_a_confined_launcher_run_with_no_gpu_does_not_read_the_graders_secret(pytester, monkeypatch, level):
    """The no-GPU dry run (kernels/dry_run.py) calls the launcher in a process of its own: its
    error, which the report quotes, shows what that process saw."""
    pytester.makepyfile(says=RAISES)
    pytester.path.chmod(0o755)
    monkeypatch.setenv("GEMM_TEST_GRADER_SECRET", "s3cr3t")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # the dry run, even on a GPU machine

    def said(level: str) -> str:
        return pytester.runpytest_subprocess("-p", "no:cacheprovider", "--gemm-kernel", "says.py:mine", "--gemm-confine",
                                             level, "--gemm-allow-no-gpu", "--gemm-shapes", "quick", "-rs").stdout.str()

    out = said(level)
    assert "saw secret=None" in out and "saw secret=s3cr3t" not in out, out[-2000:]
    assert "saw secret=s3cr3t" in said("none")  # unconfined: today's behaviour
