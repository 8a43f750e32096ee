"""Grading a whole class: ``jobs`` students at once, spread over the GPUs.

Each running student gets one GPU (``CUDA_VISIBLE_DEVICES``), the one with the fewest
students on it, so with several GPUs students are spread one GPU each. Students that share
a GPU run their correctness checks at once; their timed checks (speed, sweep) take the
GPU-wide lock of ``measure/gpu_lock.py`` and have the GPU to themselves, so their speed
figures are those of a solo run. A student whose run had a check the harness could not run
(``harness_out_of_memory``) is graded again, alone, once the others are done; if it happens
again the row says so (status ``error``) instead of charging the kernel.

The roofs and cuBLAS are measured once per GPU for the whole class, by the first student's
speed check, and read by the others (``measure/run_cache.py``, a folder of the run's own),
so that each student's turn alone on the GPU times only the student's kernel;
``share_measurements=False`` (the gradebook's ``--measure-each``) measures them in every run.
Students graded at once share the CPU cores too: each gets ``thread_limits`` of them for its
BLAS and OpenMP threads.
"""
from __future__ import annotations

import contextlib
import os
import tempfile
import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from ..measure.run_cache import CACHE_ENV
from .config import GradingConfig
from .processes import run_with_limit
from .students import (DEFAULT_TIMEOUT, ERROR, GRADED, CommandBuilder, Runner, StudentResult, grade_one,
                       harness_failed, load_grading_config)
from .submissions import Submission, build_command
from ..kernels.gpus import visible_gpu_ids


JOBS_PER_GPU = 12  # students sharing one GPU: their timed checks queue for it, one at a time


