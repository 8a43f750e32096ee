"""Gradescope ``results.json`` from the conformance checks' JSON records.

Pure: works on the records the plugin collects (keys kernel, precision, check,
shape, params, outcome, category, message, plus facts such as timing and
fraction_of_cublas), so it is tested with no GPU. The format is Gradescope's
(https://gradescope-autograders.readthedocs.io/en/latest/specs/): one
Gradescope test per kernel and check group ("exact (34 shapes)"), scored with
partial credit, and a leaderboard for the submission when it is correct.

Configuration comes from ini keys (``gemm_weights``, ``gemm_visibility``,
``gemm_performance_threshold``) through :meth:`GradingConfig.from_ini`; every
bad key or value raises ``ValueError`` naming it and listing the valid ones.
"""
from __future__ import annotations

import json
import math
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

SCHEMA_VERSION = 1

# The conformance checks, in the order their Gradescope tests are listed.
CHECKS: tuple[str, ...] = ("compile", "launch", "exact", "coverage", "guards", "alphabeta",
                           "deterministic", "accuracy", "speed")
DEFAULT_WEIGHTS: dict[str, float] = {"exact": 40, "coverage": 10, "guards": 10, "alphabeta": 5,
                                     "deterministic": 10, "accuracy": 15, "speed": 10, "launch": 0,
                                     "compile": 0}
VISIBILITIES: tuple[str, ...] = ("visible", "hidden", "after_due_date", "after_published")
# Extra keys of gemm_visibility besides check names.
VISIBILITY_KEYS: tuple[str, ...] = ("default", "results", "stdout")

LABELS = {"alphabeta": "alpha/beta"}
# Why a check may have no case at all for a kernel (it is then scored 0 when weighted).
ABSENT_HINTS = {
    "alphabeta": "this check runs only for kernels whose signature takes alpha and beta",
    "deterministic": "this check does not run for a kernel declared deterministic=False",
    "compile": "compile checks run only for CUDA C kernels (CudaKernel)",
}
# Speed failures that mean the timing itself cannot be trusted.
UNTRUSTED_TIMING = ("timing_escape", "stale_output")
NO_GPU_PREFIX = "no usable GPU"

_MAX_MESSAGE_LINES = 6
_MAX_LINE = 300


def _is_custom_check(name: str) -> bool:
    """A user test's record carries its node id as the check name."""
    return "::" in name


def _visibility(value: str, where: str) -> str:
    if value not in VISIBILITIES:
        raise ValueError(f"{where}: visibility {value!r} is not valid; valid visibilities: {', '.join(VISIBILITIES)}")
    return value


def _weight(value: Any, where: str) -> float:
    try:
        if isinstance(value, bool):
            raise TypeError
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{where}: weight {value!r} is not a number; expected points >= 0, e.g. 40") from None
    if not math.isfinite(number) or number < 0:
        raise ValueError(f"{where}: weight {value!r} must be a finite number of points >= 0, e.g. 40")
    return number


def _threshold(value: Any, where: str) -> float | None:
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    try:
        if isinstance(value, bool):
            raise TypeError
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{where}: {value!r} is not a number; expected a fraction of cuBLAS > 0 "
                         "(full speed credit at or above it), e.g. 0.3") from None
    if not math.isfinite(number) or not 0 < number <= 10:
        raise ValueError(f"{where}: {value!r} is out of range; expected a fraction of cuBLAS in (0, 10], e.g. 0.3")
    return number


def _lines(value: Any) -> list[str]:
    """An ini value (pytest linelist, or one multi-line string) as stripped lines, no comments."""
    if value is None:
        return []
    items = value.splitlines() if isinstance(value, str) else [str(v) for v in value]
    out = []
    for line in items:
        line = line.split(" #")[0].strip()
        if line and not line.startswith("#"):
            out.append(line)
    return out


def _key_value(line: str, where: str, example: str) -> tuple[str, list[str]]:
    key, sep, value = line.rpartition("=")
    key = key.strip()
    if not sep or not key or not value.strip():
        raise ValueError(f"{where}: line {line!r} is not 'check = value'; e.g. {example}")
    return key, value.split()


