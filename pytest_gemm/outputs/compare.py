"""``--gemm-compare OLD.json``: this run beside a saved one, kernel by kernel (also
``tools/compare_reports.py``, which compares two saved reports with the same code).

Pure (reports in, a ``Comparison`` out), tested with no GPU; the speed call of each kernel is
``speed_stats.call_speed`` (scipy's bootstrap), documented in docs/compare.md. What is said, in
order: kernels whose correctness changed (a verdict or root cause that moved), whether the two
setups differ (GPU, driver, CUDA, CuPy, NVRTC, pytest-gemm; the kernels' commits are shown, not
counted as a difference), then one row per kernel and shape timed in both runs. On the same GPU
the per-call times are compared; on two different GPUs each run's times are divided by that
run's cuBLAS median at the same precision and shape (a fraction of cuBLAS is what travels
between GPUs), and the comparison says so.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .speed_stats import RUN_NOISE, SLOWER, UNSURE, SpeedCall, call_speed
from tabulate import tabulate

SETUP_KEYS = (("gpu", "GPU"), ("driver", "driver"), ("driver_cuda", "driver's CUDA"),
              ("cuda_runtime", "CUDA runtime"), ("cupy", "CuPy"), ("nvrtc", "NVRTC"), ("pytest_gemm", "pytest-gemm"))
_PERCENT = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*%\s*$")


def parse_fail(text: str) -> float:
    """``--gemm-compare-fail``: ``"5%"`` -> 0.05; anything else raises ValueError naming the value."""
    return _percent(text, "--gemm-compare-fail", "e.g. 5% or 2.5% (a kernel surely slower than the saved run by "
                                                 "more than that fails the run)")


def parse_noise(text: str) -> float:
    """``--gemm-compare-noise``: ``"2%"`` -> 0.02, the half-width of the noise band (docs/compare.md)."""
    return _percent(text, "--gemm-compare-noise", "e.g. 1% (the default) or 2.5% (a change smaller than that is "
                                                  "never called slower or faster)")


def _percent(text: str, option: str, example: str) -> float:
    match = _PERCENT.match(str(text))
    value = float(match.group(1)) / 100 if match else None
    if value is None or not 0 < value < 10:
        raise ValueError(f"{option} {text!r}: expected a percentage above 0, {example}")
    return value


def read_report(path: str | Path) -> dict[str, Any]:
    """A saved ``--gemm-report`` (any schema version); ValueError saying what is wrong."""
    try:
        report = json.loads(Path(path).read_text())
    except OSError as exc:
        raise ValueError(f"--gemm-compare {str(path)!r}: cannot read it ({exc.strerror or exc}); give the JSON file "
                         "a run wrote with --gemm-report") from None
    except ValueError as exc:
        raise ValueError(f"--gemm-compare {str(path)!r}: not JSON ({exc}); give the file a run wrote with "
                         "--gemm-report") from None
    if not isinstance(report, dict) or not isinstance(report.get("kernels"), list):
        raise ValueError(f"--gemm-compare {str(path)!r}: not a pytest-gemm report (no 'kernels' list); give the "
                         "file a run wrote with --gemm-report")
    problem = malformed(report)
    if problem:
        raise ValueError(f"--gemm-compare {str(path)!r}: not a report a run wrote ({problem}); give the file a run "
                         "wrote with --gemm-report, unedited")
    return report


def _number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def malformed(report: dict[str, Any]) -> str | None:
    """What in ``report`` the comparison would trip on (any schema version), or None: each kernel
    an object with a name, each timing an object with a shape of integers, numbers where times are."""
    if not isinstance(report.get("meta", {}) or {}, dict):
        return "'meta' is not an object"
    for i, k in enumerate(report["kernels"]):
        if not isinstance(k, dict) or not isinstance(k.get("name"), str):
            return f"kernels[{i}] has no name"
        timings = k.get("timings") or []
        if not isinstance(timings, list):
            return f"{k['name']}: 'timings' is not a list"
        for j, t in enumerate(timings):
            where = f"{k['name']}: timings[{j}]"
            if not isinstance(t, dict):
                return f"{where} is not an object"
            shape = t.get("shape")
            if shape is not None and not (isinstance(shape, list) and all(isinstance(n, int) for n in shape)):
                return f"{where}: 'shape' is not a list of integers"
            for key in ("median_ms", "cublas_median_ms"):
                if t.get(key) is not None and not _number(t[key]):
                    return f"{where}: {key!r} is not a number"
            times = t.get("times_ms")
            if times is not None and not (isinstance(times, list) and all(_number(x) for x in times)):
                return f"{where}: 'times_ms' is not a list of numbers"
    return None


@dataclass(frozen=True)
class Change:
    """A kernel whose correctness differs between the runs."""
    kernel: str
    old: str
    new: str
    became_wrong: bool

    @property
    def line(self) -> str:
        return f"{self.kernel}: {self.old} -> {self.new}"


@dataclass(frozen=True)
class SpeedRow:
    kernel: str
    shape: tuple[int, ...]
    old_ms: float
    new_ms: float
    speed: SpeedCall
    fails: bool


@dataclass(frozen=True)
class Comparison:
    old_label: str
    threshold: float | None
    setup: list[str]                     # how the setups differ (empty: the same)
    basis: str                           # "time" or "fraction of cuBLAS"
    changes: list[Change]
    rows: list[SpeedRow]
    only_old: list[str] = field(default_factory=list)
    only_new: list[str] = field(default_factory=list)
    commits: str = ""
    noise: float = RUN_NOISE             # the noise band's half-width (--gemm-compare-noise)

    def counts(self) -> dict[str, int]:
        out = {"slower": 0, "faster": 0, "same": 0, "unsure": 0}
        for r in self.rows:
            out[r.speed.call] += 1
        return out

    def gate_failure(self) -> str | None:
        """Why ``--gemm-compare-fail`` fails the run, or None (also None with no threshold)."""
        if self.threshold is None:
            return None
        reasons = [f"{r.kernel} at {'x'.join(map(str, r.shape))} is {100 * (r.speed.ratio - 1):.1f} % slower "
                   f"(interval {r.speed.low:.4f}..{r.speed.high:.4f})" for r in self.rows if r.fails]
        reasons += [f"{c.kernel} became wrong ({c.new})" for c in self.changes if c.became_wrong]
        if not self.rows and not reasons:
            reasons.append("no kernel was timed in both runs, so nothing was compared")
        changed = {c.kernel for c in self.changes}  # a fixed kernel's rows: judged by its correctness change
        steady = [r for r in self.rows if r.kernel not in changed]
        if not reasons and steady and all(r.speed.ratio is None for r in steady):
            # every row unsure before any statistic (no per-call times, a shared GPU, a failed
            # verdict): the gate judged nothing, and a gate that judged nothing is not a pass
            whys = sorted({r.speed.why for r in steady if r.speed.why})
            reasons.append(f"no timing could be compared ({'; '.join(whys)}), so nothing was judged")
        if not reasons:
            return None
        return f"--gemm-compare-fail={100 * self.threshold:g}% against {self.old_label}: " + "; ".join(reasons)


def _meta(report: dict[str, Any]) -> dict[str, Any]:
    meta = dict(report.get("meta") or {})
    if not meta.get("gpu") and isinstance(report.get("device"), dict):
        meta["gpu"] = report["device"].get("name")
    return meta


def setup_differences(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    if not old.get("meta"):
        return ["the saved run has no meta block (a report older than schema 3): its setup is unknown"]
    a, b = _meta(old), _meta(new)
    return [f"{label} {a.get(key) or '?'} -> {b.get(key) or '?'}" for key, label in SETUP_KEYS
            if a.get(key) != b.get(key)]


def _commits(report: dict[str, Any]) -> str:
    return ", ".join(c["commit"][:7] + (" (modified)" if c.get("dirty") else "")
                     for c in (report.get("meta") or {}).get("kernels") or () if c.get("commit")) or "?"


def _cause(k: dict[str, Any]) -> str:
    verdict = str(k.get("verdict") or "?")
    if verdict == "failed":
        return f"failed ({k.get('primary_category') or 'failed'}: {k.get('primary_check') or ''}: " \
               f"{(k.get('diagnosis') or '')[:120]})"
    return verdict


def correctness_changes(old: dict[str, Any], new: dict[str, Any]) -> list[Change]:
    """Kernels in both runs whose verdict or root cause differs; those that became wrong first."""
    a = {k["name"]: k for k in old.get("kernels", [])}
    changes = []
    for k in new.get("kernels", []):
        before = a.get(k["name"])
        if before is None or (before.get("verdict"), before.get("primary_category")) == \
                (k.get("verdict"), k.get("primary_category")):
            continue
        changes.append(Change(k["name"], _cause(before), _cause(k),
                              k.get("verdict") == "failed" and before.get("verdict") != "failed"))
    return sorted(changes, key=lambda c: not c.became_wrong)


def _timings(report: dict[str, Any]) -> dict[tuple[str, tuple[int, ...]], tuple[dict[str, Any], dict[str, Any]]]:
    return {(k["name"], tuple(t["shape"])): (k, t) for k in report.get("kernels", [])
            for t in k.get("timings") or () if t.get("shape") and isinstance(t.get("median_ms"), (int, float))}


def _samples(t: dict[str, Any], by_cublas: bool) -> list[float] | str:
    times = list(t.get("times_ms") or [])
    if not times:
        return "no per-call times (a report older than schema 3)"
    if not by_cublas:
        return times
    cublas = t.get("cublas_median_ms")
    if not isinstance(cublas, (int, float)) or cublas <= 0:
        return "no cuBLAS time to compare across GPUs"
    return [x / cublas for x in times]


def _drift(a: dict[str, Any], b: dict[str, Any], by_cublas: bool) -> float:
    """How far the reference both runs timed (cuBLAS at this precision and shape) moved between
    them, as its ratio of medians (1.0 when unknown, or across GPUs, where the times are already
    fractions of it): the noise band reaches out to it on that side (speed_stats.SpeedCall)."""
    if by_cublas:
        return 1.0
    old, new = a.get("cublas_median_ms"), b.get("cublas_median_ms")
    if isinstance(old, (int, float)) and isinstance(new, (int, float)) and old > 0 and new > 0:
        return new / old
    return 1.0


def _untrusted(k: dict[str, Any]) -> bool:
    return k.get("verdict") == "failed" and k.get("primary_category") is not None


def compare(old: dict[str, Any], new: dict[str, Any], threshold: float | None = None,
            old_label: str = "the saved run", noise: float = RUN_NOISE) -> Comparison:
    """``noise``: the noise band's half-width (``--gemm-compare-noise``; 1 % by default)."""
    setup = setup_differences(old, new)
    gpus = (_meta(old).get("gpu"), _meta(new).get("gpu"))
    by_cublas = bool(old.get("meta")) and gpus[0] != gpus[1]
    a, b = _timings(old), _timings(new)
    rows = []
    for key in [k for k in b if k in a]:
        (ka, ta), (kb, tb) = a[key], b[key]
        if _untrusted(ka) or _untrusted(kb):
            speed = SpeedCall(UNSURE, None, None, None, noise, "a run's verdict failed: its timing is not ranked")
        elif any(t.get("gpu_shared") or t.get("gpu_busy") for t in (ta, tb)):
            speed = SpeedCall(UNSURE, None, None, None, noise, "the GPU was shared or busy in a run")
        else:
            sa, sb = _samples(ta, by_cublas), _samples(tb, by_cublas)
            why = sa if isinstance(sa, str) else sb if isinstance(sb, str) else None
            speed = SpeedCall(UNSURE, None, None, None, noise, why) if why else \
                call_speed(sa, sb, noise, _drift(ta, tb, by_cublas))  # type: ignore[arg-type]
        rows.append(SpeedRow(key[0], key[1], ta["median_ms"], tb["median_ms"], speed, speed.fails(threshold)))
    name = lambda key: f"{key[0]} at {'x'.join(map(str, key[1]))}"  # noqa: E731
    return Comparison(old_label, threshold, setup, "fraction of cuBLAS" if by_cublas else "time",
                      correctness_changes(old, new), rows, sorted(name(k) for k in a if k not in b),
                      sorted(name(k) for k in b if k not in a), f"{_commits(old)} -> {_commits(new)}", noise)


