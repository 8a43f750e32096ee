"""``--gemm-plot PATH.png``: the ranking as a picture (needs the ``plot`` extra, matplotlib).

``plot_ranking(records, path)`` takes the same check records as ``report.py``:

- with sweep results (``--gemm-sweep``): lines of TFLOP/s over the sweep sizes, one per
  kernel whose sweep passed; cuBLAS (the ladder's cuBLAS kernels, or the baseline timed
  beside each kernel) dashed and black-edged;
- otherwise: horizontal bars of TFLOP/s at the benchmark shape for every ranked kernel
  (ladder and kernels under test), fastest on top, coloured by precision, cuBLAS hatched;
  a cuBLAS baseline bar from the speed checks' own cuBLAS timings is added for each
  precision without a cuBLAS kernel among the ranked ones;
- with nothing ranked: a figure that says so (the file is always written).

matplotlib is imported only here, lazily, and drawn through its object API (no pyplot, no
global backend change). Without it: ``PlotUnavailableError`` naming the extra.
"""
from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

from ..measure.sweep import is_cublas, size_label
from .sweep_table import sweep_series
from .records import RunResults
from .report import ranking_rows

INSTALL_HINT = "pip install 'pytest-gemm[plot]'"
COLORS = {"fp32": "#1f77b4", "tf32": "#9467bd", "fp16": "#ff7f0e", "bf16": "#2ca02c"}
CUBLAS_HATCH = "//"
CUBLAS_DASHES = {"fp32": "--", "tf32": ":", "fp16": "-.", "bf16": (0, (5, 1, 1, 1, 1, 1))}


class PlotUnavailableError(ImportError):
    """matplotlib is not installed."""


def require_matplotlib() -> None:
    """Raise PlotUnavailableError (with the install command) when matplotlib cannot be imported."""
    try:
        # lazy: optional (matplotlib)
        import matplotlib  # noqa: F401
    except ImportError as exc:
        raise PlotUnavailableError(f"--gemm-plot needs matplotlib, which is not installed ({exc}); "
                                   f"try {INSTALL_HINT}") from None


def _base_name(label: str) -> str:
    return label.split(" (GPU shared", 1)[0]


def bar_data(records: Any) -> list[dict[str, Any]]:
    """The bars: every ranked kernel (``report.ranking_rows``) and, for each precision with no
    cuBLAS kernel ranked, a baseline from the speed checks' cuBLAS timings (median). Fastest first."""

    run = RunResults.build(records)
    ranked, _ = ranking_rows(run)
    bars = [{"name": row[1], "precision": row[2], "shape": row[3], "tflops": float(row[6]),
             "fraction_of_cublas": row[7], "cublas": is_cublas(_base_name(row[1])), "baseline": False}
            for row in ranked]
    covered = {b["precision"] for b in bars if b["cublas"]}
    timed = {b["name"] for b in bars}
    beside: dict[tuple[str, str], list[float]] = {}
    for r in run.records:
        cublas = r.facts.get("cublas")
        if (r.check != "speed" or r.kernel not in timed or not isinstance(cublas, dict)
                or not isinstance(cublas.get("tflops"), (int, float))):
            continue
        shape = "x".join(map(str, (r.facts.get("timing") or {}).get("shape") or r.shape or []))
        beside.setdefault((r.precision or "fp32", shape), []).append(float(cublas["tflops"]))
    for (precision, shape), values in beside.items():
        if precision not in covered:
            bars.append({"name": f"cuBLAS {precision} (baseline)", "precision": precision, "shape": shape,
                         "tflops": statistics.median(values), "fraction_of_cublas": 1.0, "cublas": True,
                         "baseline": True})
    bars.sort(key=lambda b: -b["tflops"])
    return bars


def _figure(width: float, height: float) -> Any:
    from matplotlib.figure import Figure  # lazy: optional (matplotlib)

    fig = Figure(figsize=(width, height), layout="constrained")
    fig.get_layout_engine().set(w_pad=0.15, h_pad=0.1)  # inches around the axes and their labels
    return fig