def _check_key(key: str, where: str, extra: Sequence[str] = ()) -> str:
    if key in CHECKS or key in extra or _is_custom_check(key):
        return key
    valid = ", ".join(list(CHECKS) + list(extra))
    raise ValueError(f"{where}: unknown check {key!r}; valid keys: {valid} "
                     "(or a test node id such as tests/test_mine.py::test_tiles)")


@dataclass
class GradingConfig:
    """How checks become points: weights, visibilities, the speed threshold."""

    weights: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_WEIGHTS))
    visibility: dict[str, str] = field(default_factory=dict)  # per check; others get default_visibility
    default_visibility: str = "visible"
    results_visibility: str = "visible"      # top-level "visibility" of the whole result
    stdout_visibility: str = "hidden"        # the autograder's stdout (pytest's output)
    performance_threshold: float | None = None  # fraction of cuBLAS for full speed credit
    max_failures_listed: int = 8

    def __post_init__(self) -> None:
        for check, w in list(self.weights.items()):
            _check_key(check, "GradingConfig.weights")
            self.weights[check] = _weight(w, f"GradingConfig.weights[{check!r}]")
        for check, v in self.visibility.items():
            _check_key(check, "GradingConfig.visibility")
            _visibility(v, f"GradingConfig.visibility[{check!r}]")
        _visibility(self.default_visibility, "GradingConfig.default_visibility")
        _visibility(self.results_visibility, "GradingConfig.results_visibility")
        _visibility(self.stdout_visibility, "GradingConfig.stdout_visibility")
        self.performance_threshold = _threshold(self.performance_threshold, "GradingConfig.performance_threshold")

    def weight(self, check: str) -> float:
        return self.weights.get(check, 0.0)

    def visibility_of(self, check: str) -> str:
        return self.visibility.get(check, self.default_visibility)

    def max_score(self, checks: Iterable[str] = CHECKS) -> float:
        """Points available when every listed check has a weight (alpha/beta included)."""
        return float(sum(self.weight(c) for c in checks))

    @classmethod
    def from_ini(cls, ini: Mapping[str, Any] | Callable[[str], Any]) -> "GradingConfig":
        """From ``config.getini`` (or a mapping of ini key to value).

        ``gemm_weights``: lines ``check = points [visibility]``; a check not listed keeps
        its default weight (exact 40, coverage 10, guards 10, alphabeta 5, deterministic 10,
        accuracy 15, speed 10, launch 0, compile 0).
        ``gemm_visibility``: lines ``check = visibility``, plus ``default``, ``results``
        (the whole result) and ``stdout`` (pytest's output, hidden by default).
        ``gemm_performance_threshold``: the fraction of cuBLAS that earns full speed credit.
        """

        def get(name: str) -> Any:
            if callable(ini):
                try:
                    return ini(name)
                except (ValueError, KeyError):  # pytest: an ini key nobody registered
                    return None
            return ini.get(name)

        weights = dict(DEFAULT_WEIGHTS)
        visibility: dict[str, str] = {}
        seen: set[str] = set()
        for line in _lines(get("gemm_weights")):
            where = f"gemm_weights: {line!r}"
            key, words = _key_value(line, "gemm_weights", "'exact = 40' or 'speed = 10 hidden'")
            check = _check_key(key, where)
            if check in seen:
                raise ValueError(f"{where}: check {check!r} is given twice; give each check once")
            seen.add(check)
            if len(words) > 2:
                raise ValueError(f"{where}: expected 'check = points [visibility]', e.g. 'speed = 10 hidden'")
            weights[check] = _weight(words[0], where)
            if len(words) == 2:
                visibility[check] = _visibility(words[1], where)
        extra = {"default": "visible", "results": "visible", "stdout": "hidden"}
        for line in _lines(get("gemm_visibility")):
            where = f"gemm_visibility: {line!r}"
            key, words = _key_value(line, "gemm_visibility", "'speed = after_published' or 'stdout = visible'")
            key = _check_key(key, where, VISIBILITY_KEYS)
            if len(words) != 1:
                raise ValueError(f"{where}: expected one visibility; valid visibilities: {', '.join(VISIBILITIES)}")
            value = _visibility(words[0], where)
            if key in extra:
                extra[key] = value
            else:
                visibility[key] = value
        threshold = _threshold(get("gemm_performance_threshold"), "gemm_performance_threshold")
        return cls(weights=weights, visibility=visibility, default_visibility=extra["default"],
                   results_visibility=extra["results"], stdout_visibility=extra["stdout"],
                   performance_threshold=threshold)


