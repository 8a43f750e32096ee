"""Grade a folder of submissions, one pytest process per student, into one gradebook.

    python -m pytest_gemm.grading.gradebook SUBMISSIONS_DIR --attr kernel --out gradebook.csv \\
        --json gradebook.json [--timeout S] [--ini pytest.ini] [-- extra pytest args]

Each student is a subfolder holding ``kernel.py`` (``--file``) or a single
``NAME.py`` file. Each runs as its own ``python -m pytest --gemm-kernel
<file>:<attr> --gemm-gradescope <tmp>/results.json ...`` in a fresh working
directory and its own process group, under an overall wall-clock limit: on
overrun the whole process tree (pytest and the kernel sandboxes it started) is
stopped and killed, and the student is recorded as "timed out" with score 0.
A submission that crashes pytest, hangs or faults costs only its own row.
"""
from __future__ import annotations

import argparse
import configparser
import csv
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from .gradescope import CHECKS, GradingConfig, failure_results

GRADED, TIMED_OUT, ERROR, CRASHED, MISSING = "graded", "timed out", "error", "crashed", "missing"
DEFAULT_TIMEOUT = 900.0        # seconds for one student's whole run
DEFAULT_CHECK_TIMEOUT = 60.0   # --gemm-timeout: seconds for one check
_TAIL = 4000


@dataclass(frozen=True)
class Submission:
    student: str
    kernel_file: Path | None     # None: nothing to run (see problem)
    problem: str | None = None


@dataclass
class RunOutcome:
    returncode: int | None       # None when it was killed for running too long
    timed_out: bool
    output: str
    elapsed_s: float


@dataclass
class StudentResult:
    student: str
    status: str
    score: float
    max_score: float
    reason: str
    checks: dict[str, float] = field(default_factory=dict)
    tflops: float | None = None
    fraction_of_cublas: float | None = None
    elapsed_s: float = 0.0
    returncode: int | None = None
    command: list[str] = field(default_factory=list)
    output_tail: str = ""
    results: dict[str, Any] = field(default_factory=dict)


# ---- finding submissions ---------------------------------------------------------------

def find_submissions(root: Path, filename: str = "kernel.py") -> list[Submission]:
    """One per subfolder (its ``filename``) or top-level ``.py`` file, sorted by name."""
    found = []
    for entry in sorted(root.iterdir(), key=lambda p: p.name):
        if entry.name.startswith((".", "_")):
            continue
        if entry.is_dir():
            target = entry / filename
            if target.is_file():
                found.append(Submission(entry.name, target.resolve()))
            else:
                present = sorted(p.name for p in entry.iterdir() if p.suffix == ".py")
                found.append(Submission(entry.name, None, f"no {filename} in {entry}"
                                        + (f" (found {', '.join(present)}; see --file)" if present else "")))
        elif entry.suffix == ".py" and entry.is_file():
            found.append(Submission(entry.stem, entry.resolve()))
    return found


# ---- the per-student command (pure) ----------------------------------------------------

def build_command(kernel_file: Path | str, attr: str, results_path: Path | str, *,
                  check_timeout: float | None = DEFAULT_CHECK_TIMEOUT, ini: Path | str | None = None,
                  extra_args: Sequence[str] = (), python: str | None = None) -> list[str]:
    """The pytest command line that grades one submission into ``results_path``."""
    cmd = [python or sys.executable, "-m", "pytest", "--gemm-kernel", f"{kernel_file}:{attr}",
           "--gemm-gradescope", str(results_path)]
    if check_timeout is not None:
        cmd += ["--gemm-timeout", f"{check_timeout:g}"]
    cmd += ["-p", "no:cacheprovider", "-q"]
    if ini is not None:
        cmd += ["-c", str(ini), "--rootdir", str(Path(ini).parent)]
    return cmd + list(extra_args)


# ---- running one student under a wall-clock limit --------------------------------------

def _children_by_parent() -> dict[int, list[int]]:
    table: dict[int, list[int]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return table
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                stat = fh.read().decode(errors="replace")
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2:].split()
        if len(fields) > 1:
            table.setdefault(int(fields[1]), []).append(int(entry))
    return table


