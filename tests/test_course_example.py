"""The course example and the gradebook: every student graded in its own process, none able
to take the gradebook (or another student) down. Runs with no GPU: CUDA_VISIBLE_DEVICES=""
makes every GPU check skip even on a GPU machine."""
from __future__ import annotations

import csv
import inspect
import json
import re
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from suite_helpers import nvrtc_missing

from pytest_gemm.grading.gradebook_files import check_columns, write_csv, write_json
from pytest_gemm.grading.students import CRASHED, ERROR, GRADED, MISSING, TIMED_OUT, StudentResult
from pytest_gemm.grading.submissions import Submission, build_command, find_submissions
from pytest_gemm.grading.classrun import grade_all
from pytest_gemm.grading.gradebook import main

REPO = Path(__file__).resolve().parent.parent
COURSE = REPO / "examples" / "course"
STUDENTS = ["alice", "bob", "carol", "dave", "erin"]

# Until plugin.py defines --gemm-gradescope, this -p plugin does what its wiring does.
SHIM = '''
import pytest

def pytest_addoption(parser):
    parser.getgroup("gemm").addoption("--gemm-gradescope", default=None)
    parser.addini("gemm_weights", type="linelist", default=[], help="points per check")
    parser.addini("gemm_visibility", type="linelist", default=[], help="visibility per check")
    parser.addini("gemm_performance_threshold", default="", help="fraction of cuBLAS")

@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session):
    config = session.config
    path = config.getoption("gemm_gradescope")
    if path and not hasattr(config, "workerinput"):
        from pytest_gemm.grading.gradescope import GradingConfig, write_results
        from pytest_gemm.runner.session import state
        st = state(config)
        write_results(path, st.results, GradingConfig.from_ini(config.getini),
                      kernels=[str(k.name) for k in st.kernels] if st.user_kernels else None)
'''


def _plugin_has_gradescope_option() -> bool:
    import pytest_gemm.plugin

    return "--gemm-gradescope" in inspect.getsource(pytest_gemm.plugin)


@pytest.fixture
def no_gpu_env(tmp_path):
    """(environment, extra pytest args) for grading with no usable GPU."""
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="")
    env.pop("PYTEST_ADDOPTS", None)
    extra: list[str] = []
    if not _plugin_has_gradescope_option():
        shim_dir = tmp_path / "shim"
        shim_dir.mkdir()
        (shim_dir / "gemm_gradescope_shim.py").write_text(SHIM)
        env["PYTHONPATH"] = os.pathsep.join([str(shim_dir), env.get("PYTHONPATH", "")])
        extra = ["-p", "gemm_gradescope_shim"]
    return env, extra


def _snapshot(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if "__pycache__" not in p.parts}