# ---- markers for the user's own tests ------------------------------------------------

def _marker_value(item: Any, name: str, usage: str) -> Any:
    marker = item.get_closest_marker(name)
    if marker is None:
        return None
    args = tuple(marker.args) + tuple(marker.kwargs.values())
    if len(args) != 1:
        raise ValueError(f"{getattr(item, 'nodeid', item)}: use {usage}; got args={tuple(marker.args)!r} "
                         f"kwargs={dict(marker.kwargs)!r}")
    return args[0]


def weight_from_marker(item: Any) -> float | None:
    """The points of ``@pytest.mark.gemm_weight(points)`` on a test item, or None."""
    usage = "@pytest.mark.gemm_weight(points), e.g. gemm_weight(5)"
    value = _marker_value(item, "gemm_weight", usage)
    if value is None:
        return None
    return _weight(value, f"{getattr(item, 'nodeid', item)}: use {usage}")


def visibility_from_marker(item: Any) -> str | None:
    """The Gradescope visibility of ``@pytest.mark.gemm_visibility("hidden")``, or None."""
    usage = "@pytest.mark.gemm_visibility(visibility), e.g. gemm_visibility('hidden')"
    value = _marker_value(item, "gemm_visibility", usage)
    if value is None:
        return None
    return _visibility(value, f"{getattr(item, 'nodeid', item)}: use {usage}")


def user_test_record(item: Any, outcome: str, message: str | None = None,
                     category: str | None = None) -> dict[str, Any] | None:
    """A record for a user test carrying gemm_weight/gemm_visibility, or None without them.

    The check name is the test's node id without its parameters, so the
    parametrizations of one test form one Gradescope test with partial credit.
    """
    weight, visibility = weight_from_marker(item), visibility_from_marker(item)
    if weight is None and visibility is None:
        return None
    nodeid = str(getattr(item, "nodeid", item))
    base, _, param = nodeid.partition("[")
    record: dict[str, Any] = {"kernel": None, "precision": None, "check": base, "shape": None,
                              "params": {"id": param.rstrip("]")} if param else {}, "outcome": outcome,
                              "category": category}
    if message:
        record["message"] = message
    if weight is not None:
        record["weight"] = weight
    if visibility is not None:
        record["visibility"] = visibility
    return record


# ---- scoring ------------------------------------------------------------------------

def _case_label(r: dict[str, Any]) -> str:
    parts = []
    if r.get("shape"):
        parts.append("x".join(str(d) for d in r["shape"]))
    for key, value in (r.get("params") or {}).items():
        parts.append(str(value) if key in ("arch", "id") else f"{key}={value}")
    return " ".join(parts) or str(r.get("check"))


def _first_lines(message: str | None, category: str | None) -> list[str]:
    text = (message or "").strip() or "failed (no message)"
    if category and not text.startswith(f"[{category}]"):
        text = f"[{category}] {text}"
    lines = text.splitlines()
    out = [line if len(line) <= _MAX_LINE else line[:_MAX_LINE] + "..." for line in lines[:_MAX_MESSAGE_LINES]]
    if len(lines) > _MAX_MESSAGE_LINES:
        out.append(f"  ... ({len(lines) - _MAX_MESSAGE_LINES} more lines)")
    return out


def _skip_summary(skipped: list[dict[str, Any]]) -> str:
    reasons = Counter(((r.get("message") or "").strip() or "skipped").splitlines()[0] for r in skipped)
    common = reasons.most_common(3)
    if len(common) == 1:
        return common[0][0]
    text = "; ".join(f"{reason} ({n})" for reason, n in common)
    return text + ("; ..." if len(reasons) > 3 else "")


def _speed_credit(r: dict[str, Any], threshold: float) -> float:
    fraction = r.get("fraction_of_cublas")
    if r.get("category") in UNTRUSTED_TIMING or not isinstance(fraction, (int, float)):
        return 0.0
    return max(0.0, min(1.0, float(fraction) / threshold))


def _noun(check: str, records: list[dict[str, Any]]) -> str:
    if check == "compile":
        return "architecture" if len(records) == 1 else "architectures"
    if any(r.get("params") for r in records):
        return "case" if len(records) == 1 else "cases"
    return "shape" if len(records) == 1 else "shapes"


