"""The class and scale benchmarks' own logic, with no GPU: the generated class and kernels,
the comparison with a solo run, the out-of-memory finder."""
from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import pytest

from suite_helpers import load_declarations

REPO = Path(__file__).resolve().parent.parent
bench = load_declarations(REPO / "tools" / "class_benchmark.py", "class_benchmark")
scale = load_declarations(REPO / "tools" / "scale_benchmark.py", "scale_benchmark")


def test_a_class_of_100_has_realistic_proportions_and_every_kind_early():
    plan = bench.class_plan(100)
    kinds = Counter(kind for _, _, kind in plan)
    assert kinds == {"correct": 55, "slow": 15, "wrong": 15, "hanging": 5, "faulting": 10}
    assert len({s for s, _, _ in plan}) == 100
    assert {kind for _, _, kind in plan[:6]} == set(kinds)  # a prefix is a small class of its own
    assert Counter(kind for _, _, kind in bench.class_plan(7)).total() == 7


def test_the_generated_class_loads_with_one_distinct_kernel_per_student(tmp_path, monkeypatch):
    from pytest_gemm.kernels.loader import load_spec

    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    plan = bench.make_class(tmp_path, 12)
    names = []
    for student, template, _ in plan:
        assert (tmp_path / student / "kernel.py").is_file()
        (k,) = load_spec(f"{tmp_path / student / 'kernel.py'}:kernel", tmp_path)
        assert k.name.startswith(f"{student} (")
        names.append(k.name)
    assert len(set(names)) == 12
    carol = next(s for s, t, _ in plan if t == "carol")
    assert "blockDim.x / 32" in (tmp_path / carol / "matmul.cu").read_text()  # the hang is kept


def test_compare_needs_identical_correctness_and_speed_within_tolerance():
    def row(score, speed_points, fraction, status="graded"):
        return {"score": score, "checks": {"exact": 40, "speed": speed_points}, "fraction_of_cublas": fraction,
                "status": status}

    class_rows = {"a": row(95.5, 10.5, 0.210), "b": row(80, 5, 0.1), "c": row(0, 0, None, "graded")}
    solo_rows = {"a": row(95.3, 10.3, 0.206), "b": row(85, 5, 0.1), "c": row(0, 0, None)}
    lines = {line["student"]: line for line in bench.compare(class_rows, solo_rows, 0.02)}
    assert lines["a"]["same_correctness"] and lines["a"]["speed_within"]  # 0.210 / 0.206 = 1.019
    assert not lines["b"]["same_correctness"]
    assert lines["c"]["speed_ratio"] is None and lines["c"]["speed_within"]
    assert not bench.compare({"a": row(95, 10, 0.25)}, {"a": row(95, 10, 0.2)})[0]["speed_within"]


def test_solo_pick_takes_one_of_each_kind_first():
    plan = bench.class_plan(40)
    picked = bench.solo_pick(plan, 5)
    kinds = {kind for s, _, kind in plan if s in picked}
    assert len(picked) == 5 and kinds == {"correct", "slow", "wrong", "hanging", "faulting"}


