"""The gradebook's seed of the harness's CuPy kernels (grading/harness_seed.py): one trusted
priming run before a class graded confined, named to the students' runs; one line says whether
it was made and why not. No GPU: the gradebook's grading and the priming run are stood in for,
but for the priming command's own run on the fake GPU (tests/fakegpu.py)."""
from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from pathlib import Path

import pytest

import fakegpu
from pytest_gemm.checks import registry
from pytest_gemm.grading import gradebook, harness_seed, processes
from pytest_gemm.grading.processes import RunOutcome
from pytest_gemm.kernels import confine
from pytest_gemm.kernels.cache_seed import SEED_ENV
from pytest_gemm.measure.run_cache import CACHE_ENV


@pytest.fixture
def book(tmp_path, monkeypatch, capsys):
    """The gradebook's ``main`` on one student, its grading stood in for: what each grading saw
    (``graded``: the students' environment, and the files of the seed it names once the priming
    runs have written them) and each priming run (``primed``: its command and environment;
    ``outcome`` what it returns, after writing ``files`` into its CuPy cache; ``until_stopped``:
    it runs until the gradebook stops it). Confined students on a machine with a GPU, unless a
    test says otherwise; no fake dispatcher; the seed asked for (``PYTEST_GEMM_HARNESS_SEED=on``)."""
    (tmp_path / "subs" / "ann").mkdir(parents=True)
    (tmp_path / "subs" / "ann" / "kernel.py").write_text("")
    monkeypatch.delenv(harness_seed.DISPATCH_ENV, raising=False)
    monkeypatch.setenv(harness_seed.SWITCH_ENV, "on")  # the default (auto) seeds only a class of two rounds or more
    monkeypatch.delenv(SEED_ENV, raising=False)
    monkeypatch.setattr(confine, "resolve", lambda asked: "none" if asked == "none" else "bubblewrap")
    monkeypatch.setattr(gradebook, "no_gpu_problem", lambda: None)
    state = {"graded": [], "primed": [], "files": 3, "outcome": RunOutcome(0, False, "30 passed in 9.1s", 9.1),
             "until_stopped": False}

    def grade_all(submissions, **kwargs):
        env = kwargs["env"]
        seed = env.get(SEED_ENV)
        deadline = time.monotonic() + 10
        while seed and len(os.listdir(seed)) < state["files"] and time.monotonic() < deadline:
            time.sleep(0.01)  # the priming runs go on beside the class: wait for what they write
        state["graded"].append((env, seed and sorted(os.listdir(seed))))
        return []

    def run_with_limit(cmd, *, cwd, timeout, env, grace, stop):
        state["primed"].append((cmd, env))
        for i in range(state["files"]):
            Path(env["CUPY_CACHE_DIR"], f"{i:040x}.cubin").write_bytes(b"hash+cubin")
        if isinstance(state["outcome"], OSError):
            raise state["outcome"]
        if state["until_stopped"]:
            Path(env["CUPY_CACHE_DIR"], "tmpq8_w2ka").write_bytes(b"half")  # CuPy writing when it is stopped
            assert stop.wait(10)  # stopped when the class ends
            return RunOutcome(None, True, "", 3.0)
        return state["outcome"]

    monkeypatch.setattr(gradebook, "grade_all", grade_all)
    monkeypatch.setattr(harness_seed, "run_with_limit", run_with_limit)

    def main(*args: str) -> list[str]:
        assert gradebook.main([str(tmp_path / "subs"), "--out", str(tmp_path / "g.csv"), *args]) == 0
        return [line for line in capsys.readouterr().out.splitlines() if line.startswith("gradebook: harness")]
    state["main"] = main
    return state


STARTED = ("gradebook: harness caches seeded as they are compiled: 4 priming runs compile them beside the first "
           "students, and each confined student's cache starts as a copy of what they have compiled by then "
           "(PYTEST_GEMM_HARNESS_SEED=on)")


