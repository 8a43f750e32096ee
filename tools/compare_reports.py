#!/usr/bin/env python3
"""Compare the timings of two ``--gemm-report`` JSON files, kernel by kernel and shape by shape.

Made for the question "does running under pytest-xdist change the numbers?": run the same
suite once with ``-n 0`` and once with ``-n 2`` (one worker per GPU), then

    python3 tools/compare_reports.py serial.json parallel.json --tolerance 0.02

prints one row per (kernel, shape) timed in both: the two medians, their relative
difference (parallel / serial - 1), and the same for the fraction of cuBLAS, then one
summary line. Exit status 1 when any median differs by more than the tolerance, or when a
kernel passed in one report and not in the other; rows marked ``gpu_shared`` in either
report are listed but not held to the tolerance (their timing is known to be contended).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Sequence

Key = tuple[str, tuple[int, ...]]


def timings_by_key(report: dict[str, Any]) -> dict[Key, dict[str, Any]]:
    """(kernel, shape) -> the timing entry, for every kernel whose timing has a median."""
    out: dict[Key, dict[str, Any]] = {}
    for kernel in report.get("kernels", []):
        for t in kernel.get("timings") or []:
            if t.get("shape") and isinstance(t.get("median_ms"), (int, float)):
                out[(kernel["name"], tuple(t["shape"]))] = t
    return out


def verdicts(report: dict[str, Any]) -> dict[str, str]:
    return {k["name"]: k.get("verdict", "?") for k in report.get("kernels", [])}


def _rel(new: Any, old: Any) -> float | None:
    if isinstance(new, (int, float)) and isinstance(old, (int, float)) and old:
        return new / old - 1.0
    return None


def compare(serial: dict[str, Any], parallel: dict[str, Any], tolerance: float) -> dict[str, Any]:
    """Rows and a verdict: which timings moved by more than ``tolerance`` and which verdicts changed."""
    a, b = timings_by_key(serial), timings_by_key(parallel)
    rows = []
    for key in sorted(set(a) & set(b)):
        ta, tb = a[key], b[key]
        shared = bool(ta.get("gpu_shared") or tb.get("gpu_shared"))
        diff = _rel(tb["median_ms"], ta["median_ms"])
        rows.append({"kernel": key[0], "shape": list(key[1]), "serial_ms": ta["median_ms"],
                     "parallel_ms": tb["median_ms"], "difference": diff,
                     "fraction_difference": _rel(tb.get("fraction_of_cublas"), ta.get("fraction_of_cublas")),
                     "gpu_shared": shared,
                     "within": shared or (diff is not None and abs(diff) <= tolerance)})
    va, vb = verdicts(serial), verdicts(parallel)
    changed = sorted(name for name in set(va) & set(vb) if va[name] != vb[name])
    held = [r for r in rows if not r["gpu_shared"] and r["difference"] is not None]
    worst = max(held, key=lambda r: abs(r["difference"]), default=None)
    return {"tolerance": tolerance, "rows": rows, "verdicts_changed": changed,
            "only_in_serial": sorted(f"{k}@{'x'.join(map(str, s))}" for k, s in set(a) - set(b)),
            "only_in_parallel": sorted(f"{k}@{'x'.join(map(str, s))}" for k, s in set(b) - set(a)),
            "outside": [r for r in rows if not r["within"]],
            "worst": worst, "ok": bool(rows) and not changed and all(r["within"] for r in rows)}


def render(result: dict[str, Any]) -> str:
    from tabulate import tabulate

    def pct(x: float | None) -> str:
        return "" if x is None else f"{100 * x:+.2f}%"

    table = [[r["kernel"], "x".join(map(str, r["shape"])), f"{r['serial_ms']:.4f}", f"{r['parallel_ms']:.4f}",
              pct(r["difference"]), pct(r["fraction_difference"]),
              "shared" if r["gpu_shared"] else ("ok" if r["within"] else "OUTSIDE")] for r in result["rows"]]
    lines = [tabulate(table, headers=["kernel", "shape", "serial ms", "parallel ms", "median diff",
                                      "x cuBLAS diff", ""], tablefmt="github")]
    worst = result["worst"]
    lines.append(
        f"{len(result['rows'])} timings compared, {len(result['outside'])} outside ±{100 * result['tolerance']:.1f}%"
        + (f"; largest difference {pct(worst['difference'])} ({worst['kernel']})" if worst else "")
        + (f"; verdicts changed: {', '.join(result['verdicts_changed'])}" if result["verdicts_changed"] else ""))
    for side in ("only_in_serial", "only_in_parallel"):
        if result[side]:
            lines.append(f"{side.replace('_', ' ')}: {', '.join(result[side])}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("serial", type=Path, help="report of the -n 0 run")
    parser.add_argument("parallel", type=Path, help="report of the -n 2 (or -n auto) run")
    parser.add_argument("--tolerance", type=float, default=0.02, help="largest relative median difference (0.02)")
    parser.add_argument("--out", type=Path, help="also write the comparison as JSON here")
    args = parser.parse_args(argv)
    try:
        serial, parallel = (json.loads(p.read_text()) for p in (args.serial, args.parallel))
    except (OSError, ValueError) as exc:
        parser.error(f"cannot read a report: {exc}")
    result = compare(serial, parallel, args.tolerance)
    print(render(result))
    if args.out:
        args.out.write_text(json.dumps(result, indent=2))
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
