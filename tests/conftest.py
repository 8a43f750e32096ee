"""The GPU tests' shared suite runs (tests/gpu_runs.py): every ``SUITE_RUNS`` declared by a
module with a selected test is started at once, when the first test asks for one; tests marked
``gemm_quiet_machine`` run before that."""
from __future__ import annotations

import importlib
import os
import pkgutil
import shutil
import tempfile
from pathlib import Path
from typing import Iterator

import pytest

import pytest_gemm

from gpu_runs import SuiteRun, SuiteRuns
from suite_helpers import ci_toolchain_problem

RUNS = pytest.StashKey[dict[str, SuiteRun]]()

# Every module of the package is imported once, here, before any in-process pytester run. That
# run restores sys.modules when it ends: a module first imported inside it would be dropped from
# sys.modules but stay an attribute of its package, so a later test could patch that stale copy
# while the code under test imports a fresh one (tests then passed or failed by their order).
# None of them imports CUDA at import (lazy CUDA imports); this costs under a second.
for _module in pkgutil.walk_packages(pytest_gemm.__path__, "pytest_gemm."):
    importlib.import_module(_module.name)


def pytest_sessionstart(session: pytest.Session) -> None:
    """In CI a run whose NVRTC cannot load ends at once (exit status 1) instead of skipping every
    compile test."""
    problem = ci_toolchain_problem(dict(os.environ))
    if problem:
        pytest.exit(problem, returncode=pytest.ExitCode.TESTS_FAILED)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # A GPU test that times host-side launches needs the machine quiet: it runs first, before a
    # test asks for the suite runs, which load every core (gemm_quiet_machine).
    items.sort(key=lambda item: item.get_closest_marker("gemm_quiet_machine") is None)
    runs: dict[str, SuiteRun] = {}
    for item in items:
        for run in getattr(getattr(item, "module", None), "SUITE_RUNS", ()):
            runs[run.name] = run
    config.stash[RUNS] = runs


@pytest.fixture(scope="session")
def suite_runs(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SuiteRuns]:
    runs = SuiteRuns(request.config.stash.get(RUNS, {}), tmp_path_factory.mktemp("suite-runs"))
    yield runs
    runs.stop()


@pytest.fixture
def open_folder() -> Iterator[Path]:
    """A folder the sandbox's own user may read, as a submission's is (in the temporary directory:
    a root grader's confined child runs as a user of its own, and pytest's tmp_path is closed to it)."""
    made = Path(tempfile.mkdtemp(prefix="gemm-test-submission-"))
    os.chmod(made, 0o755)
    yield made
    shutil.rmtree(made, ignore_errors=True)


@pytest.fixture(autouse=True)
def _pytester_folder_open_to_the_sandbox_user(request: pytest.FixtureRequest) -> None:
    """A run that grades (--gemm-gradescope) is confined (docs/security.md); run by root, its
    submission is read by a user of its own, so a pytester folder (0700) is opened to it."""
    if "pytester" in request.fixturenames:
        request.getfixturevalue("pytester").path.chmod(0o755)
