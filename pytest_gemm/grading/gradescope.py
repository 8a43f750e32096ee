"""Gradescope ``results.json`` from the run's results (``outputs.records.RunResults``: typed
check records, each kernel's verdict derived once) and the user's own graded tests.

Pure: tested with no GPU. The format is Gradescope's
(https://gradescope-autograders.readthedocs.io/en/latest/specs/): one
Gradescope test per kernel and check group ("exact (34 shapes)"), scored with
partial credit, and a leaderboard for the submission when it is correct.

Configuration (``GradingConfig``, the weights, the markers' readers, the user's graded tests):
``grading/config.py``; import those names from there. The kernel's verdict and root cause come from
``outputs/records.py``: a failing kernel's other failures are marked as consequences.
"""
from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from ..checks import registry
from ..measure.quiet import busy_note
from ..model.categories import HARNESS_OUT_OF_MEMORY
from ..outputs.records import CheckRecord, RunResults, as_records
from ..outputs.verdicts import BLAS_ZERO_RULES, UNTRUSTED_TIMING
from .config import CHECKS, VISIBILITIES, GradingConfig
from ..outputs.process_time import time_summary
from ..outputs.launch_view import OWN_KERNEL_UNCHECKED, kernel_launches

SCHEMA_VERSION = 2  # 2: verdict, primary_category and diagnosis in extra_data
_MAX_MESSAGE_LINES = 6
_MAX_LINE = 300

# ---- scoring ------------------------------------------------------------------------

def _case_label(r: CheckRecord) -> str:
    parts = []
    if r.shape:
        parts.append("x".join(str(d) for d in r.shape))
    for key, value in r.params.items():
        parts.append(str(value) if key in ("arch", "id") else f"{key}={value}")
    return " ".join(parts) or str(r.check)


def _first_lines(r: CheckRecord) -> list[str]:
    """The failure as the student reads it: ``[category] summary``, then its details."""
    summary = r.summary or "failed (no message)"
    lines = [f"[{r.category}] {summary}" if r.category else summary, *r.details]
    out = [line if len(line) <= _MAX_LINE else line[:_MAX_LINE] + "..." for line in lines[:_MAX_MESSAGE_LINES]]
    if len(lines) > _MAX_MESSAGE_LINES:
        out.append(f"  ... ({len(lines) - _MAX_MESSAGE_LINES} more lines)")
    return out


def _skip_summary(skipped: list[CheckRecord]) -> str:
    reasons = Counter((f"[{r.category}] " if r.category else "") + (r.summary or "skipped") for r in skipped)
    common = reasons.most_common(3)
    if len(common) == 1:
        return common[0][0]
    text = "; ".join(f"{reason} ({n})" for reason, n in common)
    return text + ("; ..." if len(reasons) > 3 else "")


def _speed_credit(r: CheckRecord, threshold: float) -> float:
    fraction = r.facts.get("fraction_of_cublas")
    if r.category in UNTRUSTED_TIMING or not isinstance(fraction, (int, float)):
        return 0.0
    return max(0.0, min(1.0, float(fraction) / threshold))


def _noun(check: str, records: list[CheckRecord]) -> str:
    if check == "compile":
        return "architecture" if len(records) == 1 else "architectures"
    if any(r.params for r in records):
        return "case" if len(records) == 1 else "cases"
    return "shape" if len(records) == 1 else "shapes"


@dataclass
class _Group:
    kernel: str | None
    check: str
    records: list[CheckRecord]


def _groups(records: Sequence[CheckRecord], config: GradingConfig,
            kernels: Sequence[str] | None) -> list[_Group]:
    order: list[str | None] = []
    by_key: dict[tuple[str | None, str], list[CheckRecord]] = {}
    for r in records:
        k = r.kernel
        if k is not None and kernels is not None and k not in kernels:
            continue
        if k not in order:
            order.append(k)
        by_key.setdefault((k, r.check), []).append(r)
    if kernels is not None:  # kernels under test with no record at all still get their tests
        order = [k for k in kernels] + [k for k in order if k is None]
    groups = []
    for k in order:
        if k is None:
            continue
        for check in CHECKS:
            rs = by_key.get((k, check), [])
            if rs or config.weight(check) > 0:
                groups.append(_Group(k, check, rs))
        for (kk, check), rs in by_key.items():
            if kk == k and check not in CHECKS:
                groups.append(_Group(k, check, rs))
    for (kk, check), rs in by_key.items():  # user tests: not tied to one kernel
        if kk is None:
            groups.append(_Group(None, check, rs))
    return groups


def _group_weight(g: _Group, config: GradingConfig) -> float:
    marked = [r.facts["weight"] for r in g.records if isinstance(r.facts.get("weight"), (int, float))]
    return float(max(marked)) if marked else config.weight(g.check)