def test_a_confined_class_is_primed_once_and_its_students_start_from_the_seed(book):
    lines = book["main"]()
    assert lines == [STARTED, "gradebook: harness caches: 3 CuPy cache files compiled by the priming runs in 9.1 s"]
    runs = sorted((cmd[cmd.index("--gemm-kernel") + 1], harness_seed.PRIMING_ORDER in cmd)
                  for cmd, _ in book["primed"])
    assert runs == sorted((spec, backwards) for spec in harness_seed.PRIMING_KERNELS for backwards in (True, False))
    for cmd, env in book["primed"]:
        assert cmd[cmd.index("--gemm-confine") + 1] == "none"  # ours only: unconfined, its cache of its own
        assert cmd[cmd.index("--gemm-shapes") + 1] == "full"  # some CuPy kernels are compiled at some shapes only
        assert "speed" not in cmd[cmd.index("-k") + 1] and cmd[cmd.index("--gemm-bench-shape") + 1] == "256x256x256"
        assert env[CACHE_ENV] == book["graded"][0][0][CACHE_ENV]  # the class's roofs: measured once
    env = book["primed"][0][1]
    assert {env["CUPY_CACHE_DIR"] for _, env in book["primed"]} == {env["CUPY_CACHE_DIR"]}  # one seed, filled by all
    [(students, files)] = book["graded"]
    assert students[SEED_ENV] == env["CUPY_CACHE_DIR"] and len(files) == 3  # named, and there while they run
    assert "CUPY_CACHE_DIR" not in students or students["CUPY_CACHE_DIR"] != env["CUPY_CACHE_DIR"]
    assert not os.path.exists(env["CUPY_CACHE_DIR"])  # removed with the class


def test_priming_runs_still_going_when_the_class_ends_are_stopped_and_the_line_says_so(book):
    book["until_stopped"] = True
    assert book["main"]() == [STARTED, "gradebook: harness caches: 3 CuPy cache files compiled by the priming runs; "
                                       "the class ended before the priming runs did (3.0 s)"]
    assert book["graded"][0][1][:3] == [f"{i:040x}.cubin" for i in range(3)]  # the tmp file is not counted


@pytest.mark.parametrize("outcome, files, why", [
    (RunOutcome(None, True, "", 305.0), 2, "a priming run was still running after 300 s, so it was stopped"),
    (RunOutcome(1, False, "...\nFAILED exact-regtile2d-1x1x1\n1 failed, 29 passed in 9.0s\n", 9.0), 2,
     "a priming run failed (pytest exit status 1: 1 failed, 29 passed in 9.0s)"),
    (RunOutcome(0, False, "30 passed in 9.1s", 9.1), 0, "the priming runs compiled nothing"),
    (OSError(24, "Too many open files"), 0, "a priming run could not start ([Errno 24] Too many open files)"),
])
def test_a_priming_run_that_overruns_or_fails_is_said_after_the_class(book, outcome, files, why):
    """What the runs compiled is ours whether or not they passed: the students got what was there."""
    book["outcome"], book["files"] = outcome, files
    lines = book["main"]()
    assert lines == [STARTED, f"gradebook: harness caches: {files} CuPy cache files compiled by the priming runs; {why}"]
    [(students, seen)] = book["graded"]
    assert len(seen) == files
    assert len(book["primed"]) == 4 and not os.path.exists(book["primed"][0][1]["CUPY_CACHE_DIR"])


def test_a_run_is_stopped_when_asked_and_its_tree_with_it(tmp_path):
    """run_with_limit's ``stop``: how the gradebook ends the priming runs when the class is done."""
    stop = threading.Event()
    threading.Timer(0.5, stop.set).start()
    started = time.monotonic()
    run = processes.run_with_limit([sys.executable, "-c", "import time; time.sleep(60)"], cwd=tmp_path,
                                   timeout=60, grace=1.0, stop=stop)
    assert run.timed_out and run.returncode is None and time.monotonic() - started < 5
    done = processes.run_with_limit([sys.executable, "-c", "print('done')"], cwd=tmp_path, timeout=60,
                                    stop=threading.Event())
    assert (done.returncode, done.timed_out, done.output.strip()) == (0, False, "done")