def _descendants(pid: int) -> list[int]:
    """Every live descendant of ``pid`` (Linux /proc; elsewhere none are found)."""
    table, out, todo = _children_by_parent(), [], [pid]
    while todo:
        for child in table.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def kill_tree(proc: subprocess.Popen[Any]) -> None:
    """Stop then kill ``proc``, its process group, and every descendant, including
    children that started their own session (the plugin's kernel sandboxes).

    Processes are frozen with SIGSTOP first, so none can fork or be orphaned
    between being found and being killed."""
    own_group = os.getpgid(0)
    frozen: set[int] = set()
    for _ in range(20):
        pids = [proc.pid] + _descendants(proc.pid)
        new = [p for p in pids if p not in frozen]
        if not new:
            break
        for p in new:
            _signal(p, signal.SIGSTOP)
        frozen.update(new)
    groups = set()
    for p in frozen:
        try:
            groups.add(os.getpgid(p))
        except (ProcessLookupError, PermissionError):
            pass
    for g in groups - {own_group}:
        try:
            os.killpg(g, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    for p in frozen:
        _signal(p, signal.SIGKILL)
    proc.wait()


def run_with_limit(cmd: Sequence[str], *, cwd: Path, timeout: float, env: dict[str, str] | None = None) -> RunOutcome:
    """Run ``cmd`` in its own session; kill its whole tree if it outlives ``timeout`` seconds."""
    start = time.monotonic()
    with tempfile.TemporaryFile() as log:
        proc = subprocess.Popen(list(cmd), cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
        timed_out = False
        try:
            returncode: int | None = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            kill_tree(proc)
            timed_out, returncode = True, None
        else:  # anything it left behind in its group goes too
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        log.seek(0)
        output = log.read().decode(errors="replace")
    return RunOutcome(returncode, timed_out, output, time.monotonic() - start)


Runner = Callable[..., RunOutcome]
CommandBuilder = Callable[..., list[str]]


# ---- grading ---------------------------------------------------------------------------

def load_grading_config(ini: Path | None) -> GradingConfig:
    """The GradingConfig from an ini file's ``[pytest]`` (pytest.ini, tox.ini), ``[tool:pytest]``
    (setup.cfg) or ``[tool.pytest.ini_options]`` (pyproject.toml) section."""
    if ini is None:
        return GradingConfig()
    if ini.suffix == ".toml":
        try:
            import tomllib
        except ImportError:  # Python 3.10
            raise ValueError(f"{ini}: reading pyproject.toml needs Python 3.11 or later; "
                             "put the gemm_* keys in a pytest.ini instead") from None

        section = tomllib.loads(ini.read_text()).get("tool", {}).get("pytest", {}).get("ini_options", {})
        return GradingConfig.from_ini(section)
    parser = configparser.ConfigParser(interpolation=None)
    parser.read(ini)
    for name in ("pytest", "tool:pytest"):
        if parser.has_section(name):
            return GradingConfig.from_ini(dict(parser.items(name)))
    return GradingConfig()


def _usage_error(output: str) -> str:
    """pytest's ``ERROR: ...`` message and the lines after it (an NVRTC log), on one line."""
    lines = output.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith("ERROR:")), None)
    if start is None:
        return ""
    kept = [line.strip() for line in lines[start:start + 12] if line.strip() and line.strip() != "^"]
    text = " | ".join(kept)
    return text if len(text) <= 800 else text[:800] + "..."


def _tail(text: str) -> str:
    return text[-_TAIL:]


