"""The conformance suite run on kernels of ours, for the GPU tests: each test module declares
its runs (``SuiteRun``: kernels, ``-k`` selection, options) in a module-level ``SUITE_RUNS``,
and the session fixture ``suite_runs`` (tests/conftest.py) starts every declared run of the
selected tests at once, in the background, when the first GPU test asks for one. Each test
then waits for its own run and reads its JSON report, validated against the shipped schema
(``pytest_gemm.outputs.report_schema``): a key renamed in the report fails there, and, through
``tests/test_report_schema.py``, on a machine without a GPU first.

Running the runs side by side is what keeps ``bash tools/gpu_session.sh gpu-tests`` within its
six minutes: each is one pytest process (with its own ``-n``) covering many kernels, instead of
one process per kernel one after another. They share the GPU through pytest-gemm's GPU-wide
lock (timed checks hold it alone), the roofs and cuBLAS timings through one
``PYTEST_GEMM_MEASURE_CACHE`` folder, and Triton's compiled kernels through one
``TRITON_CACHE_DIR`` (a run may set its own: the warm-up target's cold run does).
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_gemm.measure.run_cache import CACHE_ENV
from pytest_gemm.outputs.report_schema import kernels_by_name, load_report


@dataclass(frozen=True)
class SuiteRun:
    """One pytest process running the conformance suite: ``kernels`` (``--gemm-kernel`` specs),
    ``select`` (``-k``), ``options`` (anything else), a wall-clock ``timeout``."""

    name: str
    kernels: tuple[str, ...]
    select: str | None = None
    options: tuple[str, ...] = ()
    timeout: int = 600
    env: tuple[tuple[str, str], ...] = ()

    def args(self, report: Path) -> list[str]:
        verbosity = [] if "-v" in self.options else ["-q"]  # -q and -v together cancel out
        args = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *verbosity, "-rfEs", "--gemm-report", str(report)]
        for spec in self.kernels:
            args += ["--gemm-kernel", spec]
        if self.select:
            args += ["-k", self.select]
        return args + list(self.options)


@dataclass
class Finished:
    """What a run left: its exit status, output, wall time and (validated) report."""

    run: SuiteRun
    returncode: int
    output: str
    wall_s: float
    report: dict[str, Any] | None
    folder: Path

    @property
    def kernels(self) -> dict[str, dict[str, Any]]:
        assert self.report is not None, f"run {self.run.name!r} wrote no --gemm-report:\n{self.output[-6000:]}"
        return kernels_by_name(self.report)

    def entry(self, name: str) -> dict[str, Any]:
        kernels = self.kernels
        assert name in kernels, f"kernel {name!r} not in run {self.run.name!r}'s report ({sorted(kernels)}):\n" \
                                f"{self.output[-6000:]}"
        return kernels[name]


@dataclass
class Started:
    run: SuiteRun
    folder: Path
    process: subprocess.Popen
    started: float = field(default_factory=time.monotonic)
    finished: Finished | None = None

    def wait(self) -> Finished:
        if self.finished is None:
            try:
                self.process.wait(timeout=max(1.0, self.run.timeout - (time.monotonic() - self.started)))
            except subprocess.TimeoutExpired:
                _kill_group(self.process)
            wall = time.monotonic() - self.started
            output = (self.folder / "log.txt").read_text(errors="replace")
            path = self.folder / "report.json"
            report = load_report(path) if path.is_file() else None
            self.finished = Finished(self.run, self.process.returncode, output, wall, report, self.folder)
        return self.finished


def start(run: SuiteRun, folder: Path, measure_cache: Path | None = None) -> Started:
    folder.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, **dict(run.env)}
    if measure_cache is not None:
        env.setdefault(CACHE_ENV, str(measure_cache))  # roofs and cuBLAS timed once for all runs
        # one Triton cache for the session's Triton runs (cold at its start): the tutorial kernel's
        # configs compiled once, not once per run on 16 cores shared by every run
        env.setdefault("TRITON_CACHE_DIR", str(measure_cache.parent / "triton-cache"))
    log = open(folder / "log.txt", "w")
    process = subprocess.Popen(run.args(folder / "report.json"), cwd=folder, stdout=log, stderr=subprocess.STDOUT,
                               env=env, start_new_session=True)
    log.close()
    return Started(run, folder, process)


class SuiteRuns:
    """The session's runs: started together on first use, each waited for by its tests."""

    def __init__(self, runs: dict[str, SuiteRun], folder: Path):
        self.runs, self.folder = runs, folder
        self.started: dict[str, Started] = {}

    def start_all(self) -> None:
        for name, run in self.runs.items():
            if name not in self.started:
                self.started[name] = start(run, self.folder / name, self.folder / "measure-cache")

    def result(self, name: str) -> Finished:
        if name not in self.runs:
            raise KeyError(f"no suite run {name!r} is declared (SUITE_RUNS of the selected modules: "
                           f"{sorted(self.runs)})")
        self.start_all()
        return self.started[name].wait()

    def stop(self) -> None:
        for s in self.started.values():
            _kill_group(s.process)


def _kill_group(process: subprocess.Popen) -> None:
    """End a run and everything it started (xdist workers, kernel processes)."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    process.wait()