def test_the_scale_module_has_the_ladder_and_distinct_copies(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    (tmp_path / "scale_kernels.py").write_text(scale.KERNELS_MODULE.format(count=64))
    module = load_declarations(tmp_path / "scale_kernels.py", "scale_kernels_test")
    from reference_kernels import LADDER

    names = [k.name for k in module.KERNELS]
    assert len(names) == 64 == len(set(names))
    assert names[:len(LADDER)] == [k.name for k in LADDER]
    copy = next(k for k in module.KERNELS if k.name.endswith("-copy1"))
    original = next(k for k in LADDER if k.name == copy.name.removesuffix("-copy1"))
    assert copy.source_path() == original.source_path() and copy.options == original.options


def test_out_of_memory_checks_are_found_by_category_or_message():
    report = {"kernels": [{"name": "k", "checks": [
        {"check": "speed", "shape": [4096] * 3, "category": "fault",
         "message": "[fault] speed raised cupy.cuda.memory.OutOfMemoryError: Out of memory allocating"},
        {"check": "exact", "shape": [1, 1, 1], "category": "harness_out_of_memory", "message": "..."},
        {"check": "exact", "shape": [2, 2, 2], "category": None, "message": None}]}]}
    found = scale.out_of_memory_checks(report)
    assert len(found) == 2 and found[0].startswith("k: speed [4096, 4096, 4096]")


def test_the_benchmarks_say_how_to_run_them():
    for module in (bench, scale):
        assert "python tools/" in (module.__doc__ or "")
    with pytest.raises(SystemExit):
        bench.main(["--help"])


def test_again_pick_takes_every_wrong_student_first_then_one_of_each_kind():
    plan = bench.class_plan(100)
    picked = bench.again_pick(plan, 20)
    wrong = [s for s, _, kind in plan if kind == "wrong"]
    assert picked[:15] == wrong and len(picked) == 20 == len(set(picked))
    assert {kind for s, _, kind in plan if s in picked[15:]} == {"correct", "slow", "hanging", "faulting"}


def _student(elapsed: float, **time: float) -> dict:
    return {"elapsed_s": elapsed, "results": {"extra_data": {"pytest_gemm": {"time": dict(
        time, start={"cuda_context_s": time.get("start_s", 0.0) / 2})}}}}


def test_time_by_kind_averages_where_each_kinds_seconds_went():
    plan = [("a", "alice", "correct"), ("b", "alice", "correct"), ("d", "dave", "faulting")]
    rows = {"a": _student(30.0, wall_s=25.0, lock_wait_s=4.0, start_s=2.0, process_starts=1),
            "b": _student(40.0, wall_s=35.0, lock_wait_s=6.0, start_s=4.0, process_starts=1),
            "d": _student(12.0, wall_s=9.0, start_s=6.0, process_starts=3)}
    got = bench.time_by_kind(rows, plan)
    assert got["correct"]["students"] == 2 and got["correct"]["elapsed_max_s"] == 40.0
    assert got["correct"]["lock_wait_s"] == 5.0 and got["correct"]["other_s"] == 5.0
    assert got["correct"]["start.cuda_context_s"] == 1.5
    assert got["faulting"]["process_starts"] == 3.0
    assert not any(key.startswith("alone.") for line in got.values() for key in line)  # none was timed


def test_time_by_kind_averages_the_speed_holds_steps_over_the_students_timed():
    plan = [("a", "alice", "correct"), ("b", "alice", "correct"), ("c", "alice", "correct")]
    rows = {name: _student(30.0, wall_s=25.0) for name in "abc"}
    rows["a"]["results"]["extra_data"]["pytest_gemm"]["speed_alone_s"] = {"uploads": 0.2, "timed": 0.5}
    rows["b"]["results"]["extra_data"]["pytest_gemm"]["speed_alone_s"] = {"uploads": 0.4, "timed": 0.7, "verify": 0.1}
    got = bench.time_by_kind(rows, plan)["correct"]  # c has none: its speed check did not time
    assert (got["alone.uploads"], got["alone.timed"], got["alone.verify"]) == pytest.approx((0.3, 0.6, 0.05))


def test_targets_say_which_are_met():
    by_kind = {"faulting": {"students": 10, "elapsed_max_s": 58.0, "elapsed_mean_s": 20.0},
               "hanging": {"students": 5, "elapsed_max_s": 61.0, "elapsed_mean_s": 50.0}}
    solo = [{"same_correctness": True, "speed_within": True, "speed_ratio": 1.004}]
    again = [{"same_correctness": True}, {"same_correctness": False}]
    met = bench.targets(119.0, 12, 100, by_kind, solo, again, 0.005)
    assert [ok for ok, _ in met] == [True, True, False, True, False]
    assert met[0][1] == "class: 100 students in 119.0 s with the gradebook's defaults (--jobs 12); target <= 120 s"
    assert "worst 0.40 %" in met[3][1] and "identical for 1 of 2" in met[4][1]
    assert not bench.targets(121.0, 12, 100, {}, [], [], 0.005)[0][0]  # issue 47's 120 s, not issue 26's 300


def test_the_course_benchmark_runs_the_readmes_command_and_says_whether_it_met_60_s(tmp_path, capsys):
    course = load_declarations(REPO / "tools" / "course_benchmark.py", "course_benchmark")
    cmd = course.command(tmp_path)
    assert cmd[1:] == ["-m", "pytest_gemm.grading.gradebook", str(REPO / "examples/course/submissions"), "--attr",
                       "kernel", "--ini", str(REPO / "examples/course/pytest.ini"), "--out", str(tmp_path / "g.csv"),
                       "--json", str(tmp_path / "g.json")]
    assert "--jobs" not in cmd  # the gradebook's defaults
    book = {"jobs": 12, "students": [{"student": "alice", "status": "graded", "score": 92.8, "max_score": 100,
                                      "elapsed_s": 41.0}]}
    met, lines = course.summary(book, 58.0, 60.0)
    assert met and lines == ["  alice: graded, 92.8 / 100 in 41.0 s",
                             "  MET   course: 1 students in 58.0 s with the gradebook's defaults (--jobs 12); "
                             "target <= 60 s"]
    assert not course.summary(book, 60.5, 60.0)[0]
    with pytest.raises(SystemExit):  # issue 47's target is the default, not issue 26's 90 s
        course.main(["--help"])
    assert "(default 60)" in capsys.readouterr().out


def test_the_class_pass_can_log_the_gpu_lock_and_say_where_the_gpu_time_went(tmp_path, monkeypatch):
    import json
    import subprocess

    seen: dict = {}

    def run(cmd, check, env):
        seen["env"] = env
        out = Path(cmd[cmd.index("--json") + 1])
        out.write_text(json.dumps({"students": [], "jobs": 12}))
        Path(env["PYTEST_GEMM_LOCK_LOG"]).write_text(json.dumps(
            {"pid": 1, "kind": "x", "what": "speed", "asked": 0.0, "held": 0.5, "released": 1.5}) + "\n")
        return subprocess.CompletedProcess(cmd, 0)

    monkeypatch.setattr(bench.subprocess, "run", run)
    log = tmp_path / "class-lock.jsonl"
    log.write_text("stale\n")  # an earlier pass's log is not mixed in
    rows, _, jobs = bench.grade(tmp_path, tmp_path / "class.json", None, [], None, log)
    assert rows == {} and jobs == 12 and seen["env"]["PYTEST_GEMM_LOCK_LOG"] == str(log)
    assert "alone (timed checks): 1 holds, 1.0 s held (67 % of the span)" in bench.lock_summary(log)


def test_the_class_through_dask_is_compared_with_the_local_pool_on_grades_and_wall_time(tmp_path, monkeypatch):
    import json
    import subprocess

    def row(score, speed_points, fraction, status="graded"):
        return {"score": score, "checks": {"exact": 40, "speed": speed_points}, "fraction_of_cublas": fraction,
                "status": status}

    local = {"a": row(95.3, 10.3, 0.206), "b": row(0, 0, None, "timed out")}
    same = bench.scheduler_targets({"a": row(95.4, 10.4, 0.207), "b": row(0, 0, None, "timed out")}, 110.0,
                                   local, 100.0, 0.02)
    assert [ok for ok, _ in same] == [True, True, True]
    assert "correctness identical for 2, whole score identical for 1" in same[0][1]
    assert "110.0 s through Dask, 100.0 s on the local pool (x 1.100)" in same[2][1]
    worse = bench.scheduler_targets({"a": row(95.3, 10.3, 0.206), "b": row(0, 0, None, "crashed")}, 116.0,
                                    local, 100.0, 0.02)
    assert [ok for ok, _ in worse] == [False, True, False]  # a status differs; 16 % slower
    seen: list = []

    def run(cmd, check, env):
        seen.append((cmd, (env or {}).get("CUPY_CACHE_DIR")))
        Path(cmd[cmd.index("--json") + 1]).write_text(json.dumps({"students": [], "jobs": 12}))
        return subprocess.CompletedProcess(cmd, 0)

    monkeypatch.setattr(bench.subprocess, "run", run)
    bench.grade(tmp_path, tmp_path / "class.json", 12, [], None, scheduler="dask", cupy_cache=tmp_path / "c1")
    bench.grade(tmp_path, tmp_path / "local.json", 12, [], None, cupy_cache=tmp_path / "c2")
    (dask_cmd, dask_cache), (local_cmd, local_cache) = seen
    assert dask_cmd[dask_cmd.index("--scheduler") + 1] == "dask" and "--scheduler" not in local_cmd
    assert (dask_cache, local_cache) == (str(tmp_path / "c1"), str(tmp_path / "c2"))  # neither pass warms the other