def cpu_cores() -> int:
    """The CPU cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def default_jobs(gpus: int, cores: int) -> int:
    """Students graded at once when ``--jobs`` is not given: 3 of every 4 CPU cores (each
    student runs a pytest process and its kernel's, which compile and compute references on the
    CPU; on an H200 machine with 16 cores, 12 students at once were faster than 16), at most
    ``JOBS_PER_GPU`` per GPU, at least 1."""
    by_cores = max(1, cores * 3 // 4)
    return max(1, min(by_cores, JOBS_PER_GPU * gpus)) if gpus > 0 else by_cores


THREAD_ENV = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def thread_limits(env: dict[str, str], jobs: int, cores: int) -> dict[str, str]:
    """The thread counts of the BLAS and OpenMP libraries for each of ``jobs`` students at once:
    ``cores // jobs`` (at least 1), for each variable ``env`` does not set already. numpy's BLAS
    (the float64 references of small checks) otherwise starts a thread per core in every kernel
    process, and a dozen students' threads spinning on 16 cores slow every check down."""
    if jobs <= 1:
        return {}
    threads = str(max(1, cores // jobs))
    return {name: threads for name in THREAD_ENV if not env.get(name)}


class GpuSlots:
    """Which GPU the next student runs on: the one with the fewest students running."""

    def __init__(self, gpus: Sequence[str]):
        self.load: dict[str, int] = {g: 0 for g in gpus}
        self.lock = threading.Lock()

    def acquire(self) -> str | None:
        with self.lock:
            if not self.load:
                return None
            gpu = min(self.load, key=lambda g: (self.load[g], list(self.load).index(g)))
            self.load[gpu] += 1
            return gpu

    def release(self, gpu: str | None) -> None:
        if gpu is not None:
            with self.lock:
                self.load[gpu] -= 1


def _visible_gpus() -> list[str]:

    return visible_gpu_ids()


@contextlib.contextmanager
def measurement_env(env: dict[str, str] | None, share: bool) -> Iterator[dict[str, str]]:
    """The students' environment: with ``share``, naming a folder of this class's own for the
    measurements its runs share (removed afterwards), unless one is named already."""
    base = dict(os.environ if env is None else env)
    if not share:
        base.pop(CACHE_ENV, None)
    elif not base.get(CACHE_ENV):
        with tempfile.TemporaryDirectory(prefix="pytest-gemm-measured-") as folder:
            yield dict(base, **{CACHE_ENV: folder})
            return
    yield base


@contextlib.contextmanager
def class_env(env: dict[str, str] | None, share: bool, jobs: int) -> Iterator[dict[str, str]]:
    """The environment of a class's students graded ``jobs`` at a time on this machine: ``env``
    (default: this process's) with the class's measurement folder (``share``) and each
    student's share of the CPU cores (``thread_limits``)."""
    with measurement_env(env, share) as base:
        base.update(thread_limits(base, jobs, cpu_cores()))
        yield base


@dataclass(frozen=True)
class StudentGrading:
    """How each student of a class is graded: ``grade`` is the one per-student call of both the
    local pool (``grade_all``) and the Dask scheduler's tasks (``dask_scheduler.py``), which
    carry this (picklable) to their workers."""

    attr: str
    timeout: float
    check_timeout: float | None
    ini: Path | None
    extra_args: tuple[str, ...]
    max_score: float
    config: GradingConfig
    runner: Runner = run_with_limit
    command_builder: CommandBuilder = build_command
    log_dir: Path | None = None

    @classmethod
    def of_class(cls, *, attr: str = "kernel", timeout: float = DEFAULT_TIMEOUT, check_timeout: float | None = None,
                 ini: Path | None = None, extra_args: Sequence[str] = (), runner: Runner = run_with_limit,
                 command_builder: CommandBuilder = build_command, log_dir: Path | None = None) -> "StudentGrading":
        config = load_grading_config(ini)
        return cls(attr, timeout, check_timeout, ini, tuple(extra_args), config.max_score(), config, runner,
                   command_builder, log_dir)

    def grade(self, sub: Submission, env: dict[str, str], gpu: str | None = None,
              workdirs: Path | None = None) -> StudentResult:
        """Grade ``sub`` with ``env`` (on ``gpu``, when given: its ``CUDA_VISIBLE_DEVICES``; its
        working folder in ``workdirs``, when given: ``students.grade_one``)."""
        run_env = dict(env, CUDA_VISIBLE_DEVICES=gpu) if gpu is not None else env
        return grade_one(sub, attr=self.attr, timeout=self.timeout, check_timeout=self.check_timeout, ini=self.ini,
                         extra_args=self.extra_args, max_score=self.max_score, config=self.config,
                         runner=self.runner, command_builder=self.command_builder, env=run_env, log_dir=self.log_dir,
                         workdirs=workdirs)


def grade_all(submissions: Sequence[Submission], *, attr: str = "kernel", timeout: float = DEFAULT_TIMEOUT,
              check_timeout: float | None = None, ini: Path | None = None,
              extra_args: Sequence[str] = (), jobs: int = 1, runner: Runner = run_with_limit,
              command_builder: CommandBuilder = build_command, env: dict[str, str] | None = None,
              log_dir: Path | None = None, gpus: Sequence[str] | None = None,
              progress: Callable[[StudentResult], None] | None = None,
              share_measurements: bool = True) -> list[StudentResult]:
    """Grade every submission (``jobs`` at a time, spread over ``gpus``: default, the visible
    ones), in the submissions' order."""
    with class_env(env, share_measurements, jobs) as base_env:
        grading = StudentGrading.of_class(attr=attr, timeout=timeout, check_timeout=check_timeout, ini=ini,
                                          extra_args=extra_args, runner=runner, command_builder=command_builder,
                                          log_dir=log_dir)
        slots = GpuSlots(_visible_gpus() if gpus is None else gpus)

        def one(sub: Submission, report: bool = True) -> StudentResult:
            gpu = slots.acquire()
            try:
                result = grading.grade(sub, base_env, gpu)
            finally:
                slots.release(gpu)
            if report and progress is not None and not harness_failed(result):
                progress(result)
            return result

        if jobs <= 1:
            results = [one(s) for s in submissions]
        else:
            with ThreadPoolExecutor(max_workers=jobs) as pool:
                results = list(pool.map(one, submissions))
        finish(results, submissions, lambda sub: one(sub, report=False), progress)
        return results


def finish(results: list[StudentResult], submissions: Sequence[Submission],
           alone: Callable[[Submission], StudentResult],
           progress: Callable[[StudentResult], None] | None = None) -> None:
    """A class's rows once every student has run, whichever scheduler ran them: a student whose
    run had a check the harness could not run is graded again ``alone`` (the others done), and
    rows with no results of their own get the usual max score."""
    for i, (sub, result) in enumerate(zip(submissions, results)):
        if harness_failed(result):  # again, alone on the GPU
            again = alone(sub)
            if harness_failed(again):
                again.status = ERROR
                again.reason = ("error: the grader ran out of GPU memory in some checks twice (once with the "
                                "others, once alone): not the kernel's fault; grade this student again on a "
                                "free GPU" + (f"; {again.reason}" if again.reason else ""))
            else:
                again.reason = "graded again alone (the grader ran out of GPU memory the first time)" + \
                    (f"; {again.reason}" if again.reason else "")
            results[i] = again
            if progress is not None:
                progress(again)
    _usual_max_score(results)


def _usual_max_score(results: list[StudentResult]) -> None:
    """Rows with no results of their own get the max score the graded rows had."""
    graded = Counter(r.max_score for r in results if r.status == GRADED)
    if not graded:
        return
    usual = graded.most_common(1)[0][0]
    for r in results:
        tests: list[dict[str, Any]] = r.results.get("tests", [])
        if r.status != GRADED and all("autograder" in (t.get("tags") or []) for t in tests):
            r.max_score = usual
            for test in tests:
                test["max_score"] = usual
            r.results.get("extra_data", {}).get("pytest_gemm", {})["max_score"] = usual