def test_turned_off_there_is_no_priming_run_and_no_line(book, monkeypatch):
    monkeypatch.setenv(harness_seed.SWITCH_ENV, "off")
    assert book["main"]() == []
    assert book["primed"] == [] and SEED_ENV not in book["graded"][0][0]


@pytest.mark.parametrize("switch", ["auto", "", None])
def test_by_default_a_class_of_one_round_is_not_primed_and_one_of_two_rounds_is(book, monkeypatch, tmp_path, switch):
    """auto: the priming runs come before the first student; a class graded all at once compiles
    the same kernels in every student at the same time, so it would win nothing back."""
    if switch is None:
        monkeypatch.delenv(harness_seed.SWITCH_ENV)
    else:
        monkeypatch.setenv(harness_seed.SWITCH_ENV, switch)
    assert book["main"]("--jobs", "2") == [
        "gradebook: harness caches not seeded: its one student is graded in one round (2 at a time), each compiling "
        "them beside the others, as the priming runs would before them; PYTEST_GEMM_HARNESS_SEED=on seeds anyway"]
    assert book["primed"] == [] and SEED_ENV not in book["graded"][0][0]
    for name in ("bob", "cy"):
        (tmp_path / "subs" / name).mkdir()
        (tmp_path / "subs" / name / "kernel.py").write_text("")
    assert book["main"]("--jobs", "2")[0] == STARTED.replace("=on", "=" + (switch or "auto"))
    assert len(book["primed"]) == 4 and book["graded"][1][0][SEED_ENV]
    assert book["main"]("--jobs", "3")[0].startswith("gradebook: harness caches not seeded: its 3 students are graded "
                                                     "in one round (3 at a time)")


@pytest.mark.parametrize("args, env, why", [
    ((), {harness_seed.SWITCH_ENV: "of"}, "PYTEST_GEMM_HARNESS_SEED='of' is none of auto, on and off; set it to "
                                          "auto (the default: a class graded in more than one round), on (any "
                                          "confined class) or off (none)"),
    (("--", "--gemm-confine", "none"), {}, "the students run unconfined, so they share this machine's CuPy cache "
                                           "already"),
    ((), {harness_seed.DISPATCH_ENV: "fakegpu:run_check"}, "the checks are faked (PYTEST_GEMM_DISPATCH): nothing "
                                                            "to compile"),
])
def test_without_a_reason_to_prime_the_gradebook_does_not_and_says_why(book, monkeypatch, args, env, why):
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert book["main"](*args) == [f"gradebook: harness caches not seeded: {why}"]
    assert book["primed"] == [] and SEED_ENV not in book["graded"][0][0]


def test_no_seed_is_made_where_a_sandbox_could_read_it(book, monkeypatch):
    monkeypatch.setattr(confine, "exposed_lock_dir", lambda folder: "/usr")  # a TMPDIR inside what sandboxes read
    [line] = book["main"]()
    assert line.startswith("gradebook: harness caches not seeded: its folder ") and " would be inside /usr, " in line
    assert book["primed"] == [] and SEED_ENV not in book["graded"][0][0]


def test_with_no_usable_gpu_the_gradebook_does_not_prime_and_grades_as_before(book, monkeypatch):
    monkeypatch.setattr(gradebook, "no_gpu_problem", lambda: "no usable GPU: no NVIDIA driver")
    assert book["main"]("--allow-no-gpu") == ["gradebook: harness caches not seeded: no usable GPU: no NVIDIA driver"]
    assert book["primed"] == [] and SEED_ENV not in book["graded"][0][0]


def test_what_the_students_confinement_is_and_a_remote_dask_cluster_is_not_primed(monkeypatch):
    assert harness_seed.students_confinement(["-x", "--gemm-confine", "landlock"]) == "landlock"
    assert harness_seed.students_confinement(["--gemm-confine=none", "-q"]) == "none"
    assert harness_seed.students_confinement(["-k", "exact"]) == "auto"  # a grading run's default
    monkeypatch.setattr(confine, "resolve", lambda asked: "bubblewrap")
    why = harness_seed.why_no_seed([], {}, remote="tcp://head:8786", no_gpu=None)
    assert why == "the Dask workers of tcp://head:8786 may be other machines, with CuPy caches of their own"