def _group_visibility(g: _Group, config: GradingConfig) -> str:
    marked = [r.facts["visibility"] for r in g.records if r.facts.get("visibility") in VISIBILITIES]
    return marked[0] if marked else config.visibility_of(g.check)


def _score_group(g: _Group, config: GradingConfig, prefix: bool,
                 root: Any = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the Gradescope test, the machine-readable tally)."""
    weight = _group_weight(g, config)
    passed = [r for r in g.records if r.passed]
    # the harness's own out-of-memory is no verdict on the kernel: not counted, like a skip (a
    # class run grades such a student again, alone). A harness_error (an exception of
    # pytest-gemm's own) is no verdict either, but its case earns nothing: a kernel that broke
    # the harness on purpose must not turn its failing cases into uncounted ones.
    harness = [r for r in g.records if r.category == HARNESS_OUT_OF_MEMORY]
    failed = [r for r in g.records if r.failed and r not in harness]
    skipped = [r for r in g.records if r.outcome == "skipped"] + harness
    ran = passed + failed
    label = registry.get(g.check).display if g.check in registry.BY_NAME else g.check
    lines: list[str] = []
    if not g.records:
        score = 0.0
        what = f"kernel {g.kernel!r}" if g.kernel else "the submission"
        lines.append(f"nothing ran: no {label} check ran for {what}, so it scores 0")
        hint = registry.get(g.check).not_applicable if g.check in registry.BY_NAME else ""
        if hint:
            lines.append(f"({hint})")
    elif not ran:
        score = 0.0
        lines.append(f"nothing ran: all {len(skipped)} skipped, so it scores 0: {_skip_summary(skipped)}")
    else:
        threshold = config.performance_threshold
        if g.check == "speed" and threshold is not None:
            credit = sum(_speed_credit(r, threshold) for r in ran) / len(ran)
            score = weight * credit
            lines.append(f"{len(passed)} of {len(ran)} passed; scored by speed: full credit at "
                         f"{threshold:g} x cuBLAS or faster, linear below ({100 * credit:.0f}% credit)")
        else:
            score = weight * len(passed) / len(ran)
            lines.append(f"{len(passed)} of {len(ran)} passed")
        if skipped:
            lines.append(f"{len(skipped)} skipped (not counted): {_skip_summary(skipped)}")
    for r in g.records:
        if g.check == "speed" and isinstance(r.facts.get("timing"), dict) and r.outcome != "skipped":
            t = r.facts["timing"]
            frac = r.facts.get("fraction_of_cublas")
            frac_text = f", {frac:.3f} x cuBLAS" if isinstance(frac, (int, float)) else ""
            lines.append(f"{_case_label(r)}: {t.get('tflops', 0):.2f} TFLOP/s, median "
                         f"{t.get('median_ms', 0):.3f} ms{frac_text}")
            busy = busy_note(r.facts.get("gpu_quiet"))
            if busy:
                lines.append(f"  note: {busy}")
    if failed and root is not None and root.status == "failed":
        lines.append("")
        cause = root.primary_category or "failed"
        if any(_where(r) == root.primary_check for r in failed):
            lines.append(f"root cause of this kernel's failures: {cause}: {root.diagnosis}")
        else:
            lines.append(f"these failures are consequences of the kernel's root cause, {cause} "
                         f"({root.primary_check}): {root.diagnosis}")
    if failed:
        lines.append("")
        lines.append(f"failures ({len(failed)}):")
        for r in failed[:config.max_failures_listed]:
            first = _first_lines(r)
            lines.append(f"- {_case_label(r)}: {first[0]}")
            lines.extend(f"    {line.strip()}" for line in first[1:])
        if len(failed) > config.max_failures_listed:
            lines.append(f"... and {len(failed) - config.max_failures_listed} more failures")
    score = round(score, 4)
    lines.append(f"score: {score:g} / {weight:g}")
    if g.check not in CHECKS:  # a user's test: counted only when parametrized
        count = f" ({len(g.records)} cases)" if len(g.records) > 1 else ""
    else:
        count = f" ({len(g.records)} {_noun(g.check, g.records)})" if g.records and g.check != "speed" else ""
    name = f"{label}{count}"
    if prefix and g.kernel:
        name = f"{g.kernel}: {name}"
    categories = sorted({r.category or "failed" for r in failed})
    test: dict[str, Any] = {
        "name": name, "score": score, "max_score": weight,
        "status": "passed" if ran and not failed else "failed",
        "output": "\n".join(lines), "visibility": _group_visibility(g, config),
        "tags": [g.check] + categories + ([HARNESS_OUT_OF_MEMORY] if harness else []),
    }
    tally = {"score": score, "max_score": weight, "passed": len(passed), "failed": len(failed),
             "skipped": len(skipped),
             "wall_s": sum(float(r.wall_s or 0.0) for r in g.records)}  # where a student's time went
    return test, tally


def _no_gpu_reason(records: Sequence[CheckRecord]) -> str | None:
    for r in records:
        if r.skipped_for_no_gpu:
            return r.summary
    return None


def _where(r: CheckRecord) -> str:
    return " ".join([str(r.check)] + ([_case_label(r)] if r.shape or r.params else []))


def _best_timing(records: Sequence[CheckRecord], kernel: str) -> CheckRecord | None:
    timed = [r for r in records if r.kernel == kernel and r.check == "speed"
             and isinstance(r.facts.get("timing"), dict) and r.category not in UNTRUSTED_TIMING]
    return max(timed, key=lambda r: r.facts["timing"].get("tflops", 0.0)) if timed else None


def build_results(records: Any, config: GradingConfig | None = None, *, graded: Sequence[Any] = (),
                  kernels: Sequence[str] | None = None, execution_time: float | None = None,
                  own_kernel: bool = False) -> dict[str, Any]:
    """Gradescope's results.json as a dict.

    ``records``: the run's ``RunResults`` (or check records to build one from); ``graded``: the
    user's own tests marked ``gemm_weight`` / ``gemm_visibility`` (records whose kernel is None,
    their check a node id; they may also come among ``records``), one Gradescope test each.
    ``kernels``: the names of the kernels under test, the submission first (default: every
    kernel in the records, in order of appearance); other kernels' records (the reference
    ladder) are ignored. Each kernel gets one test per check group. ``own_kernel``: the course
    requires the student's own kernel (a trace that was skipped then says the rule went unchecked).
    """
    config = config or GradingConfig()
    run = RunResults.build(records)
    records = [r for r in (*run.records, *as_records(graded)) if r.check]
    groups = _groups(records, config, kernels)
    graded = [k for k in dict.fromkeys(g.kernel for g in groups) if k is not None]
    results = run.kernels
    tests, checks = [], {}
    for g in groups:
        root = results[g.kernel].verdict if g.kernel in results else None
        test, tally = _score_group(g, config, prefix=len(graded) > 1, root=root)
        tests.append(test)
        agg = checks.setdefault(g.check, {"score": 0.0, "max_score": 0.0, "passed": 0, "failed": 0, "skipped": 0,
                                          "wall_s": 0.0})
        for key, value in tally.items():
            agg[key] = round(agg[key] + value, 4)
    score = round(sum(t["score"] for t in tests), 4)
    max_score = round(sum(t["max_score"] for t in tests), 4)

    submission = graded[0] if graded else None
    no_gpu = _no_gpu_reason(records)
    lines = []
    if submission is None and not tests:
        lines.append("pytest-gemm: no kernel was checked (no conformance results were recorded); score 0.")
    elif submission is None:
        lines.append(f"pytest-gemm: {score:g} / {max_score:g} points")
    else:
        precision = next((r.precision for r in records if r.kernel == submission), None)
        lines.append(f"pytest-gemm: kernel {submission!r}" + (f" ({precision})" if precision else "")
                     + f": {score:g} / {max_score:g} points")
    if no_gpu:
        lines.append(f"{no_gpu}. Every GPU check was skipped and scores 0; only the compile checks ran. "
                     "Grade on a machine with a usable NVIDIA GPU.")
    extra: dict[str, Any] = {"schema_version": SCHEMA_VERSION, "submission": submission, "kernels": graded,
                             "score": score, "max_score": max_score, "checks": checks, "no_gpu": no_gpu,
                             "correct": False, "tflops": None, "fraction_of_cublas": None,
                             "failure_categories": [], "verdict": None, "primary_category": None,
                             "diagnosis": None, "consequences": []}
    result: dict[str, Any] = {"score": score, "output": "", "visibility": config.results_visibility,
                              "stdout_visibility": config.stdout_visibility, "tests": tests}
    if execution_time is not None:
        result["execution_time"] = round(float(execution_time), 3)
    if submission is not None:
        result_of = results.get(submission)
        verdict = result_of.verdict if result_of is not None else None
        blas_rule_only = verdict is not None and verdict.primary_category in BLAS_ZERO_RULES \
            and not verdict.consequences
        correct = verdict is not None and (verdict.status == "passed" or blas_rule_only) and result_of.trusted
        categories = [verdict.primary_category or "failed"] if verdict is not None and verdict.status == "failed" else []
        extra["correct"], extra["failure_categories"] = correct, categories
        if verdict is not None:
            extra.update(verdict=verdict.status, primary_category=verdict.primary_category,
                         diagnosis=verdict.diagnosis, consequences=verdict.consequences)

        extra["time"] = time_summary(records, submission)  # where the run's seconds went (process starts, waits)

        launched = kernel_launches(result_of) if result_of is not None else None
        if launched is not None:  # what it launched (the launch trace), or why that is not known
            extra["launches"] = launched
            if "summary" in launched:
                lines.append(f"GPU kernels launched: {launched['summary']} ({launched['check']})")
            else:
                lines.append(f"GPU kernels launched: not traced ({launched['skipped']})"
                             + (f"; {OWN_KERNEL_UNCHECKED}" if own_kernel else ""))
                if own_kernel:
                    extra["own_kernel_checked"] = False
        best = _best_timing(records, submission)
        if best is not None:
            extra["tflops"] = best.facts["timing"].get("tflops")
            extra["fraction_of_cublas"] = best.facts.get("fraction_of_cublas")
            extra["gpu_quiet"] = best.facts.get("gpu_quiet")  # how long the timing waited for other processes' work
            if best.facts.get("alone_s"):  # where its hold of the GPU alone went (measure/laps.py)
                extra["speed_alone_s"] = best.facts["alone_s"]
        if correct and best is not None:
            board = [{"name": "TFLOP/s", "value": round(float(best.facts["timing"].get("tflops", 0.0)), 3),
                      "order": "desc"}]
            if isinstance(best.facts.get("fraction_of_cublas"), (int, float)):
                board.append({"name": "fraction of cuBLAS", "value": round(float(best.facts["fraction_of_cublas"]), 4),
                              "order": "desc"})
            result["leaderboard"] = board
            lines.append(f"leaderboard: {board[0]['value']:g} TFLOP/s"
                         + (f", {board[1]['value']:g} x cuBLAS" if len(board) > 1 else ""))
        elif categories:
            untrusted = " (no trustworthy timing)" if categories[0] in UNTRUSTED_TIMING else ""
            lines.append(f"not on the leaderboard{untrusted}: {categories[0]} ({verdict.primary_check}): "
                         f"{verdict.diagnosis}")
        elif not correct:
            lines.append("not on the leaderboard: no correctness check ran")
        else:
            lines.append("not on the leaderboard: the speed check gave no trustworthy timing")
        if verdict is not None:
            lines += [f"note (no points lost): {note}" for note in verdict.notes]
    result["output"] = "\n".join(lines)
    result["extra_data"] = {"pytest_gemm": extra}
    return result


def write_results(path: str | Path, records: Any, config: GradingConfig | None = None, *,
                  graded: Sequence[Any] = (), kernels: Sequence[str] | None = None,
                  execution_time: float | None = None, confinement: str | None = None,
                  own_kernel: bool = False) -> dict[str, Any]:
    """Build the results and write them to ``path`` (parents created); returns them. ``confinement``:
    what the submission's processes ran under (kernels/confine.py), said in the output and extra_data."""
    result = build_results(records, config, graded=graded, kernels=kernels, execution_time=execution_time,
                           own_kernel=own_kernel)
    if confinement is not None:
        result.setdefault("extra_data", {}).setdefault("pytest_gemm", {})["confinement"] = confinement
        result["output"] = (str(result.get("output") or "") + f"\nsubmitted code ran confined by: {confinement}").strip()
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(result, indent=2, default=str))
    return result


