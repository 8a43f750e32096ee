"""A student's pytest run loads pytest-gemm's plugin and no other installed one: the grader's
other plugins cost every student their start-up (hypothesis's, on the GPU machines we measure
on) and have no part in grading. An environment that sets PYTEST_DISABLE_PLUGIN_AUTOLOAD keeps
its choice (``""``: pytest loads every installed plugin again)."""
from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest

from pytest_gemm.grading.config import GradingConfig
from pytest_gemm.grading.processes import RunOutcome
from pytest_gemm.grading.students import AUTOLOAD_ENV, GRADED, grade_one
from pytest_gemm.grading.submissions import Submission

COURSE = Path(__file__).resolve().parent.parent / "examples" / "course"


def _grade(env: dict[str, str], runner=None, extra=("--gemm-allow-no-gpu",)):
    sub = Submission("alice", COURSE / "submissions" / "alice" / "kernel.py")
    kwargs = {} if runner is None else {"runner": runner}
    return grade_one(sub, attr="kernel", timeout=120, check_timeout=None, ini=COURSE / "pytest.ini",
                     extra_args=list(extra), max_score=100, config=GradingConfig(), env=env, **kwargs)


def _seen_env(env: dict[str, str]) -> dict[str, str]:
    seen: dict[str, str] = {}

    def runner(cmd, cwd, timeout, env):
        seen.update(env)
        return RunOutcome(0, False, "", 0.1)

    _grade(env, runner)
    return seen


def test_students_run_with_autoload_off_unless_the_environment_says_otherwise():
    assert _seen_env({"PATH": os.environ.get("PATH", "")})[AUTOLOAD_ENV] == "1"
    assert _seen_env({"PATH": os.environ.get("PATH", ""), AUTOLOAD_ENV: ""})[AUTOLOAD_ENV] == ""


@pytest.fixture
def installed_plugin(tmp_path):
    """A pytest plugin installed the way pip installs one (a pytest11 entry point on the path),
    which leaves a mark when pytest loads it."""
    site, mark = tmp_path / "site", tmp_path / "loaded"
    (site / "markplugin-1.0.dist-info").mkdir(parents=True)
    (site / "markplugin-1.0.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: markplugin\nVersion: 1.0\n")
    (site / "markplugin-1.0.dist-info" / "entry_points.txt").write_text("[pytest11]\nmarkplugin = markplugin\n")
    (site / "markplugin.py").write_text(textwrap.dedent(f"""
        import pathlib
        pathlib.Path({str(mark)!r}).write_text("loaded")
    """))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTEST_ADDOPTS", "PYTEST_GEMM_DISPATCH", AUTOLOAD_ENV)}
    env["PYTHONPATH"] = os.pathsep.join([str(site), *filter(None, [env.get("PYTHONPATH")])])
    env["CUDA_VISIBLE_DEVICES"] = ""
    return env, mark


def test_a_students_run_loads_gemm_and_no_other_installed_plugin(installed_plugin):
    env, mark = installed_plugin
    row = _grade(env)
    assert row.status == GRADED, (row.reason, row.output_tail)
    assert row.results and "no usable GPU" in row.results["output"]  # the plugin graded it
    assert not mark.exists()


def test_an_environment_that_asks_for_autoload_gets_every_installed_plugin(installed_plugin):
    env, mark = installed_plugin
    row = _grade(dict(env, **{AUTOLOAD_ENV: ""}))
    assert row.status == GRADED, (row.reason, row.output_tail)
    assert mark.read_text() == "loaded"
