"""Grading one student: their pytest run (``submissions.build_command``) under a wall-clock
limit (``processes.run_with_limit``), read back into one gradebook row."""
from __future__ import annotations

import configparser
import json
import os
import shutil
import signal
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from ..model.categories import HARNESS_OUT_OF_MEMORY
from .config import GradingConfig
from .gradescope import failure_results
from .processes import RunOutcome, run_with_limit
from .submissions import Submission, build_command

GRADED, TIMED_OUT, ERROR, CRASHED, MISSING = "graded", "timed out", "error", "crashed", "missing"
DEFAULT_TIMEOUT = 900.0        # seconds for one student's whole run
AUTOLOAD_ENV = "PYTEST_DISABLE_PLUGIN_AUTOLOAD"  # pytest's own switch (docs/courses.md: other plugins)
_TAIL = 4000

Runner = Callable[..., RunOutcome]
CommandBuilder = Callable[..., list[str]]


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



def load_grading_config(ini: Path | None) -> GradingConfig:
    """The GradingConfig from an ini file's ``[pytest]`` (pytest.ini, tox.ini), ``[tool:pytest]``
    (setup.cfg) or ``[tool.pytest.ini_options]`` (pyproject.toml) section."""
    if ini is None:
        return GradingConfig()
    if ini.suffix == ".toml":
        try:
            import tomllib  # lazy: optional (tomllib: Python 3.11+)
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
    if run.returncode not in (0, 1, None):  # None: stopped at the per-student limit (the caller says so)
        notes.append(f"pytest exited with status {run.returncode}")
    return StudentResult(sub.student, GRADED, float(results.get("score") or 0.0), float(max_score),
                         "; ".join(notes), checks, extra.get("tflops"), extra.get("fraction_of_cublas"),
                         round(run.elapsed_s, 3), run.returncode, cmd, _tail(run.output), results)


def _read(path: Path) -> dict[str, Any] | None:
    try:
        results = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return results if isinstance(results, dict) else None


def grade_one(sub: Submission, *, attr: str, timeout: float, check_timeout: float | None, ini: Path | None,
              extra_args: Sequence[str], max_score: float, config: GradingConfig,
              runner: Runner = run_with_limit, command_builder: CommandBuilder = build_command,
              env: dict[str, str] | None = None, log_dir: Path | None = None,
              workdirs: Path | None = None) -> StudentResult:
    """Grade one submission; never raises for anything the submission does. Its run's working
    folder is made in ``workdirs`` (made if need be; default: the temporary folder) and removed
    afterwards."""
    if sub.kernel_file is None:
        reason = sub.problem or "nothing to grade"
        return StudentResult(sub.student, MISSING, 0.0, max_score, reason,
                             results=failure_results(reason, max_score, config))
    if workdirs is not None:
        workdirs.mkdir(mode=0o700, parents=True, exist_ok=True)
    workdir = Path(tempfile.mkdtemp(prefix=f"gemm-grade-{sub.student}-", dir=workdirs))
    try:
        results_path = workdir / "results.json"
        cmd = command_builder(sub.kernel_file, attr, results_path, check_timeout=check_timeout, ini=ini,
                              extra_args=extra_args)
        run_env = dict(os.environ if env is None else env)
        run_env["PYTHONDONTWRITEBYTECODE"] = "1"   # leave the submission folders untouched
        # Only pytest-gemm's plugin (the command names it): the grader's other installed plugins
        # cost each student their loading (9 on the H200 machine: a correct student alone took
        # 8.14 s with them, 7.37 s without, medians of 3). An environment that sets it, even to
        # "", keeps its say.
        run_env.setdefault(AUTOLOAD_ENV, "1")
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
        results = None
        if run.timed_out:
            reason = (f"timed out: still running after {timeout:g} s (the per-student limit), so it was "
                      "stopped; a kernel that never finishes (an endless loop, or a barrier some threads "
                      "never reach) is the usual cause")
            partial = _read(results_path)
            if partial is None:
                reason += "; no check had finished, so it scores 0"
                return StudentResult(sub.student, TIMED_OUT, 0.0, max_score, reason,
                                     results=failure_results(reason, max_score, config), **common)
            row = _from_results(sub, run, partial, cmd)
            row.status = TIMED_OUT
            row.reason = reason + "; the checks that had run are scored, the rest score 0" + \
                (f"; {row.reason}" if row.reason else "")
            return row
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


def harness_failed(result: StudentResult) -> bool:
    """The student's run had a check the harness could not run (out of GPU memory): no verdict
    on the kernel, so the student is graded again."""
    return any(HARNESS_OUT_OF_MEMORY in (t.get("tags") or []) for t in result.results.get("tests", []))
