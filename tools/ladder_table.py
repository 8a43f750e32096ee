#!/usr/bin/env python3
"""The reference ladder as a markdown table, from a ``--gemm-report`` JSON.

One row per kernel: rung, precision, verdict, TFLOP/s at one shape (4096^3
unless ``--shape``) and the fraction of cuBLAS at the same precision (FP32
rungs against ``cublas-fp32``, the WMMA rungs against ``cublas-fp16`` /
``cublas-bf16``, each baseline against itself). The fraction is the one the
speed check measured in the same test (``fraction_of_cublas``); where the
report has none it is computed from the baseline's own timing in the report,
and is left blank where neither exists. Ladder rungs come in ladder order,
any other kernel after them in report order.

    python3 -m pytest --pyargs conformance --gemm-report ladder.json
    python3 tools/ladder_table.py ladder.json > ladder.md
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Sequence

Shape = tuple[int, int, int]
DEFAULT_SHAPE: Shape = (4096, 4096, 4096)
HEADERS = ("rung", "precision", "verdict", "TFLOP/s at {shape}", "of cuBLAS", "baseline")


def baseline_name(precision: str | None) -> str | None:
    """The cuBLAS baseline a kernel of this precision is measured against."""
    return f"cublas-{precision}" if precision in ("fp32", "tf32", "fp16", "bf16") else None


def _ladder_order() -> list[str]:
    try:
        import reference_kernels  # never touches CUDA
    except ImportError:
        return []
    return [str(k.name) for k in reference_kernels.LADDER]


def _timing_at(kernel: dict[str, Any], shape: Shape) -> dict[str, Any] | None:
    """The first timing at ``shape`` with a numeric rate, or None."""
    for t in kernel.get("timings") or []:
        if t.get("shape") is not None and tuple(t["shape"]) == tuple(shape) and _number(t.get("tflops")):
            return t
    return None


def _number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def ladder_rows(report: dict[str, Any], shape: Shape = DEFAULT_SHAPE,
                order: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """Pure: one dict per kernel with rung, precision, verdict, tflops, fraction, baseline.

    ``tflops`` and ``fraction`` are None where the report has no timing at ``shape``
    (a failed or skipped kernel, or a shape that was not timed)."""
    kernels = list(report.get("kernels") or [])
    by_name = {k.get("name"): k for k in kernels}
    rank = {name: i for i, name in enumerate(_ladder_order() if order is None else order)}
    kernels.sort(key=lambda k: (0, rank[k.get("name")]) if k.get("name") in rank else (1, 0))  # stable
    rows = []
    for k in kernels:
        precision = k.get("precision")
        base = baseline_name(precision)
        timing = _timing_at(k, shape)
        tflops = float(timing["tflops"]) if timing else None
        fraction = None
        if timing is not None:
            if _number(timing.get("fraction_of_cublas")):
                fraction = float(timing["fraction_of_cublas"])
            else:
                base_timing = _timing_at(by_name.get(base) or {}, shape) if base else None
                if base_timing is not None and float(base_timing["tflops"]) > 0:
                    fraction = tflops / float(base_timing["tflops"])  # type: ignore[operator]
        rows.append({"rung": k.get("name"), "precision": precision, "verdict": k.get("verdict"),
                     "tflops": tflops, "fraction": fraction, "baseline": base})
    return rows


def _shape_label(shape: Shape) -> str:
    m, n, k = shape
    return f"{m}^3" if m == n == k else f"{m}x{n}x{k}"


def _cell(x: Any) -> str:
    return "" if x is None else str(x).replace("|", "\\|")


def markdown_table(rows: Sequence[dict[str, Any]], shape: Shape = DEFAULT_SHAPE) -> str:
    """Pure: the rows as a GitHub markdown table (blank cells where there is no figure)."""
    headers = [h.format(shape=_shape_label(shape)) for h in HEADERS]
    lines = ["| " + " | ".join(headers) + " |", "| " + " | ".join(["---"] * 3 + ["---:"] * 2 + ["---"]) + " |"]
    for r in rows:
        tflops = "" if r["tflops"] is None else f"{r['tflops']:.2f}"
        fraction = "" if r["fraction"] is None else f"{r['fraction']:.3f}"
        base = "" if r["baseline"] is None else f"`{r['baseline']}`"
        cells = [f"`{_cell(r['rung'])}`", _cell(r["precision"]), _cell(r["verdict"]), tflops, fraction, base]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _parse_shape(text: str) -> Shape:
    parts = text.lower().replace("*", "x").split("x")
    try:
        dims = [int(p) for p in parts]
    except ValueError:
        raise argparse.ArgumentTypeError(f"shape {text!r}: expected N or MxNxK, e.g. 4096 or 1000x64x300") from None
    if len(dims) == 1:
        dims *= 3
    if len(dims) != 3 or min(dims) < 1:
        raise argparse.ArgumentTypeError(f"shape {text!r}: expected N or MxNxK, e.g. 4096 or 1000x64x300")
    return dims[0], dims[1], dims[2]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="ladder_table.py",
        description="Print the ladder (rung, precision, verdict, TFLOP/s, fraction of cuBLAS at the same "
                    "precision) as a markdown table from a pytest --gemm-report JSON file.")
    parser.add_argument("report", type=Path, help="the JSON written by pytest --gemm-report PATH")
    parser.add_argument("--shape", type=_parse_shape, default=DEFAULT_SHAPE,
                        help="the timed shape to tabulate: N or MxNxK (default: 4096)")
    args = parser.parse_args(argv)
    try:
        report = json.loads(args.report.read_text())
    except OSError as exc:
        parser.error(f"cannot read {args.report}: {exc.strerror or exc}; pass the file written by --gemm-report")
    except json.JSONDecodeError as exc:
        parser.error(f"{args.report} is not JSON ({exc}); pass the file written by --gemm-report")
    if not isinstance(report, dict) or not isinstance(report.get("kernels"), list):
        parser.error(f"{args.report} has no \"kernels\" list; pass the file written by --gemm-report")
    print(markdown_table(ladder_rows(report, args.shape), args.shape))
    return 0


if __name__ == "__main__":
    ROOT = Path(__file__).resolve().parent.parent
    if str(ROOT) not in sys.path:  # find reference_kernels (the ladder order) beside this checkout
        sys.path.insert(0, str(ROOT))
    sys.exit(main())