def _pct(x: float | None) -> str:
    return "" if x is None else f"{100 * (x - 1):+.2f}%"


def _moved(speed: SpeedCall) -> bool:
    """Did the reference move by more than the noise band (so the band reached out to it)?"""
    return speed.top > 1.0 + speed.band or speed.bottom < 1.0 / (1.0 + speed.band)


def render(c: Comparison) -> list[str]:
    lines = [f"compared with {c.old_label} (kernels at {c.commits})"]
    if c.changes:
        lines.append("correctness changed:")
        lines += [f"  {'BECAME WRONG: ' if ch.became_wrong else ''}{ch.line}" for ch in c.changes]
    if c.setup:
        how = ("speeds compared as fractions of cuBLAS on each GPU" if c.basis != "time"
               else "speeds compared as times")
        lines.append(f"the setups differ: {'; '.join(c.setup)}; {how}")
    if c.rows:
        table = [[r.kernel, "x".join(map(str, r.shape)), f"{r.old_ms:.4f}", f"{r.new_ms:.4f}", _pct(r.speed.ratio),
                  "" if r.speed.low is None else f"{_pct(r.speed.low)}..{_pct(r.speed.high)}",
                  r.speed.call + (" FAIL" if r.fails else "") + (f" ({r.speed.why})" if r.speed.why else "")
                  + (f" (cuBLAS moved {_pct(r.speed.drift)}: band {_pct(r.speed.bottom)}..{_pct(r.speed.top)})"
                     if _moved(r.speed) else "")]
                 for r in c.rows]
        lines += tabulate(table, headers=["kernel", "shape", "saved ms", "now ms", "change", "95% interval", "call"],
                          tablefmt="simple", disable_numparse=True).splitlines()
    counts = c.counts()
    moved = ", out to cuBLAS's own change on the side it moved, where that is more" if any(
        _moved(r.speed) for r in c.rows) else ""
    lines.append(f"{len(c.rows)} timings compared ({c.basis}; noise band +-{100 * c.noise:.1f}%{moved}, docs/compare.md): "
                 + ", ".join(f"{n} {k}" for k, n in counts.items()))
    for label, names in (("only in the saved run", c.only_old), ("only in this run", c.only_new)):
        if names:
            lines.append(f"{label}: {', '.join(names)}")
    failure = c.gate_failure()
    if c.threshold is not None:
        lines.append(f"FAILED {failure}" if failure else f"--gemm-compare-fail={100 * c.threshold:g}%: passed")
    return lines


def as_dict(c: Comparison) -> dict[str, Any]:
    """The comparison as JSON (tools/compare_reports.py --out)."""
    return {"old": c.old_label, "threshold": c.threshold, "setup_differs": c.setup, "basis": c.basis,
            "correctness_changed": [{"kernel": ch.kernel, "old": ch.old, "new": ch.new, "became_wrong": ch.became_wrong}
                                    for ch in c.changes],
            "rows": [{"kernel": r.kernel, "shape": list(r.shape), "old_ms": r.old_ms, "new_ms": r.new_ms,
                      "call": r.speed.call, "ratio": r.speed.ratio, "low": r.speed.low, "high": r.speed.high,
                      "band": r.speed.band, "band_low": r.speed.bottom, "band_high": r.speed.top,
                      "cublas_ratio": r.speed.drift, "why": r.speed.why, "fails": r.fails} for r in c.rows],
            "only_old": c.only_old, "only_new": c.only_new, "counts": c.counts(), "failure": c.gate_failure()}
