"""The gradebook on Dask distributed (``--scheduler dask``): a LocalCluster whose workers declare
GPU resources grades a class into the local pool's own rows, and each student's row is written
once when workers die under it. No GPU: the class is graded with --allow-no-gpu, and the workers'
deaths come from a fake runner that kills the worker process running it."""
from __future__ import annotations

import contextlib
import csv
import faulthandler
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from pytest_gemm.grading.classrun import StudentGrading
from pytest_gemm.grading.students import CRASHED, GRADED, MISSING
from pytest_gemm.grading.processes import RunOutcome
from pytest_gemm.grading.submissions import Submission
from pytest_gemm.model.categories import HARNESS_OUT_OF_MEMORY

COURSE = Path(__file__).resolve().parent.parent / "examples" / "course"
NEEDS_DASK = "the dask extra is not installed (pip install 'pytest-gemm[dask]'): its tests cannot run"


def _distributed() -> Any:
    return pytest.importorskip("distributed", reason=NEEDS_DASK)


def _no_gpu_env() -> dict[str, str]:
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="")  # no GPU here even on a GPU machine: quick, and the same
    for key in ("PYTEST_ADDOPTS", "PYTEST_GEMM_DISPATCH"):
        env.pop(key, None)
    return env


def _make_class(root: Path) -> Path:
    """Students of every kind a machine with no GPU tells apart: a CUDA kernel that compiles, one
    that does not, a Python launcher, a module that does not import, a folder with no kernel."""
    subs = root / "subs"
    shutil.copytree(COURSE / "submissions" / "alice", subs / "ann", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(COURSE / "submissions" / "alice", subs / "bea", ignore=shutil.ignore_patterns("__pycache__"))
    (subs / "bea" / "matmul.cu").write_text((subs / "bea" / "matmul.cu").read_text() + "\nthis is not C++;\n")
    (subs / "cid").mkdir()
    (subs / "cid" / "notes.txt").write_text("forgot the kernel")
    (subs / "dan").mkdir()
    (subs / "dan" / "kernel.py").write_text("from pytest_gemm import kernel\n\n\n@kernel()\ndef kernel(a, b, c):\n"
                                            "    c[...] = a @ b\n")
    (subs / "eve").mkdir()
    (subs / "eve" / "kernel.py").write_text("def kernel(:\n")
    (root / "course.ini").write_text("[pytest]\ngemm_weights =\n    compile = 10\n")
    return subs


VOLATILE = {"elapsed_s", "execution_time", "wall_s", "output_tail", "command", "time"}


def _stable(value: Any) -> Any:
    """The JSON gradebook without what differs between two runs of the same class anyway (times,
    the temporary results path in each command, pytest's output with its timings)."""
    if isinstance(value, dict):
        return {k: _stable(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [_stable(v) for v in value]
    return value


def test_a_local_dask_cluster_grades_a_class_into_the_local_pools_rows(tmp_path):
    _distributed()
    subs = _make_class(tmp_path)
    books = {}
    for scheduler in ("local", "dask"):
        done = subprocess.run([sys.executable, "-m", "pytest_gemm.grading.gradebook", str(subs), "--ini",
                               str(tmp_path / "course.ini"), "--out", str(tmp_path / f"{scheduler}.csv"), "--json",
                               str(tmp_path / f"{scheduler}.json"), "--jobs", "2", "--allow-no-gpu",
                               "--scheduler", scheduler], cwd=tmp_path, env=_no_gpu_env(), capture_output=True,
                              text=True, timeout=300)
        assert done.returncode == 0, done.stdout + done.stderr
        books[scheduler] = json.loads((tmp_path / f"{scheduler}.json").read_text())
    assert "on a Dask LocalCluster on this machine (1 worker, 2 GPU slots)" in done.stdout
    assert (tmp_path / "dask.csv").read_bytes() == (tmp_path / "local.csv").read_bytes()
    rows = {r["student"]: r for r in csv.DictReader((tmp_path / "dask.csv").open())}
    # the class is not all zeros: the rows that must agree differ from one another
    assert rows["ann"]["score"] == "10" and rows["ann"]["status"] == GRADED, rows["ann"]
    assert rows["bea"]["score"] == "0" and "matmul.cu" in rows["bea"]["reason"], rows["bea"]
    assert rows["cid"]["status"] == MISSING and rows["dan"]["status"] == GRADED and rows["eve"]["status"] == "error"
    local, dask = (_stable(books[s]) for s in ("local", "dask"))
    assert (local.pop("scheduler"), dask.pop("scheduler")) == ("local", "dask")
    assert dask == local  # every student's Gradescope results too


@contextlib.contextmanager
def _bounded(seconds: float):
    """A cluster that stops answering ends this test's process after ``seconds``, every
    thread's stack printed, instead of holding the run for ever (under xdist the worker is
    replaced and the test reported as failed): on a 2-core machine running 12 test workers,
    the dying-workers test once waited more than 10 minutes."""
    faulthandler.dump_traceback_later(seconds, exit=True)
    try:
        yield
    finally:
        faulthandler.cancel_dump_traceback_later()


def _results(score: float, *tags: str) -> dict[str, Any]:
    return {"score": score, "output": "", "tests": [{"name": "exact", "score": score, "max_score": 40,
                                                     "tags": ["exact", *tags]}],
            "extra_data": {"pytest_gemm": {"max_score": 40, "checks": {"exact": {"score": score}}}}}


def _builder(kernel_file, attr, results_path, **_):
    return [sys.executable, str(kernel_file), str(results_path)]


def _dying_runner(cmd, *, cwd, timeout, env):
    """A student's run, on a Dask worker: ``once`` kills its worker the first time it runs, ``killer``
    every time (as a kernel that brings down the process grading it would); ``oom``'s first run is
    the harness's out of memory; the others score 40.
    Each start and each finish is a line of ``runs.log`` beside the submissions, each run's working
    folder one of ``workdirs.log``."""
    student, folder = Path(cmd[1]).stem, Path(cmd[1]).parent
    with open(folder / "runs.log", "a") as log:
        log.write(f"start {student} {os.getpid()}\n")
    with open(folder / "workdirs.log", "a") as log:
        log.write(f"{cwd}\n")
    marker = folder / f"{student}.died"
    if student == "killer" or (student == "once" and not marker.exists()):
        marker.touch()
        time.sleep(0.5)  # the gradebook has fetched what this worker finished before
        os.kill(os.getpid(), signal.SIGKILL)  # the worker process, not a child of it
    oom = student == "oom" and not marker.exists()  # the harness ran out of GPU memory, the first time
    marker.touch()
    Path(cmd[2]).write_text(json.dumps(_results(0, HARNESS_OUT_OF_MEMORY) if oom else _results(40)))
    with open(folder / "runs.log", "a") as log:
        log.write(f"done {student} {os.getpid()}\n")
    return RunOutcome(0, False, "", 0.1)


def test_workers_that_die_mid_student_lose_no_student_and_count_none_twice(tmp_path, monkeypatch):
    distributed = _distributed()
    import dask

    from pytest_gemm.grading.dask_scheduler import DaskProblem, check_workers, close_quietly, grade_all_dask

    names = ["a", "once", "b", "killer", "oom", "c"]
    for name in names:
        (tmp_path / f"{name}.py").write_text("")
    subs = [Submission(name, tmp_path / f"{name}.py") for name in names]
    grading = StudentGrading.of_class(runner=_dying_runner, command_builder=_builder)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(Path(__file__).parent), os.environ.get("PYTHONPATH", "")]))
    # one allowed failure: the killer costs 4 worker starts, not 8; patient connections: on a loaded
    # CI machine a worker started again takes its time
    with _bounded(600), dask.config.set({"distributed.scheduler.allowed-failures": 1,
                                         "distributed.comm.timeouts.connect": "300s"}):
        cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, resources={"GPU": 1},
                                           memory_limit=0, dashboard_address=None, silence_logs=50)
        try:
            with distributed.Client(cluster) as client:
                rows = grade_all_dask(subs, grading, client=client)
                # the cluster is still up (each nanny starts its worker again) and still says what is wrong
                with pytest.raises(DaskProblem, match=r"Dask worker .* cannot see /no/such/submissions"):
                    check_workers(client, ["/no/such/submissions"], None)
        finally:
            close_quietly(cluster)
    assert [r.student for r in rows] == names  # each student once, in order: none lost, none twice
    by = {r.student: r for r in rows}
    for name in ("a", "once", "b", "oom", "c"):
        assert by[name].status == GRADED and by[name].score == 40, (name, by[name].reason)
    assert "graded again alone (the grader ran out of GPU memory the first time)" in by["oom"].reason
    killer = by["killer"]
    assert killer.status == CRASHED and killer.score == 0, killer.reason
    assert killer.reason.startswith("crashed: the Dask workers grading it died 4 times, first beside the "
                                    "others, then alone"), killer.reason  # (1 allowed failure + 1) twice
    assert killer.results["tests"] and killer.results["score"] == 0
    log = [line.split() for line in (tmp_path / "runs.log").read_text().splitlines()]
    once = [pid for what, who, pid in log if who == "once" and what == "start"]
    assert len(set(once)) >= 2, log  # it ran again, in another worker process
    # 4 deaths charged, 3 or 4 of them its own: Dask charges a death to every task the worker
    # held, and the killer may have been waiting on the worker that "once" brought down
    assert 3 <= [who for what, who, _ in log if what == "start"].count("killer") <= 4, log
    assert not [who for what, who, _ in log if what == "done" and who == "killer"]
    # the working folders of the runs whose worker was killed (its finally never ran) are gone too
    workdirs = (tmp_path / "workdirs.log").read_text().split()
    assert len(workdirs) == len([what for what, _, _ in log if what == "start"])
    parents = {Path(w).parent.name for w in workdirs}  # in one folder of the class's, which goes at the end
    assert len(parents) == 1 and parents.pop().startswith("pytest-gemm-grading-"), workdirs
    assert [w for w in workdirs if not Path(w).exists()] == workdirs, [w for w in workdirs if Path(w).exists()]


