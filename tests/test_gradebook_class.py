"""The gradebook grading a class: jobs spread over GPUs, a hanging student graded in seconds
with its per-check results, a student stopped at the per-student limit keeping the checks
that ran, a harness out of memory graded again instead of charged. Real pytest runs on the
fake GPU of ``tests/fakegpu.py``, or fake runners; no GPU needed."""
from __future__ import annotations

import csv
import json
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

import fakegpu
from pytest_gemm.grading.classrun import GpuSlots
from pytest_gemm.grading.students import ERROR, GRADED, TIMED_OUT
from pytest_gemm.grading.submissions import Submission
from pytest_gemm.grading.classrun import grade_all
from pytest_gemm.grading.processes import RunOutcome
from pytest_gemm.model import categories as cat


def _student(folder: Path, name: str, kernel: str) -> None:
    (folder / f"{name}.py").write_text(fakegpu.FAKE_KERNELS + f"\nkernel = {kernel}\n")


def _gradebook(tmp_path: Path, args: list[str], **env: str) -> tuple[subprocess.CompletedProcess[str], float]:
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "pytest_gemm.grading.gradebook", *args], cwd=tmp_path,
                          env=fakegpu.env(tmp_path, **env), capture_output=True, text=True, timeout=400)
    return done, time.monotonic() - started


def test_a_class_with_a_hanging_student_is_graded_in_seconds_with_every_check_in_its_row(tmp_path):
    subs = tmp_path / "subs"
    subs.mkdir()
    for name, kernel in [("alice", "ok"), ("carol", "hang"), ("bob", "wrong"), ("olga", "harness_oom")]:
        _student(subs, name, kernel)
    out = tmp_path / "book.json"
    done, took = _gradebook(tmp_path, [str(subs), "--out", str(tmp_path / "book.csv"), "--json", str(out),
                                       "--jobs", "3", "--", "-p", "fakegpu", "--gemm-shapes", "quick"])
    assert done.returncode == 0, done.stdout + done.stderr
    assert took < 150, f"{took:.0f} s"
    seeded = [line for line in done.stdout.splitlines() if line.startswith("gradebook: harness caches ")]
    # 4 students 3 at a time: the default (auto) would seed this confined class, but not on the fake GPU
    assert seeded == ["gradebook: harness caches not seeded: the checks are faked (PYTEST_GEMM_DISPATCH): nothing to "
                      "compile"], done.stdout
    book = {s["student"]: s for s in json.loads(out.read_text())["students"]}
    carol = book["carol"]
    assert carol["status"] == GRADED and carol["elapsed_s"] < 60, (carol["status"], carol["elapsed_s"])
    assert carol["score"] == 0 and "failed: timeout" in carol["reason"]
    tests = {t["name"].split(" (")[0]: t for t in carol["results"]["tests"]}
    assert "launch at 64x64x64 did not finish within 20 s" in tests["launch"]["output"]
    assert "not run: this kernel timed out in its first 3 checks" in tests["accuracy"]["output"]
    assert book["alice"]["status"] == GRADED and book["alice"]["score"] == 95  # alpha/beta (5) does not apply
    # (default options, full shapes: test_class_grading.py grades the same hang in under 60 s)
    assert book["bob"]["status"] == GRADED and "wrong_values" in book["bob"]["reason"]
    olga = book["olga"]  # the harness ran out of memory: graded again alone, then an error, not a score
    assert olga["status"] == ERROR and "ran out of GPU memory in some checks twice" in olga["reason"]
    rows = {r["student"]: r for r in csv.DictReader((tmp_path / "book.csv").open())}
    assert rows["carol"]["exact"] == "0" and rows["alice"]["exact"] == "40"
    assert "--jobs 3" in done.stdout


def _seconds_to_grade(tmp_path: Path, kernel: str) -> float:
    """Wall time of grading one student whose checks all finish at once, on this machine now:
    the budget of a test whose limit must let such work finish (under load, at -n 4 on 2 cores,
    it is several times the idle figure, so no fixed number of seconds holds)."""
    subs = tmp_path / f"baseline-{kernel}"
    subs.mkdir()
    _student(subs, "base", kernel)
    done, took = _gradebook(tmp_path, [str(subs), "--out", str(tmp_path / "base.csv"),
                                       "--", "-p", "fakegpu", "--gemm-shapes", "quick"])
    assert done.returncode == 0, done.stdout + done.stderr
    return took


def test_a_student_stopped_at_the_per_student_limit_keeps_the_checks_that_ran(tmp_path):
    # The limit must outlast the start-up and the small checks (measured: a whole run of a kernel
    # whose checks finish at once), and end inside the first 20 s hang.
    limit = max(8.0, round(1.5 * _seconds_to_grade(tmp_path, "ok") + 2, 1))
    if limit >= 19:
        pytest.skip(f"this machine is too loaded now: the per-student limit would be {limit:g} s, past the 20 s hang")
    subs = tmp_path / "subs"
    subs.mkdir()
    _student(subs, "hank", "hang_big")  # passes small shapes, hangs above 64^3 for 20 s each
    out = tmp_path / "book.json"
    done, took = _gradebook(tmp_path, [str(subs), "--out", str(tmp_path / "book.csv"), "--json", str(out),
                                       "--timeout", f"{limit:g}", "--", "-p", "fakegpu", "--gemm-shapes", "quick"])
    assert done.returncode == 0, done.stdout + done.stderr
    (hank,) = json.loads(out.read_text())["students"]
    assert hank["status"] == TIMED_OUT and took < limit + 30, (hank["status"], took, limit)
    assert f"still running after {limit:g} s" in hank["reason"] and "the checks that had run are scored" in hank["reason"]
    assert hank["checks"]["exact"] > 0  # 1x1x1 and 64x64x64 passed before the hang
    exact = next(t for t in hank["results"]["tests"] if t["name"].startswith("exact"))
    assert "2 of 2 passed" in exact["output"]


