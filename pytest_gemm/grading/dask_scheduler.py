"""Grading a class on Dask distributed (``gradebook --scheduler dask [--address ADDR]``).

Each student is one Dask task that asks its worker for one ``GPU`` resource. A worker's
``GPU`` resource is how many students it grades at once, spread over its visible GPUs as the
local pool spreads them (``classrun.GpuSlots``): ``dask worker ADDR --nthreads 12 --resources
GPU=12`` on a machine with one H200 grades 12 at once, the local pool's default there. Without
``--address`` the gradebook starts a ``LocalCluster`` of one worker on this machine with
``--jobs`` GPU slots, and its students see the environment the local pool would give them.

Every task runs ``classrun.StudentGrading.grade``, the local pool's own per-student call, and
the class's rows are finished by the local pool's ``classrun.finish``, so the gradebook's
files are the same. Each student's row is written once, whatever happens:

- at most as many students are in flight as the workers have GPU slots: a worker that dies
  takes with it only the students it was grading (Dask counts a worker's death against every
  task it held);
- a worker that dies mid-student: Dask's scheduler runs the student again on another worker,
  up to its ``distributed.scheduler.allowed-failures`` (default 3) deaths; the task's one
  result is the row; the dead run's working folder, which its worker could not remove, lies in
  the class's folder on that machine (``pytest-gemm-grading-TOKEN`` in its temporary folder),
  which every worker alive at the end, and the gradebook on its own machine, removes;
- a student whose task ran out of them (``KilledWorker``) is graded again alone once the others
  are done, since it may only have died beside a student that kills workers; if it kills
  workers alone too it scores 0 as crashed, with that reason, and the cluster goes on (each
  worker's nanny starts it again).

Workers need pytest-gemm installed and the submissions (and the course's ini) at the same paths
as the gradebook's, a shared filesystem: the gradebook checks every worker before grading.
Dask is imported only here and only when asked for (``pip install 'pytest-gemm[dask]'``).
"""
from __future__ import annotations

import contextlib
import os
import shutil
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from ..measure.run_cache import CACHE_ENV
from .classrun import GpuSlots, StudentGrading, class_env, cpu_cores, finish, thread_limits
from .gradescope import failure_results
from .students import CRASHED, StudentResult, harness_failed
from .submissions import Submission
import logging
from ..kernels.gpus import visible_gpu_ids

INSTALL = "pip install 'pytest-gemm[dask]'"
RESOURCE = "GPU"            # the worker resource each student's task asks one of
POLL_S = 1.0                # how often the in-flight window is topped up as workers come and go
WORKER_WAIT_S = 1800.0      # how long to wait for a first worker with GPU slots (a batch queue)


class DaskProblem(RuntimeError):
    """Dask cannot grade this class (not installed, no scheduler, workers that cannot see the
    submissions): the message says what to do."""


class WorkerCannotSee(DaskProblem):
    """A worker (one that joined after the check, ``cluster.adapt``) cannot see a submission:
    its students go to the other workers."""

    def __init__(self, message: str, worker: str):
        super().__init__(message, worker)  # both in args: it crosses from the worker pickled
        self.worker = worker

    def __str__(self) -> str:
        return str(self.args[0])


def _can_see(path: Path) -> bool:
    """Does this worker see ``path`` (a test replaces it on one worker)?"""
    return path.exists()


def _distributed() -> Any:
    try:
        import distributed  # lazy: optional (dask)
    except ImportError as exc:
        raise DaskProblem(f"--scheduler dask needs Dask distributed ({exc}); install it with {INSTALL}, "
                          "or grade with the local pool (--scheduler local, the default)") from None
    return distributed


@contextlib.contextmanager
def connect(address: str | None, jobs: int) -> Iterator[Any]:
    """A ``distributed.Client``: of the scheduler at ``address``, or of a ``LocalCluster`` of one
    worker on this machine with ``jobs`` threads and ``jobs`` GPU slots."""
    distributed = _distributed()
    if address:
        try:
            client = distributed.Client(address, timeout="30s")
        except (OSError, TimeoutError, ValueError) as exc:
            raise DaskProblem(f"could not reach the Dask scheduler at {address!r} ({exc}); start one with "
                              "`dask scheduler`, or check --address (e.g. tcp://head-node:8786)") from None
        with client:
            yield client
        return

    local = distributed.LocalCluster(n_workers=1, threads_per_worker=jobs, processes=True, resources={RESOURCE: jobs},
                                     memory_limit=0, dashboard_address=None, silence_logs=logging.ERROR)
    try:
        with distributed.Client(local) as client:
            yield client
    finally:
        close_quietly(local)