def _from_results(sub: Submission, run: RunOutcome, results: dict[str, Any], cmd: list[str]) -> StudentResult:
    extra = (results.get("extra_data") or {}).get("pytest_gemm") or {}
    max_score = extra.get("max_score")
    if max_score is None:
        max_score = sum(float(t.get("max_score") or 0) for t in results.get("tests", []))
    checks = {name: tally.get("score", 0.0) for name, tally in (extra.get("checks") or {}).items()}
    notes = []
    if run.returncode == 4:  # a usage error (bad spec, compile error) that still wrote its results
        said = " | ".join(line.strip() for line in str(results.get("output") or "").splitlines()
                          if line.strip() and not line.strip().endswith("could not grade this submission:"))
        said = said if len(said) <= 800 else said[:800] + "..."
        reason = "error: " + (said or _usage_error(run.output) or "pytest stopped with a usage error")
        return StudentResult(sub.student, ERROR, float(results.get("score") or 0.0), float(max_score), reason,
                             checks, None, None, round(run.elapsed_s, 3), run.returncode, cmd, _tail(run.output),
                             results)
    compiled = (extra.get("checks") or {}).get("compile")
    if compiled and compiled.get("passed", 0) + compiled.get("failed", 0):
        notes.append(f"compiles for {compiled['passed']} of {compiled['passed'] + compiled['failed']} architectures")
    if extra.get("no_gpu"):
        notes.append(f"{extra['no_gpu']}: GPU checks skipped and scored 0")
    if extra.get("failure_categories"):
        notes.append("failed: " + ", ".join(extra["failure_categories"]))
    if run.returncode not in (0, 1):
        notes.append(f"pytest exited with status {run.returncode}")
    return StudentResult(sub.student, GRADED, float(results.get("score") or 0.0), float(max_score),
                         "; ".join(notes), checks, extra.get("tflops"), extra.get("fraction_of_cublas"),
                         round(run.elapsed_s, 3), run.returncode, cmd, _tail(run.output), results)


def grade_one(sub: Submission, *, attr: str, timeout: float, check_timeout: float | None, ini: Path | None,
              extra_args: Sequence[str], max_score: float, config: GradingConfig,
              runner: Runner = run_with_limit, command_builder: CommandBuilder = build_command,
              env: dict[str, str] | None = None, log_dir: Path | None = None) -> StudentResult:
    """Grade one submission; never raises for anything the submission does."""
    if sub.kernel_file is None:
        reason = sub.problem or "nothing to grade"
        return StudentResult(sub.student, MISSING, 0.0, max_score, reason,
                             results=failure_results(reason, max_score, config))
    workdir = Path(tempfile.mkdtemp(prefix=f"gemm-grade-{sub.student}-"))
    try:
        results_path = workdir / "results.json"
        cmd = command_builder(sub.kernel_file, attr, results_path, check_timeout=check_timeout, ini=ini,
                              extra_args=extra_args)
        run_env = dict(os.environ if env is None else env)
        run_env["PYTHONDONTWRITEBYTECODE"] = "1"   # leave the submission folders untouched
        try:
            run = runner(cmd, cwd=workdir, timeout=timeout, env=run_env)
        except OSError as exc:
            reason = f"could not start the grader for {sub.student}: {exc}"
            return StudentResult(sub.student, ERROR, 0.0, max_score, reason, command=cmd,
                                 results=failure_results(reason, max_score, config))
        if log_dir is not None:
            log_dir.mkdir(parents=True, exist_ok=True)
            (log_dir / f"{sub.student}.log").write_text(" ".join(cmd) + "\n\n" + run.output)
        common = dict(elapsed_s=round(run.elapsed_s, 3), returncode=run.returncode, command=cmd,
                      output_tail=_tail(run.output))
        if run.timed_out:
            reason = (f"timed out: still running after {timeout:g} s (the per-student limit), so it was "
                      "killed and scores 0; a kernel that never finishes (an endless loop, or a barrier "
                      "some threads never reach) is the usual cause")
            return StudentResult(sub.student, TIMED_OUT, 0.0, max_score, reason,
                                 results=failure_results(reason, max_score, config), **common)
        results = None
        if results_path.is_file():
            try:
                results = json.loads(results_path.read_text())
            except (OSError, ValueError) as exc:
                reason = f"crashed: results.json is unreadable ({exc})"
                return StudentResult(sub.student, CRASHED, 0.0, max_score, reason,
                                     results=failure_results(reason, max_score, config), **common)
        if isinstance(results, dict):
            return _from_results(sub, run, results, cmd)
        code = run.returncode
        if code is not None and code < 0:
            try:
                how = f"was killed by signal {signal.Signals(-code).name}"
            except ValueError:
                how = f"was killed by signal {-code}"
            status = CRASHED
        elif code == 4:
            how = "stopped with a usage error: " + (_usage_error(run.output) or "see its output")
            status = ERROR
        else:
            how = f"exited with status {code} without writing results"
            status = CRASHED
        lines = [line for line in run.output.strip().splitlines() if line.strip()]
        reason = f"{status}: pytest {how}"
        if status == CRASHED and lines:
            reason += "; last output: " + " | ".join(lines[-3:])[:800]
        return StudentResult(sub.student, status, 0.0, max_score, reason,
                             results=failure_results(reason, max_score, config), **common)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def grade_all(submissions: Sequence[Submission], *, attr: str = "kernel", timeout: float = DEFAULT_TIMEOUT,
              check_timeout: float | None = DEFAULT_CHECK_TIMEOUT, ini: Path | None = None,
              extra_args: Sequence[str] = (), jobs: int = 1, runner: Runner = run_with_limit,
              command_builder: CommandBuilder = build_command, env: dict[str, str] | None = None,
              log_dir: Path | None = None,
              progress: Callable[[StudentResult], None] | None = None) -> list[StudentResult]:
    """Grade every submission (``jobs`` at a time), in the submissions' order."""
    config = load_grading_config(ini)
    fallback_max = config.max_score()

    def one(sub: Submission) -> StudentResult:
        result = grade_one(sub, attr=attr, timeout=timeout, check_timeout=check_timeout, ini=ini,
                           extra_args=extra_args, max_score=fallback_max, config=config, runner=runner,
                           command_builder=command_builder, env=env, log_dir=log_dir)
        if progress is not None:
            progress(result)
        return result

    if jobs <= 1:
        results = [one(s) for s in submissions]
    else:
        with ThreadPoolExecutor(max_workers=jobs) as pool:
            results = list(pool.map(one, submissions))
    # Rows with no results of their own get the max score the graded rows had.
    graded = Counter(r.max_score for r in results if r.status == GRADED)
    if graded:
        usual = graded.most_common(1)[0][0]
        for r in results:
            if r.status != GRADED:
                r.max_score = usual
                for test in r.results.get("tests", []):
                    test["max_score"] = usual
                r.results.get("extra_data", {}).get("pytest_gemm", {})["max_score"] = usual
    return results


