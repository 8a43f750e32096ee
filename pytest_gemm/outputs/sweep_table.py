"""The sweep's "TFLOP/s by size" table and the series the plot draws, from the check records."""
from __future__ import annotations

import statistics
from typing import Any

from ..measure.sweep import PRECISION_ORDER, by_size, flops_of, is_cublas, size_label
from ..model.shapes import Shape
from .records import RunResults
from tabulate import tabulate

def sweep_series(records: Any) -> tuple[list[Shape], list[dict[str, Any]]]:
    """(sizes smallest first, series) for the table and the plot.

    A series is ``{"name", "precision", "cublas", "baseline", "points": {shape: entry}}``, one per
    kernel whose sweep passed and which failed no correctness check, plus for each precision
    without a cuBLAS kernel among them a baseline series ("cuBLAS fp32 (baseline)"): the median
    of the cuBLAS timings measured beside each kernel."""

    run = RunResults.build(records)
    failed = {name for name, result in run.kernels.items() if not result.trusted}  # not drawn
    series: list[dict[str, Any]] = []
    beside: dict[str, dict[Shape, list[dict[str, Any]]]] = {}
    for r in run.records:
        if r.check != "sweep" or r.outcome != "passed" or r.kernel in failed:
            continue
        points = {tuple(e["shape"]): e for e in r.facts.get("sweep") or [] if isinstance(e, dict) and e.get("shape")}
        if not points:
            continue
        precision = r.precision or "fp32"
        series.append({"name": r.kernel, "precision": precision, "cublas": is_cublas(r.kernel),
                       "baseline": False, "points": points})
        for shape, e in points.items():
            if e.get("cublas_median_ms"):
                beside.setdefault(precision, {}).setdefault(shape, []).append(e)  # type: ignore[arg-type]
    covered = {s["precision"] for s in series if s["cublas"]}
    for precision, at in sorted(beside.items(), key=lambda kv: PRECISION_ORDER.get(kv[0], 9)):
        if precision in covered:
            continue
        points = {}
        for shape, entries in at.items():
            ms = statistics.median(e["cublas_median_ms"] for e in entries)
            points[shape] = {"shape": list(shape), "median_ms": ms, "tflops": flops_of(shape) / (ms * 1e-3) / 1e12,
                             "fraction_of_cublas": 1.0}
        series.append({"name": f"cuBLAS {precision} (baseline)", "precision": precision, "cublas": True,
                       "baseline": True, "points": points})
    sizes = by_size(shape for s in series for shape in s["points"])
    if sizes:
        largest = sizes[-1]
        series.sort(key=lambda s: (-(s["points"].get(largest) or {}).get("tflops", -1.0), s["name"]))
    return sizes, series


def sweep_table(records: Any) -> list[str]:
    """The terminal's "TFLOP/s by size" table (tabulate), fastest at the largest size first."""
    sizes, series = sweep_series(records)
    if not series:
        return []
    rows = []
    for s in series:
        cells = []
        for shape in sizes:
            e = s["points"].get(shape)
            if e is None:
                cells.append("-")
            elif s["baseline"] or not isinstance(e.get("fraction_of_cublas"), (int, float)):
                cells.append(f"{e['tflops']:.2f}")
            else:
                cells.append(f"{e['tflops']:.2f} ({e['fraction_of_cublas']:.2f}x)")
        rows.append([s["name"], s["precision"], *cells])
    headers = ["kernel", "precision", *[size_label(s) for s in sizes]]
    return (["TFLOP/s by size (x cuBLAS at the same precision and size; '-': size not claimed):"]
            + tabulate(rows, headers=headers, tablefmt="simple", disable_numparse=True).splitlines())