def _blind_here() -> None:
    """Run on one worker: it no longer sees any submission (a worker that joined without the shared folder)."""
    from pytest_gemm.grading import dask_scheduler

    dask_scheduler._can_see = lambda path: False


def _steady_runner(cmd, *, cwd, timeout, env):
    Path(cmd[2]).write_text(json.dumps(_results(40)))
    return RunOutcome(0, False, "", 0.1)


def test_a_worker_that_cannot_see_the_submissions_hands_its_students_to_the_others(tmp_path, monkeypatch, capsys):
    """A worker that joins later without the shared folder (cluster.adapt) cost the whole class: the
    gradebook stopped and wrote no file. Its students are graded on the other workers, each once."""
    distributed = _distributed()
    from pytest_gemm.grading.dask_scheduler import close_quietly, grade_all_dask

    names = [f"s{i}" for i in range(8)]
    for name in names:
        (tmp_path / f"{name}.py").write_text("")
    subs = [Submission(name, tmp_path / f"{name}.py") for name in names]
    grading = StudentGrading.of_class(runner=_steady_runner, command_builder=_builder)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(Path(__file__).parent), os.environ.get("PYTHONPATH", "")]))
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, resources={"GPU": 1},
                                       memory_limit=0, dashboard_address=None, silence_logs=50)
    try:
        with distributed.Client(cluster) as client:
            blind = sorted(client.scheduler_info()["workers"])[0]
            client.run(_blind_here, workers=[blind])
            rows = grade_all_dask(subs, grading, client=client)
    finally:
        close_quietly(cluster)
    assert [r.student for r in rows] == names and all(r.status == GRADED and r.score == 40 for r in rows), rows
    err = capsys.readouterr().err
    assert f"is not on Dask worker {blind}" in err and "its students go to the other workers" in err, err
    assert err.count("its students go to the other workers") == 1  # said once per worker


def test_without_dask_the_gradebook_says_how_to_install_it_and_the_local_pool_never_imports_it(tmp_path,
                                                                                             monkeypatch, capsys):
    from pytest_gemm.grading import gradebook

    (tmp_path / "subs" / "ann").mkdir(parents=True)
    (tmp_path / "subs" / "ann" / "kernel.py").write_text("")
    monkeypatch.setitem(sys.modules, "distributed", None)  # import distributed: ImportError
    code = gradebook.main([str(tmp_path / "subs"), "--out", str(tmp_path / "g.csv"), "--allow-no-gpu",
                           "--scheduler", "dask"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "pip install 'pytest-gemm[dask]'" in err[0], err
    assert not (tmp_path / "g.csv").exists()
    with pytest.raises(SystemExit):
        gradebook.main([str(tmp_path / "subs"), "--address", "tcp://head:8786"])
    assert "add --scheduler dask" in capsys.readouterr().err
    done = subprocess.run([sys.executable, "-c", "import sys, pytest_gemm.grading.gradebook as g; "
                           "print(sorted(m for m in sys.modules if m.split('.')[0] in ('dask', 'distributed')))"],
                          capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "[]", done.stdout + done.stderr