def close_quietly(cluster: Any) -> None:
    """Close a LocalCluster whose work is done. Closing it while a nanny starts a worker again
    (after a student brought one down) can raise in Dask's own bookkeeping (a KeyError for the
    worker just removed): the grades are in by then, and the workers end with this process."""
    with contextlib.suppress(Exception):
        cluster.close()


def _gpu_resources(dask_scheduler: Any) -> dict[str, float]:
    """On the scheduler: each worker's GPU slots."""
    return {addr: float(ws.resources.get(RESOURCE, 0)) for addr, ws in dask_scheduler.workers.items()}


def gpu_slots(client: Any) -> dict[str, float]:
    """Each worker's GPU slots (its ``GPU`` resource), workers without any left out."""
    return {a: n for a, n in client.run_on_scheduler(_gpu_resources).items() if n >= 1}


def _missing(paths: Sequence[str]) -> list[str]:
    """On a worker: which of ``paths`` it cannot see."""
    return [p for p in paths if not os.path.exists(p)]


def check_workers(client: Any, paths: Sequence[str], no_gpu: Callable[[], str | None] | None,
                  say: Callable[[str], None] = print) -> dict[str, float]:
    """Wait for a worker with GPU slots, then check that every worker sees ``paths`` (and, with
    ``no_gpu``, a usable GPU: ``no_gpu()`` run on each). Raises ``DaskProblem`` saying which
    worker lacks what; returns the slots per worker."""
    deadline = time.monotonic() + WORKER_WAIT_S
    slots = gpu_slots(client)
    if not slots:
        say(f"gradebook: waiting for a Dask worker with {RESOURCE} slots (workers start with "
            f"`dask worker ADDRESS --nthreads N --resources {RESOURCE}=N`)")
    while not slots:
        if time.monotonic() > deadline:
            raise DaskProblem(f"no worker of the Dask cluster offers the {RESOURCE} resource after "
                              f"{WORKER_WAIT_S:g} s: start workers with --resources {RESOURCE}=N (N: students "
                              "each grades at once, e.g. 12 per H200)")
        time.sleep(POLL_S)
        slots = gpu_slots(client)
    workers = list(slots)
    # a worker that cannot be reached now (starting again) is left out: its tasks check the paths too
    missing = {w: m for w, m in client.run(_missing, list(paths), workers=workers, on_error="ignore").items() if m}
    if missing:
        worker, paths_lost = next(iter(missing.items()))
        raise DaskProblem(f"Dask worker {worker} cannot see {', '.join(paths_lost)}"
                          + (f" (and {len(missing) - 1} more workers lack paths)" if len(missing) > 1 else "")
                          + ": its students could not be graded; put the submissions (and --ini) at the same path "
                            "on every worker (a shared filesystem) and install pytest-gemm there")
    if no_gpu is not None:
        problems = {w: p for w, p in client.run(no_gpu, workers=workers, on_error="ignore").items() if p}
        if problems:
            worker, problem = next(iter(problems.items()))
            raise DaskProblem(f"Dask worker {worker}: {problem}")
    return slots


# ---- on the worker -------------------------------------------------------------------------

_SLOTS: list[GpuSlots] = []
_SLOTS_LOCK = threading.Lock()


def _worker_gpus() -> GpuSlots:
    with _SLOTS_LOCK:
        if not _SLOTS:
            _SLOTS.append(GpuSlots(visible_gpu_ids()))
        return _SLOTS[0]


def _measurements(token: str) -> Path:
    return Path(tempfile.gettempdir()) / f"pytest-gemm-measured-{token}"


def _workdirs(token: str) -> Path:
    """The class's folder for its students' working folders on this machine: a worker killed
    mid-student never removes that student's, so the class's whole folder goes at the end."""
    return Path(tempfile.gettempdir()) / f"pytest-gemm-grading-{token}"