def _gradebook(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest_gemm.grading.gradebook", "--allow-no-gpu", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


# ---- the course example, end to end -------------------------------------------------

def test_the_course_example_is_graded_into_one_row_per_student(tmp_path, no_gpu_env):
    env, extra = no_gpu_env
    before = _snapshot(COURSE)
    out_csv, out_json = tmp_path / "gradebook.csv", tmp_path / "gradebook.json"
    done = _gradebook([str(COURSE / "submissions"), "--attr", "kernel", "--ini", str(COURSE / "pytest.ini"),
                       "--out", str(out_csv), "--json", str(out_json), "--timeout", "120", "--jobs", "5",
                       "--logs", str(tmp_path / "logs"), "--", *extra], env, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Traceback" not in done.stdout + done.stderr

    rows = list(csv.DictReader(out_csv.open()))
    assert [r["student"] for r in rows] == STUDENTS
    assert set(rows[0]) >= {"student", "score", "max_score", "exact", "coverage", "guards", "deterministic",
                            "accuracy", "speed", "tflops", "fraction_of_cublas", "status"}
    book = json.loads(out_json.read_text())
    assert [s["student"] for s in book["students"]] == STUDENTS
    for row, student in zip(rows, book["students"]):
        # with no GPU every GPU check skips: graded, 0 points, and it says so
        assert row["status"] == GRADED, row
        assert float(row["score"]) == 0 and float(row["max_score"]) == 100  # the course's weights
        assert "no usable GPU" in row["reason"]
        results = student["results"]
        assert "no usable GPU" in results["output"] and "leaderboard" not in results
        assert {t["visibility"] for t in results["tests"] if t["name"].startswith("speed")} == {"after_published"}
        assert (tmp_path / "logs" / f"{row['student']}.log").is_file()
    if nvrtc_missing() is None:  # NVRTC works here: the CUDA C submissions were compile-checked for real
        for row in rows[:4]:
            claimed = re.search(r"compiles for (\d+) of (\d+) architectures", row["reason"])
            assert claimed and claimed.group(1) == claimed.group(2) and int(claimed.group(1)) >= 5, row
    assert _snapshot(COURSE) == before  # grading leaves the course folder as it was


def test_broken_submissions_cost_only_their_own_row(tmp_path, no_gpu_env):
    env, extra = no_gpu_env
    tmp_path.chmod(0o755)  # graded confined: run by root, the submission is read as a user of its own
    subs = tmp_path / "subs"
    (subs / "frank").mkdir(parents=True)
    (subs / "frank" / "kernel.py").write_text((COURSE / "submissions" / "alice" / "kernel.py").read_text())
    (subs / "frank" / "matmul.cu").write_text(
        'extern "C" __global__ void matmul(const float* A, const float* B, float* C, int M, int N, int K)'
        " { not_declared; }\n")
    (subs / "gina.py").write_text("import os\nos._exit(3)\n")       # kills pytest while it loads the kernel
    (subs / "hank.py").write_text("x = 1\n")                        # no kernel attribute
    (subs / "ivan").mkdir()
    (subs / "ivan" / "main.py").write_text("")                      # not kernel.py
    out_csv = tmp_path / "book.csv"
    done = _gradebook([str(subs), "--out", str(out_csv), "--timeout", "120", "--jobs", "4", "--", *extra],
                      env, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    rows = {r["student"]: r for r in csv.DictReader(out_csv.open())}
    assert list(rows) == ["frank", "gina", "hank", "ivan"]
    assert all(float(r["score"]) == 0 for r in rows.values())
    # its import runs in the confined child that reads declarations, not in pytest: pytest lives and says so
    assert rows["gina"]["status"] == ERROR and "status 3" in rows["gina"]["reason"], rows["gina"]
    assert rows["hank"]["status"] == ERROR and "has no attribute 'kernel'" in rows["hank"]["reason"]
    assert rows["ivan"]["status"] == MISSING and "no kernel.py" in rows["ivan"]["reason"]
    assert "see --file" in rows["ivan"]["reason"]
    if "cuda.bindings" in subprocess.run([sys.executable, "-c", "import cuda.bindings; print('cuda.bindings')"],
                                         capture_output=True, text=True).stdout:
        assert rows["frank"]["status"] == ERROR and "not_declared" in rows["frank"]["reason"], rows["frank"]


# ---- the pieces, with no pytest run -------------------------------------------------

def test_the_course_has_five_students_each_with_a_kernel_and_its_cuda_source():
    subs = find_submissions(COURSE / "submissions")
    assert [s.student for s in subs] == STUDENTS
    for s in subs:
        assert s.kernel_file is not None and s.kernel_file.name == "kernel.py"
        assert (s.kernel_file.parent / "matmul.cu").is_file()
    assert (COURSE / "starter" / "kernel.py").is_file() and (COURSE / "starter" / "matmul.cu").is_file()


def test_the_course_kernels_load_without_a_gpu(monkeypatch):
    from pytest_gemm.kernels.loader import load_spec

    monkeypatch.setattr(sys, "dont_write_bytecode", True)  # leave the example folders clean

    for spec in [f"{COURSE / 'starter' / 'kernel.py'}:kernel",
                 *[f"{COURSE / 'submissions' / s / 'kernel.py'}:kernel" for s in STUDENTS]]:
        (k,) = load_spec(spec, REPO)
        assert k.precision == "fp32"


def test_build_command():
    cmd = build_command(Path("/subs/alice/kernel.py"), "kernel", Path("/tmp/x/results.json"), check_timeout=30,
                        ini=Path("/course/pytest.ini"), extra_args=["-x", "-k", "exact"], python="/py")
    assert cmd == ["/py", "-m", "pytest", "--gemm-kernel", "/subs/alice/kernel.py:kernel",
                   "--gemm-gradescope", "/tmp/x/results.json", "--gemm-timeout", "30", "-p", "no:cacheprovider",
                   "-p", "gemm", "-q", "-c", "/course/pytest.ini", "--rootdir", "/course", "-x", "-k", "exact"]
    plain = build_command("k.py", "mine", "r.json", check_timeout=None)
    assert plain[0] == sys.executable and plain[3:] == ["--gemm-kernel", "k.py:mine", "--gemm-gradescope", "r.json",
                                                        "-p", "no:cacheprovider", "-p", "gemm", "-q"]


FAKE_STUDENT = textwrap.dedent("""
    import json, subprocess, sys, time
    mode, results = sys.argv[1], sys.argv[2]
    if mode == "hang":
        # a grandchild in its own session, like the plugin's kernel sandbox, then hang
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], start_new_session=True)
        open(sys.argv[3], "w").write(str(child.pid))
        time.sleep(120)
    elif mode == "exit":
        print("bye"); sys.exit(3)
    elif mode == "segv":
        import os, signal; os.kill(os.getpid(), signal.SIGSEGV)
    else:
        json.dump({"score": 7.5, "output": "ok", "tests": [{"name": "exact", "score": 7.5, "max_score": 10}],
                   "extra_data": {"pytest_gemm": {"max_score": 10, "checks": {"exact": {"score": 7.5}},
                                                  "tflops": 1.5, "fraction_of_cublas": 0.03}}}, open(results, "w"))
""")


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="the process-tree kill is checked through /proc (Linux)")
def test_a_hung_student_is_killed_after_the_limit_and_the_next_student_is_still_graded(tmp_path):
    fake = tmp_path / "fake_student.py"
    fake.write_text(FAKE_STUDENT)
    pid_file = tmp_path / "grandchild.pid"

    def builder(kernel_file, attr, results_path, **_):
        return [sys.executable, str(fake), Path(kernel_file).stem, str(results_path), str(pid_file)]

    subs = [Submission(name, tmp_path / f"{mode}.py") for name, mode in
            [("carol", "hang"), ("alice", "ok"), ("gina", "exit"), ("sam", "segv")]]
    start = time.monotonic()
    results = grade_all(subs, timeout=3, command_builder=builder)
    assert time.monotonic() - start < 30
    by = {r.student: r for r in results}
    assert [r.student for r in results] == ["carol", "alice", "gina", "sam"]
    carol = by["carol"]
    assert carol.status == TIMED_OUT and carol.score == 0 and carol.returncode is None
    assert "timed out: still running after 3 s" in carol.reason
    assert 2.5 < carol.elapsed_s < 20
    assert carol.results["score"] == 0 and "timed out" in carol.results["output"]
    assert carol.max_score == 10  # the max score the graded students had
    grandchild = int(pid_file.read_text())
    deadline = time.monotonic() + 5
    while _alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(grandchild), "the hung student's own-session child survived"
    alice = by["alice"]
    assert alice.status == GRADED and alice.score == 7.5 and alice.checks == {"exact": 7.5}
    assert alice.tflops == 1.5 and alice.fraction_of_cublas == 0.03
    assert by["gina"].status == CRASHED and "exited with status 3" in by["gina"].reason and "bye" in by["gina"].reason
    assert by["sam"].status == CRASHED and "SIGSEGV" in by["sam"].reason


def test_the_gradebook_files(tmp_path):
    rows = [StudentResult("alice", GRADED, 87.5, 100, "", {"exact": 40, "speed": 7.5}, 8.1, 0.16),
            StudentResult("carol", TIMED_OUT, 0, 100, "timed out, after 900 s")]
    columns = check_columns(rows)
    assert columns == ["exact", "speed"]
    write_csv(tmp_path / "g.csv", rows, columns)
    got = list(csv.DictReader((tmp_path / "g.csv").open()))
    assert got[0] == {"student": "alice", "score": "87.5", "max_score": "100", "exact": "40", "speed": "7.5",
                      "tflops": "8.1", "fraction_of_cublas": "0.16", "status": "graded", "reason": ""}
    assert got[1]["status"] == "timed out" and got[1]["exact"] == "" and got[1]["reason"] == "timed out, after 900 s"
    write_json(tmp_path / "g.json", rows, {"attr": "kernel"})
    body = json.loads((tmp_path / "g.json").read_text())
    assert body["attr"] == "kernel" and [s["student"] for s in body["students"]] == ["alice", "carol"]


@pytest.mark.parametrize("args, message", [
    (["/no/such/dir"], "SUBMISSIONS_DIR '/no/such/dir' is not a directory"),
    (["{subs}", "--timeout", "-5"], "'-5': expected a number of seconds > 0"),
    (["{subs}", "--timeout", "soon"], "'soon' is not a number of seconds"),
    (["{subs}", "--jobs", "0"], "'0': expected 1 or more"),
    (["{subs}", "--attr", "my-kernel"], "--attr 'my-kernel' is not a Python attribute name"),
    (["{subs}", "--ini", "/no/pytest.ini"], "--ini '/no/pytest.ini': no such file"),
    (["{subs}", "--ini", "{bad_ini}"], "unknown check 'exactt'"),
    (["{empty}"], "no submissions in"),
])
def test_cli_errors_are_clear(tmp_path, capsys, args, message):
    (tmp_path / "subs" / "a").mkdir(parents=True)
    (tmp_path / "empty").mkdir()
    (tmp_path / "bad.ini").write_text("[pytest]\ngemm_weights =\n    exactt = 40\n")
    paths = {"subs": tmp_path / "subs", "empty": tmp_path / "empty", "bad_ini": tmp_path / "bad.ini"}
    with pytest.raises(SystemExit) as info:
        main([a.format(**paths) for a in args])
    assert info.value.code == 2
    assert message in capsys.readouterr().err


def test_the_ci_example_has_the_no_gpu_job_and_the_gpu_matrix():
    text = (REPO / "examples" / "ci" / "github-actions.yml").read_text()
    assert 'pip install -e ".[cuda12,test]"' in text
    assert "pytest --gemm-kernel kernels.py:all --gemm-arch all" in text
    assert "--gemm-report report-${{ matrix.gpu }}.json" in text and "actions/upload-artifact" in text
    yaml = pytest.importorskip("yaml", reason="PyYAML not installed: the workflow's structure is not parsed")
    workflow = yaml.safe_load(text)
    jobs = workflow["jobs"]
    assert jobs["no-gpu"]["runs-on"] == "ubuntu-latest"
    assert [e["gpu"] for e in jobs["gpu"]["strategy"]["matrix"]["include"]] == ["t4", "a100", "h100"]
    assert "self-hosted" in jobs["gpu"]["runs-on"]