@dataclass
class _Group:
    kernel: str | None
    check: str
    records: list[dict[str, Any]]


def _groups(records: Sequence[dict[str, Any]], config: GradingConfig,
            kernels: Sequence[str] | None) -> list[_Group]:
    order: list[str | None] = []
    by_key: dict[tuple[str | None, str], list[dict[str, Any]]] = {}
    for r in records:
        k = r.get("kernel")
        if k is not None and kernels is not None and k not in kernels:
            continue
        if k not in order:
            order.append(k)
        by_key.setdefault((k, r["check"]), []).append(r)
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
    marked = [r["weight"] for r in g.records if isinstance(r.get("weight"), (int, float))]
    return float(max(marked)) if marked else config.weight(g.check)


def _group_visibility(g: _Group, config: GradingConfig) -> str:
    marked = [r["visibility"] for r in g.records if r.get("visibility") in VISIBILITIES]
    return marked[0] if marked else config.visibility_of(g.check)


def _score_group(g: _Group, config: GradingConfig, prefix: bool) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the Gradescope test, the machine-readable tally)."""
    weight = _group_weight(g, config)
    passed = [r for r in g.records if r.get("outcome") == "passed"]
    failed = [r for r in g.records if r.get("outcome") == "failed"]
    skipped = [r for r in g.records if r.get("outcome") == "skipped"]
    ran = passed + failed
    label = LABELS.get(g.check, g.check)
    lines: list[str] = []
    if not g.records:
        score = 0.0
        what = f"kernel {g.kernel!r}" if g.kernel else "the submission"
        lines.append(f"nothing ran: no {label} check ran for {what}, so it scores 0")
        if g.check in ABSENT_HINTS:
            lines.append(f"({ABSENT_HINTS[g.check]})")
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
        if g.check == "speed" and isinstance(r.get("timing"), dict) and r.get("outcome") != "skipped":
            t = r["timing"]
            frac = r.get("fraction_of_cublas")
            frac_text = f", {frac:.3f} x cuBLAS" if isinstance(frac, (int, float)) else ""
            lines.append(f"{_case_label(r)}: {t.get('tflops', 0):.2f} TFLOP/s, median "
                         f"{t.get('median_ms', 0):.3f} ms{frac_text}")
    if failed:
        lines.append("")
        lines.append(f"failures ({len(failed)}):")
        for r in failed[:config.max_failures_listed]:
            first = _first_lines(r.get("message"), r.get("category"))
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
    categories = sorted({r.get("category") or "failed" for r in failed})
    test: dict[str, Any] = {
        "name": name, "score": score, "max_score": weight,
        "status": "passed" if ran and not failed else "failed",
        "output": "\n".join(lines), "visibility": _group_visibility(g, config),
        "tags": [g.check] + categories,
    }
    tally = {"score": score, "max_score": weight, "passed": len(passed), "failed": len(failed),
             "skipped": len(skipped)}
    return test, tally


def _no_gpu_reason(records: Sequence[dict[str, Any]]) -> str | None:
    for r in records:
        message = (r.get("message") or "").strip()
        if r.get("outcome") == "skipped" and message.startswith(NO_GPU_PREFIX):
            return message.splitlines()[0]
    return None


def _correct(records: Sequence[dict[str, Any]], kernel: str) -> tuple[bool, list[str]]:
    """No compile, launch or correctness check failed, and at least one correctness check passed."""
    mine = [r for r in records if r.get("kernel") == kernel and r.get("check") != "speed"]
    failed = sorted({r.get("category") or "failed" for r in mine if r.get("outcome") == "failed"})
    verified = any(r.get("outcome") == "passed" and r.get("check") not in ("compile", "launch") for r in mine)
    return not failed and verified, failed


def _best_timing(records: Sequence[dict[str, Any]], kernel: str) -> dict[str, Any] | None:
    timed = [r for r in records if r.get("kernel") == kernel and r.get("check") == "speed"
             and isinstance(r.get("timing"), dict) and r.get("category") not in UNTRUSTED_TIMING]
    return max(timed, key=lambda r: r["timing"].get("tflops", 0.0)) if timed else None


def build_results(records: Sequence[dict[str, Any]], config: GradingConfig | None = None, *,
                  kernels: Sequence[str] | None = None, execution_time: float | None = None) -> dict[str, Any]:
    """Gradescope's results.json as a dict.

    ``kernels``: the names of the kernels under test, the submission first (default:
    every kernel in the records, in order of appearance); other kernels' records (the
    reference ladder) are ignored. Each kernel gets one test per check group; user
    tests (records whose kernel is None, check is a node id) get one test each.
    """
    config = config or GradingConfig()
    records = [r for r in records if isinstance(r, dict) and r.get("check")]
    groups = _groups(records, config, kernels)
    graded = [k for k in dict.fromkeys(g.kernel for g in groups) if k is not None]
    tests, checks = [], {}
    for g in groups:
        test, tally = _score_group(g, config, prefix=len(graded) > 1)
        tests.append(test)
        agg = checks.setdefault(g.check, {"score": 0.0, "max_score": 0.0, "passed": 0, "failed": 0, "skipped": 0})
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
        precision = next((r.get("precision") for r in records if r.get("kernel") == submission), None)
        lines.append(f"pytest-gemm: kernel {submission!r}" + (f" ({precision})" if precision else "")
                     + f": {score:g} / {max_score:g} points")
    if no_gpu:
        lines.append(f"{no_gpu}. Every GPU check was skipped and scores 0; only the compile checks ran. "
                     "Grade on a machine with a usable NVIDIA GPU.")
    extra: dict[str, Any] = {"schema_version": SCHEMA_VERSION, "submission": submission, "kernels": graded,
                             "score": score, "max_score": max_score, "checks": checks, "no_gpu": no_gpu,
                             "correct": False, "tflops": None, "fraction_of_cublas": None,
                             "failure_categories": []}
    result: dict[str, Any] = {"score": score, "output": "", "visibility": config.results_visibility,
                              "stdout_visibility": config.stdout_visibility, "tests": tests}
    if execution_time is not None:
        result["execution_time"] = round(float(execution_time), 3)
    if submission is not None:
        correct, categories = _correct(records, submission)
        extra["correct"], extra["failure_categories"] = correct, categories
        best = _best_timing(records, submission)
        if best is not None:
            extra["tflops"] = best["timing"].get("tflops")
            extra["fraction_of_cublas"] = best.get("fraction_of_cublas")
        if correct and best is not None:
            board = [{"name": "TFLOP/s", "value": round(float(best["timing"].get("tflops", 0.0)), 3), "order": "desc"}]
            if isinstance(best.get("fraction_of_cublas"), (int, float)):
                board.append({"name": "fraction of cuBLAS", "value": round(float(best["fraction_of_cublas"]), 4),
                              "order": "desc"})
            result["leaderboard"] = board
            lines.append(f"leaderboard: {board[0]['value']:g} TFLOP/s"
                         + (f", {board[1]['value']:g} x cuBLAS" if len(board) > 1 else ""))
        elif categories:
            lines.append(f"not on the leaderboard: correctness checks failed ({', '.join(categories)})")
        elif not correct:
            lines.append("not on the leaderboard: no correctness check ran")
        else:
            lines.append("not on the leaderboard: the speed check gave no trustworthy timing")
    result["output"] = "\n".join(lines)
    result["extra_data"] = {"pytest_gemm": extra}
    return result


def write_results(path: str | Path, records: Sequence[dict[str, Any]], config: GradingConfig | None = None, *,
                  kernels: Sequence[str] | None = None, execution_time: float | None = None) -> dict[str, Any]:
    """Build the results and write them to ``path`` (parents created); returns them."""
    result = build_results(records, config, kernels=kernels, execution_time=execution_time)
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
                                           "failure_categories": []}}}


def write_failure_results(path: str | Path, reason: str, config: GradingConfig | None = None) -> dict[str, Any]:
    """For a run that stops before any check (a bad kernel spec, a compile error): write
    results scoring 0 with the reason, so the student sees why instead of a missing file."""
    config = config or GradingConfig()
    result = failure_results(f"pytest-gemm could not grade this submission:\n{reason}", config.max_score(), config)
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(result, indent=2, default=str))
    return result


__all__ = ["CHECKS", "DEFAULT_WEIGHTS", "GradingConfig", "VISIBILITIES", "build_results", "failure_results",
           "user_test_record", "visibility_from_marker", "weight_from_marker", "write_failure_results",
           "write_results"]