def worker_env(environ: dict[str, str], token: str, share: bool, slots: int, cores: int) -> dict[str, str]:
    """A student's environment on a worker of another machine: the worker's own, with the class's
    measurement folder on this machine (``share``) and the thread limits of ``slots`` students on
    ``cores`` cores, as the local pool sets them."""
    env = dict(environ)
    if not share:
        env.pop(CACHE_ENV, None)
    elif not env.get(CACHE_ENV):
        env[CACHE_ENV] = str(_measurements(token))
    env.update(thread_limits(env, slots, cores))
    return env


def grade_task(sub: Submission, grading: StudentGrading, env: dict[str, str] | None, token: str,
               share: bool) -> StudentResult:
    """One student, on a Dask worker: the local pool's per-student call on one of the worker's
    GPUs. ``env``: the students' environment sent by a gradebook on this machine (its own
    ``LocalCluster``), else None: the worker's own (``worker_env``)."""
    if sub.kernel_file is not None and not _can_see(sub.kernel_file):
        worker = _worker_address()
        raise WorkerCannotSee(f"{sub.kernel_file} is not on Dask worker {worker}: put the submissions at the "
                              "same path on every worker (a shared filesystem)", worker)
    if env is None:
        env = worker_env(dict(os.environ), token, share, _worker_slots(), cpu_cores())
    slots = _worker_gpus()
    gpu = slots.acquire()
    try:
        return grading.grade(sub, env, gpu, workdirs=_workdirs(token))
    finally:
        slots.release(gpu)


def _worker_address() -> str:
    from distributed import get_worker  # lazy: optional (dask)

    return str(get_worker().address)


def _worker_slots() -> int:
    from distributed import get_worker  # lazy: optional (dask)

    return max(1, int(get_worker().state.total_resources.get(RESOURCE, 1)))


def _forget(token: str) -> None:
    """The class's folders on this machine: its measurements, its students' working folders."""
    shutil.rmtree(_measurements(token), ignore_errors=True)
    shutil.rmtree(_workdirs(token), ignore_errors=True)


# ---- on the gradebook's side ---------------------------------------------------------------

def _crashed(sub: Submission, grading: StudentGrading, deaths: int) -> StudentResult:
    reason = (f"crashed: the Dask workers grading it died {deaths} times, first beside the others, then alone: "
              "its grading brings down the process that runs it (its kernel kills it, or uses up the machine's "
              "memory), so it scores 0")
    return StudentResult(sub.student, CRASHED, 0.0, grading.max_score, reason,
                         results=failure_results(reason, grading.max_score, grading.config))