def _draw_bars(bars: list[dict[str, Any]]) -> Any:
    from matplotlib.patches import Patch  # lazy: optional (matplotlib)

    fig = _figure(10.0, 1.6 + 0.38 * len(bars))
    ax = fig.add_subplot()
    y = list(range(len(bars)))[::-1]  # fastest on top
    for yi, b in zip(y, bars):
        color = COLORS.get(b["precision"], "#7f7f7f")
        ax.barh(yi, b["tflops"], color=color, edgecolor="black" if b["cublas"] else color,
                hatch=CUBLAS_HATCH if b["cublas"] else None, linewidth=1.2 if b["cublas"] else 0.5)
        frac = b.get("fraction_of_cublas")
        text = f" {b['tflops']:.1f}" + (f"  ({frac:.2f}x cuBLAS)" if isinstance(frac, (int, float)) and not b["cublas"] else "")
        ax.text(b["tflops"], yi, text, va="center", ha="left", fontsize=8)
    ax.set_yticks(y, [b["name"] for b in bars], fontsize=9)
    ax.set_xlabel("TFLOP/s (higher is better)")
    shapes = sorted({b["shape"] for b in bars if b["shape"]})
    ax.set_title("TFLOP/s at " + (shapes[0] if len(shapes) == 1 else "the benchmark shape"))
    ax.set_xlim(0, max(b["tflops"] for b in bars) * 1.3 or 1.0)
    ax.grid(axis="x", alpha=0.3)
    precisions = list(dict.fromkeys(b["precision"] for b in bars))
    handles = [Patch(color=COLORS.get(p, "#7f7f7f"), label=p) for p in precisions]
    if any(b["cublas"] for b in bars):
        handles.append(Patch(facecolor="white", edgecolor="black", hatch=CUBLAS_HATCH, label="cuBLAS"))
    ax.legend(handles=handles, loc="lower right", fontsize=8)
    return fig


def _draw_lines(sizes: list[tuple[int, int, int]], series: list[dict[str, Any]]) -> Any:
    from matplotlib import colormaps  # lazy: optional (matplotlib)

    fig = _figure(11.0, 6.0)
    ax = fig.add_subplot()
    x = {s: i for i, s in enumerate(sizes)}
    palette = colormaps["tab20"]
    values = []
    kernels = 0
    for s in series:
        pts = sorted((x[shape], e["tflops"]) for shape, e in s["points"].items() if shape in x)
        xs, ys = [p[0] for p in pts], [p[1] for p in pts]
        values += ys
        if s["cublas"]:  # cuBLAS: black, thick, dashed (one dash pattern per precision), square markers
            ax.plot(xs, ys, linestyle=CUBLAS_DASHES.get(s["precision"], "--"), linewidth=2.6, marker="s",
                    color="black", markerfacecolor=COLORS.get(s["precision"], "white"), markeredgecolor="black",
                    label=s["name"] if s["baseline"] else f"{s['name']} [cuBLAS]")
        else:
            kernels += 1
            ax.plot(xs, ys, linewidth=1.5, marker="o", markersize=4, color=palette((kernels - 1) % 20),
                    label=f"{s['name']} ({s['precision']})")
    ax.set_xticks(range(len(sizes)), [size_label(s) for s in sizes])
    ax.set_xlabel("size (M = N = K, or MxNxK), smallest product first")
    ax.set_ylabel("TFLOP/s (higher is better)")
    positive = [v for v in values if v > 0]
    if positive and max(positive) / min(positive) > 30:
        ax.set_yscale("log")
    ax.set_title("TFLOP/s by size (--gemm-sweep)")
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)
    return fig


def _draw_empty() -> Any:
    fig = _figure(6.0, 2.0)
    ax = fig.add_subplot()
    ax.axis("off")
    ax.text(0.5, 0.5, "pytest-gemm: no ranked timing to plot\n(no speed check or sweep passed in this run)",
            ha="center", va="center")
    return fig


def plot_ranking(records: Any, path: str | Path) -> str:
    """Draw the run's timings (``records.RunResults``, or records) into ``path`` (PNG, or any
    format matplotlib knows by the suffix); returns what was drawn, in words."""

    require_matplotlib()
    records = RunResults.build(records)
    sizes, series = sweep_series(records)
    if series:
        fig, what = _draw_lines(sizes, series), f"TFLOP/s of {len(series)} kernels over {len(sizes)} sizes"
    else:
        bars = bar_data(records)
        if bars:
            fig, what = _draw_bars(bars), f"TFLOP/s of {len(bars)} kernels at the benchmark shape"
        else:
            fig, what = _draw_empty(), "no ranked timing (an empty figure)"
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=120)
    return what