# ---- jobs and GPUs, with a fake runner ---------------------------------------------------------

def _results(score: float, tags: list[str] | None = None) -> dict[str, Any]:
    return {"score": score, "output": "", "tests": [{"name": "exact", "score": score, "max_score": 40,
                                                     "tags": ["exact", *(tags or [])]}],
            "extra_data": {"pytest_gemm": {"max_score": 40, "checks": {"exact": {"score": score}}}}}


def _fake_runner(behaviour: dict[str, Any], seen: list[tuple[str, str | None, float, float]]):
    lock = threading.Lock()

    def runner(cmd, *, cwd, timeout, env):
        student = Path(cmd[1]).stem
        started = time.monotonic()
        time.sleep(0.3)
        results = behaviour[student]() if callable(behaviour[student]) else behaviour[student]
        Path(cmd[2]).write_text(json.dumps(results))
        with lock:
            seen.append((student, env.get("CUDA_VISIBLE_DEVICES"), started, time.monotonic()))
        return RunOutcome(0 if results["score"] else 1, False, "", 0.3)

    return runner


def _builder(kernel_file, attr, results_path, **_):
    return [sys.executable, str(kernel_file), str(results_path)]


def test_jobs_spread_students_one_gpu_each(tmp_path):
    seen: list = []
    behaviour = {f"s{i}": _results(40) for i in range(6)}
    subs = [Submission(name, tmp_path / f"{name}.py") for name in behaviour]
    results = grade_all(subs, jobs=2, gpus=["0", "1"], runner=_fake_runner(behaviour, seen), command_builder=_builder)
    assert [r.student for r in results] == list(behaviour)
    for a in seen:  # two students at once never share a GPU when there are two
        for b in seen:
            if a is not b and a[2] < b[3] and b[2] < a[3]:
                assert a[1] != b[1], (a, b)
    assert {gpu for _, gpu, _, _ in seen} == {"0", "1"}
    seen.clear()
    grade_all(subs[:2], jobs=2, gpus=[], runner=_fake_runner(behaviour, seen), command_builder=_builder)
    assert {gpu for _, gpu, _, _ in seen} == {None}  # no GPU found: the environment is left as it is


def test_gpu_slots_pick_the_least_loaded_gpu():
    slots = GpuSlots(["0", "1"])
    assert [slots.acquire() for _ in range(3)] == ["0", "1", "0"]
    slots.release("1")
    assert slots.acquire() == "1"
    assert GpuSlots([]).acquire() is None


def test_a_harness_out_of_memory_is_graded_again_alone_and_kept_when_it_passes(tmp_path):
    seen: list = []
    attempts = {"n": 0}

    def once() -> dict[str, Any]:
        attempts["n"] += 1
        return _results(0, [cat.HARNESS_OUT_OF_MEMORY]) if attempts["n"] == 1 else _results(40)

    behaviour = {"a": _results(40), "b": once, "c": _results(20)}
    subs = [Submission(name, tmp_path / f"{name}.py") for name in behaviour]
    printed: list[str] = []
    results = grade_all(subs, jobs=3, gpus=["0"], runner=_fake_runner(behaviour, seen), command_builder=_builder,
                        progress=lambda r: printed.append(r.student))
    b = results[1]
    assert b.status == GRADED and b.score == 40 and "graded again alone" in b.reason
    assert [s for s, *_ in seen].count("b") == 2
    last_b = max((row for row in seen if row[0] == "b"), key=lambda row: row[2])
    assert all(last_b[2] >= row[3] for row in seen if row is not last_b)  # alone: after every other run
    assert sorted(printed) == ["a", "b", "c"]  # each student reported once, the final row


def test_the_default_jobs_fit_the_machine():
    from pytest_gemm.grading.classrun import JOBS_PER_GPU, default_jobs

    assert default_jobs(gpus=1, cores=16) == 12          # an H200 machine: 12 was faster than 16
    assert default_jobs(gpus=1, cores=2) == 1
    assert default_jobs(gpus=1, cores=64) == JOBS_PER_GPU  # one GPU: at most JOBS_PER_GPU students on it
    assert default_jobs(gpus=8, cores=128) == 96          # eight GPUs: the cores bound it
    assert default_jobs(gpus=2, cores=8) == 6
    assert default_jobs(gpus=0, cores=8) == 6             # no GPU: compile checks only, bound by the cores
    assert default_jobs(gpus=4, cores=1) == 1


def test_the_gradebook_without_jobs_uses_the_machines_default(tmp_path, monkeypatch, capsys):
    from pytest_gemm.grading import gradebook

    seen = {}

    def fake_grade_all(submissions, **kwargs):
        seen.update(kwargs)
        return []

    (tmp_path / "subs" / "ann").mkdir(parents=True)
    (tmp_path / "subs" / "ann" / "kernel.py").write_text("")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    monkeypatch.setattr(gradebook, "cpu_cores", lambda: 6)
    monkeypatch.setattr(gradebook, "grade_all", fake_grade_all)
    gradebook.main([str(tmp_path / "subs"), "--out", str(tmp_path / "g.csv"), "--allow-no-gpu"])
    assert seen["jobs"] == 4 and "with --jobs 4)" in capsys.readouterr().out
    gradebook.main([str(tmp_path / "subs"), "--out", str(tmp_path / "g.csv"), "--jobs", "3", "--allow-no-gpu"])
    assert seen["jobs"] == 3