def grade_all_dask(submissions: Sequence[Submission], grading: StudentGrading, *, client: Any,
                   env: dict[str, str] | None = None, share_measurements: bool = True,
                   progress: Callable[[StudentResult], None] | None = None) -> list[StudentResult]:
    """Grade every submission on the Dask cluster of ``client``, in the submissions' order (see
    the module's docstring). ``env``: the students' environment when the workers are on this
    machine (the gradebook's own ``LocalCluster``), else None (each worker's own)."""
    distributed = _distributed()
    from distributed.scheduler import KilledWorker  # lazy: optional (dask)

    token = uuid.uuid4().hex[:12]
    index = {id(sub): i for i, sub in enumerate(submissions)}
    results: list[StudentResult | None] = [None] * len(submissions)
    killed: dict[int, int] = {}   # student -> worker deaths while grading it beside the others
    gave_up: set[int] = set()     # students that killed workers alone too

    blind: set[str] = set()       # workers that cannot see the submissions: none of their students

    def submit(i: int, suffix: str = "") -> Any:
        where: dict[str, Any] = {}
        if blind:
            seeing = [w for w in client.scheduler_info().get("workers", {}) if w not in blind]
            if not seeing:
                raise DaskProblem(f"no Dask worker left that sees the submissions (not {', '.join(sorted(blind))}): "
                                  "put them at the same path on every worker (a shared filesystem)")
            where = {"workers": seeing, "allow_other_workers": False}
        return client.submit(grade_task, submissions[i], grading, env, token, share_measurements,
                             key=f"gemm-grade-{token}-{i}{suffix}-{len(blind)}", resources={RESOURCE: 1}, pure=False,
                             **where)

    def report(result: StudentResult) -> None:
        if progress is not None and not harness_failed(result):
            progress(result)

    def alone(sub: Submission) -> StudentResult:
        i = index[id(sub)]
        fut = submit(i, f"-alone-{uuid.uuid4().hex[:6]}")
        try:
            return fut.result()
        except KilledWorker as exc:
            gave_up.add(i)
            return _crashed(sub, grading, killed.get(i, 0) + _deaths(exc))
        finally:
            fut.release()

    try:
        todo = list(range(len(submissions)))[::-1]
        flying: dict[Any, int] = {}
        while todo or flying:
            window = max(1, int(sum(gpu_slots(client).values())))  # workers come and go
            while todo and len(flying) < window:
                i = todo.pop()
                flying[submit(i)] = i
            with contextlib.suppress(TimeoutError, getattr(distributed, "TimeoutError", TimeoutError)):
                distributed.wait(list(flying), timeout=POLL_S, return_when="FIRST_COMPLETED")
            for fut in [f for f in flying if f.done()]:
                i = flying.pop(fut)
                try:
                    results[i] = fut.result()
                except KilledWorker as exc:
                    killed[i] = _deaths(exc)
                    continue
                except WorkerCannotSee as exc:  # a worker that joined late without the shared folder
                    if exc.worker not in blind:
                        blind.add(exc.worker)
                        print(f"gradebook: {exc}; its students go to the other workers", file=sys.stderr, flush=True)
                    todo.append(i)  # graded again, elsewhere: once
                    continue
                finally:
                    fut.release()
                report(results[i])
        for i in sorted(killed):  # its workers died beside the others': again, alone
            again = alone(submissions[i])
            if i not in gave_up:
                again.reason = ("graded again alone (a Dask worker died while grading it beside the others)"
                                + (f"; {again.reason}" if again.reason else ""))
            results[i] = again
            report(again)
        done: list[StudentResult] = [r for r in results if r is not None]
        finish(done, submissions, alone, progress)
        return done
    finally:  # on every worker alive now, and here (a LocalCluster's workers, one restarting, are on this machine)
        with contextlib.suppress(Exception):
            client.run(_forget, token, on_error="ignore")
        _forget(token)


def _deaths(exc: BaseException) -> int:
    """Worker deaths a ``KilledWorker`` stands for: its scheduler's allowed failures, plus one."""
    return int(getattr(exc, "allowed_failures", 3)) + 1


def grade_class(submissions: Sequence[Submission], grading: StudentGrading, *, address: str | None, jobs: int,
                no_gpu: Callable[[], str | None] | None, share_measurements: bool = True,
                progress: Callable[[StudentResult], None] | None = None,
                say: Callable[[str], None] = print,
                env: dict[str, str] | None = None) -> tuple[list[StudentResult], int, str]:
    """The gradebook's ``--scheduler dask``: (the rows, the GPU slots at the start, where they
    were graded). ``no_gpu``: the probe run on every worker first (None: ``--allow-no-gpu``);
    ``env``: the students' environment on this machine's own LocalCluster (default: this
    process's), unused with ``address`` (each worker's own)."""
    paths = sorted({str(s.kernel_file.parent) for s in submissions if s.kernel_file is not None})
    paths += [str(grading.ini)] if grading.ini is not None else []
    with connect(address, jobs) as client:
        slots = check_workers(client, paths, no_gpu, say)
        where = (f"the Dask scheduler at {address}" if address else "a Dask LocalCluster on this machine") + \
            f" ({len(slots)} worker{'s' if len(slots) != 1 else ''}, {sum(slots.values()):g} {RESOURCE} slots)"
        say(f"gradebook: grading {len(submissions)} students on {where}")
        with contextlib.ExitStack() as stack:
            env = None if address else stack.enter_context(class_env(env, share_measurements, jobs))
            rows = grade_all_dask(submissions, grading, client=client, env=env,
                                  share_measurements=share_measurements, progress=progress)
        return rows, int(sum(slots.values())), where