def failure_results(reason: str, max_score: float, config: GradingConfig | None = None) -> dict[str, Any]:
    """Results for a submission that produced none (timed out, crashed): score 0 with the reason."""
    config = config or GradingConfig()
    return {"score": 0.0, "output": reason, "visibility": config.results_visibility,
            "stdout_visibility": config.stdout_visibility,
            "tests": [{"name": "autograder run", "score": 0.0, "max_score": max_score, "status": "failed",
                       "output": reason, "visibility": "visible", "tags": ["autograder"]}],
            "extra_data": {"pytest_gemm": {"schema_version": SCHEMA_VERSION, "submission": None, "kernels": [],
                                           "score": 0.0, "max_score": max_score, "checks": {}, "no_gpu": None,
                                           "correct": False, "tflops": None, "fraction_of_cublas": None,
                                           "failure_categories": [], "verdict": None, "primary_category": None,
                             "diagnosis": None, "consequences": []}}}


def write_failure_results(path: str | Path, reason: str, config: GradingConfig | None = None) -> dict[str, Any]:
    """For a run that stops before any check (a bad kernel spec, a compile error): write
    results scoring 0 with the reason, so the student sees why instead of a missing file."""
    config = config or GradingConfig()
    result = failure_results(f"pytest-gemm could not grade this submission:\n{reason}", config.max_score(), config)
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(result, indent=2, default=str))
    return result


__all__ = ["build_results", "failure_results", "write_failure_results", "write_results"]