def test_the_priming_runs_run_every_check_but_sweep_and_compile_at_every_shape_on_both_kernels(tmp_path):
    """The commands themselves, on the fake GPU (no compile there, so no seed): every check of the
    fp32 and the fp16 kernel ran in two runs each, one last first and one in order, but the sweep and
    compile checks, the exact check at every
    shape of the full set (primed at the quick shapes only, confined students still compiled at
    16^3, 31^3, 500x700x1, 1x128x1 on the H100 at f47b585)."""
    log = tmp_path / "checks.log"
    env = fakegpu.env(tmp_path, PYTEST_ADDOPTS="-p fakegpu", FAKEGPU_LOG=str(log))
    folder = tmp_path / "seed"
    folder.mkdir()
    files, seconds, why = harness_seed.Priming(folder, env, timeout=120).finish(stop=False)  # to their end
    assert (files, why) == (0, "the priming runs compiled nothing"), why
    runs: dict[tuple[str, str], list[str]] = {}  # (kernel, its run's process): the checks, as they ran
    for line in log.read_text().splitlines():
        kernel, check, pid = line.split()[:3]
        runs.setdefault((kernel, pid), []).append(check)
    assert sorted(kernel for kernel, _ in runs) == ["regtile2d", "regtile2d", "wmma-fp16", "wmma-fp16"]  # two each
    ran = {kernel: checks for (kernel, _), checks in runs.items()}  # either run of each: they run the same checks
    import reference_kernels
    from pytest_gemm.checks import cases

    def expected(kernel) -> set[str]:  # every check that applies to it but the two left out
        return {"prepare"} | {c.name for c in registry.CHECKS if c.name not in ("sweep", "compile")
                              and (c.applies is None or c.applies(kernel))}
    assert {k: set(v) for k, v in ran.items()} == {"regtile2d": expected(reference_kernels.regtile2d),
                                                  "wmma-fp16": expected(reference_kernels.wmma_fp16)}, ran
    assert {"alphabeta", "beta_zero", "speed"} <= set(ran["regtile2d"])  # the fp32 kernel takes alpha and beta
    assert ran["regtile2d"].count("exact") == len(cases.EXACT_SHAPES)  # the full set, not the quick one
    for kernel in ran:  # the same checks in both runs: one last first (the students' later checks first), one in order
        [one, other] = [checks for (name, _), checks in runs.items() if name == kernel]
        assert sorted(one) == sorted(other), kernel
        natural = [c.name for c in registry.CHECKS if c.name in one]
        orders = sorted(list(dict.fromkeys(c for c in checks if c != "prepare")) for checks in (one, other))
        assert orders == sorted([natural, natural[::-1]]), (kernel, orders)


def test_the_students_of_this_machines_dask_cluster_are_named_the_seed(book, monkeypatch):
    from pytest_gemm.grading import dask_scheduler
    from pytest_gemm.grading.classrun import StudentGrading

    envs = []

    def grade_class(submissions, grading, **kwargs):  # the gradebook's call
        envs.append(kwargs["env"])
        return [], 2, "a Dask LocalCluster"

    def grade_all_dask(submissions, grading, **kwargs):  # grade_class's, for its LocalCluster's students
        envs.append(kwargs["env"])
        return []

    monkeypatch.setattr(gradebook, "grade_class", grade_class)
    assert book["main"]("--scheduler", "dask")[0] == STARTED
    assert envs[0][SEED_ENV] == book["primed"][0][1]["CUPY_CACHE_DIR"]
    monkeypatch.setattr(dask_scheduler, "connect", lambda address, jobs: contextlib.nullcontext(None))
    monkeypatch.setattr(dask_scheduler, "check_workers", lambda *args: {"worker": 2.0})
    monkeypatch.setattr(dask_scheduler, "grade_all_dask", grade_all_dask)
    dask_scheduler.grade_class([], StudentGrading.of_class(), address=None, jobs=2, no_gpu=None,
                               env={SEED_ENV: "/the/seed"}, say=lambda line: None)
    assert envs[1][SEED_ENV] == "/the/seed"