# ---- the gradebook files ---------------------------------------------------------------

def check_columns(results: Sequence[StudentResult], config: GradingConfig | None = None) -> list[str]:
    seen = {name for r in results for name in r.checks}
    if not seen:
        config = config or GradingConfig()
        seen = {c for c in CHECKS if config.weight(c) > 0}
    return [c for c in CHECKS if c in seen] + sorted(seen - set(CHECKS))


def _num(value: float | None, digits: int = 4) -> str:
    return "" if value is None else f"{round(float(value), digits):g}"


def write_csv(path: Path, results: Sequence[StudentResult], columns: Sequence[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["student", "score", "max_score", *columns, "tflops", "fraction_of_cublas", "status",
                         "reason"])
        for r in results:
            writer.writerow([r.student, _num(r.score), _num(r.max_score),
                             *[_num(r.checks.get(c)) for c in columns],
                             _num(r.tflops, 3), _num(r.fraction_of_cublas), r.status, r.reason])


def write_json(path: Path, results: Sequence[StudentResult], meta: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    body = dict(meta, schema_version=1, students=[asdict(r) for r in results])
    path.write_text(json.dumps(body, indent=2, default=str))


def summary_table(results: Sequence[StudentResult]) -> str:
    from tabulate import tabulate

    rows = [[r.student, r.status, f"{r.score:g} / {r.max_score:g}", _num(r.tflops, 2),
             _num(r.fraction_of_cublas, 3), (r.reason[:90] + "...") if len(r.reason) > 90 else r.reason]
            for r in results]
    return tabulate(rows, headers=["student", "status", "score", "TFLOP/s", "x cuBLAS", "notes"],
                    tablefmt="simple")


# ---- the command line ------------------------------------------------------------------

def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds; e.g. 600") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a number of seconds > 0, e.g. 600")
    return value


def _jobs(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number; e.g. 1 (one student at a time)") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: expected 1 or more students at a time")
    return value


def make_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m pytest_gemm.grading.gradebook",
        description="Grade every submission in SUBMISSIONS_DIR with the pytest-gemm conformance suite, each in "
                    "its own pytest process with a wall-clock limit, into one CSV/JSON gradebook. Arguments "
                    "after -- are passed to every pytest run.",
        epilog="example: python -m pytest_gemm.grading.gradebook submissions --attr kernel --ini pytest.ini "
               "--out gradebook.csv --json gradebook.json --timeout 600 -- -x")
    p.add_argument("submissions", metavar="SUBMISSIONS_DIR",
                   help="folder with one subfolder (holding --file) or one .py file per student")
    p.add_argument("--attr", default="kernel", help="the kernel attribute in each submission (default: kernel)")
    p.add_argument("--file", default="kernel.py", metavar="NAME",
                   help="the kernel module inside each student's subfolder (default: kernel.py)")
    p.add_argument("--out", default="gradebook.csv", metavar="CSV", help="the CSV gradebook (default: gradebook.csv)")
    p.add_argument("--json", default=None, metavar="PATH", help="also write the JSON gradebook, with each "
                   "student's full Gradescope results")
    p.add_argument("--timeout", type=_positive, default=DEFAULT_TIMEOUT, metavar="S",
                   help=f"wall-clock seconds for one student's whole run (default {DEFAULT_TIMEOUT:g}); "
                        "over it the run is killed and the student scores 0 as 'timed out'")
    p.add_argument("--check-timeout", type=_positive, default=DEFAULT_CHECK_TIMEOUT, metavar="T",
                   help=f"seconds for one check, passed as --gemm-timeout (default {DEFAULT_CHECK_TIMEOUT:g})")
    p.add_argument("--ini", default=None, metavar="PATH",
                   help="the course's pytest ini (gemm_weights, gemm_visibility, gemm_performance_threshold), "
                        "passed to every run as -c")
    p.add_argument("--jobs", type=_jobs, default=1, metavar="N",
                   help="students graded at once (default 1; keep 1 on a GPU so timings do not interfere)")
    p.add_argument("--logs", default=None, metavar="DIR", help="write each student's pytest output to DIR/STUDENT.log")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args_in = list(sys.argv[1:] if argv is None else argv)
    extra: list[str] = []
    if "--" in args_in:
        cut = args_in.index("--")
        args_in, extra = args_in[:cut], args_in[cut + 1:]
    parser = make_parser()
    args = parser.parse_args(args_in)
    root = Path(args.submissions)
    if not root.is_dir():
        parser.error(f"SUBMISSIONS_DIR {args.submissions!r} is not a directory; give the folder holding one "
                     "subfolder or .py file per student")
    if not args.attr.isidentifier():
        parser.error(f"--attr {args.attr!r} is not a Python attribute name; e.g. --attr kernel")
    ini = None
    if args.ini is not None:
        ini = Path(args.ini).resolve()
        if not ini.is_file():
            parser.error(f"--ini {args.ini!r}: no such file; give the course's pytest.ini (or tox.ini, "
                         "setup.cfg, pyproject.toml)")
        try:
            config = load_grading_config(ini)
        except (ValueError, configparser.Error, OSError) as exc:
            parser.error(f"--ini {args.ini!r}: {exc}")
    else:
        config = GradingConfig()
    submissions = find_submissions(root, args.file)
    if not submissions:
        parser.error(f"no submissions in {str(root)!r}: expected one subfolder holding {args.file} "
                     "(or one .py file) per student")

    def progress(r: StudentResult) -> None:
        print(f"{r.student}: {r.status}, {r.score:g} / {r.max_score:g}"
              + (f" ({r.reason[:160]})" if r.reason else ""), flush=True)

    results = grade_all(submissions, attr=args.attr, timeout=args.timeout, check_timeout=args.check_timeout,
                        ini=ini, extra_args=extra, jobs=args.jobs, log_dir=Path(args.logs) if args.logs else None,
                        progress=progress)
    columns = check_columns(results, config)
    write_csv(Path(args.out), results, columns)
    if args.json:
        write_json(Path(args.json), results, {
            "submissions_dir": str(root.resolve()), "attr": args.attr, "timeout_s": args.timeout,
            "check_timeout_s": args.check_timeout, "ini": str(ini) if ini else None, "pytest_args": extra,
            "columns": columns})
    print()
    print(summary_table(results))
    print(f"\ngradebook: {args.out}" + (f", {args.json}" if args.json else "")
          + f" ({len(results)} students, " + ", ".join(f"{n} {s}" for s, n in Counter(r.status for r in results).items())
          + ")")
    return 0


if __name__ == "__main__":
    sys.exit(main())
