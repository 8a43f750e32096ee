"""``--gemm-sweep``: TFLOP/s of every kernel, and of cuBLAS at its precision, over a list of sizes.

``--gemm-sweep 512,1024,2048,4096`` (items N or MxNxK, ``parse_sweep``) runs one
``sweep-<kernel>`` test per kernel (``conformance/test_sweep.py``): the "sweep"
check of ``dispatch.py``, in the kernel's sandbox, runs ``check_sweep``.

Order. The sizes are timed in a shuffled order drawn from ``random.Random(seed)``
(``SWEEP_SEED`` unless the check's params give ``seed``), the same order for every
kernel, so a slow drift (clocks settling, the GPU warming up) does not rise or
fall with the size. At each size the kernel and cuBLAS are timed back to back on
the same inputs, so their ratio compares like with like; which of the two goes
first is drawn from the same generator (``timing_order``). The order is kept in
the facts (``sweep_order``).

Each timing is judged like the speed check (``performance.py``): work left
running after the timed region (``timing_escape``), the last timed output
verified against its own inputs (``stale_output``), a rate or a time that is
physically impossible (``timing_escape``). A size the kernel's ``multiple_of``
excludes is skipped (``sweep_skipped``, with the reason); when every size is, the
check is skipped.

The pure parts (parsing, the order, the entries, the table and the series the
report and the plot draw) run on plain records and are unit-tested with no GPU.
"""
from __future__ import annotations

import random
import statistics
from typing import Any, Callable, Iterable, Sequence

from .cases import Shape, parse_shape, shape_str

SWEEP_SEED = 20240617   # the default shuffle seed: the same order in every run and for every kernel
EXAMPLE = "--gemm-sweep 512,1024,2048,4096 or --gemm-sweep 1000x64x300,4096"
ENTRY_KEYS = ("shape", "median_ms", "tflops", "fraction_of_cublas", "spread", "cublas_median_ms", "cublas_tflops")
_PRECISION_ORDER = {"fp32": 0, "tf32": 1, "fp16": 2, "bf16": 3}


# ---- parsing and order (pure) ----------------------------------------------

def parse_sweep(text: str) -> list[Shape]:
    """``"512,1024,1000x64x300"`` -> [(512, 512, 512), (1024, 1024, 1024), (1000, 64, 300)];
    duplicates dropped, first occurrence kept. Raises ValueError echoing the bad items."""
    items = [t.strip() for t in str(text).split(",")]
    if not str(text).strip() or not all(items):
        raise ValueError(f"--gemm-sweep {text!r}: expected a comma-separated list of sizes (N or MxNxK), "
                         f"with no empty item, e.g. {EXAMPLE}")
    shapes: list[Shape] = []
    bad: list[str] = []
    for item in items:
        try:
            shapes.append(parse_shape(item))
        except ValueError:
            bad.append(item)
    if bad:
        which = ", ".join(repr(b) for b in bad)
        verb = "is not a size" if len(bad) == 1 else "are not sizes"
        raise ValueError(f"--gemm-sweep {text!r}: {which} {verb}; each item is N or MxNxK with positive "
                         f"integers, e.g. {EXAMPLE}")
    return list(dict.fromkeys(shapes))


def flops_of(shape: Sequence[int]) -> float:
    m, n, k = shape
    return 2.0 * m * n * k


def size_label(shape: Sequence[int]) -> str:
    """``"4096"`` for a cube, ``"1000x64x300"`` otherwise."""
    m, n, k = shape
    return str(m) if m == n == k else shape_str((m, n, k))


def by_size(shapes: Iterable[Sequence[int]]) -> list[Shape]:
    """Distinct shapes, smallest product first (ties: by M, N, K)."""
    unique = {tuple(s) for s in shapes}
    return sorted(unique, key=lambda s: (flops_of(s), s))  # type: ignore[return-value]


def timing_order(shapes: Sequence[Sequence[int]], seed: int = SWEEP_SEED) -> list[tuple[Shape, tuple[str, str]]]:
    """The measurement plan: the distinct sizes shuffled by ``random.Random(seed)``, each with
    which of ``"kernel"`` and ``"cublas"`` is timed first (drawn from the same generator)."""
    rng = random.Random(seed)
    order: list[Shape] = list(dict.fromkeys(tuple(s) for s in shapes))  # type: ignore[misc]
    rng.shuffle(order)
    return [(s, ("kernel", "cublas") if rng.random() < 0.5 else ("cublas", "kernel")) for s in order]


def sweep_params(shapes: Sequence[Sequence[int]], seed: int = SWEEP_SEED) -> dict[str, Any]:
    """The "sweep" check's params: JSON-able, for the sandbox."""
    return {"shapes": [list(s) for s in shapes], "seed": int(seed)}


def sweep_timeout(shapes: Sequence[Sequence[int]]) -> float:
    """Seconds a sweep may take before it counts as a hang: 60, plus per size 30 (inputs,
    references) and 10 per TFLOP of one product (the kernel's calls at >= 1 TFLOP/s, and cuBLAS)."""
    return 60.0 + sum(30.0 + 10.0 * flops_of(s) / 1e12 for s in shapes)


def requested_sweep(config: Any) -> list[Shape] | None:
    """The sizes asked for with ``--gemm-sweep`` (None when not given); a bad value is a UsageError."""
    import pytest

    from .session import STATE

    st = config.stash.get(STATE, None)
    if st is not None and getattr(st, "sweep", None):
        return list(st.sweep)
    text = getattr(config.option, "gemm_sweep", None)
    if not text:
        return None
    try:
        return parse_sweep(text)
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from None


# ---- entries, series and the table (pure) ----------------------------------

def sweep_entry(shape: Sequence[int], timing: Any, cublas: Any) -> dict[str, Any]:
    """One size of a kernel's sweep, from its timing and cuBLAS's (objects with ``median_ms``,
    ``spread``, ``tflops``: ``timing.TimingResult``)."""
    fraction = cublas.median_ms / timing.median_ms if timing.median_ms > 0 else 0.0
    return {"shape": list(shape), "median_ms": timing.median_ms, "tflops": timing.tflops,
            "fraction_of_cublas": fraction, "spread": timing.spread,
            "cublas_median_ms": cublas.median_ms, "cublas_tflops": cublas.tflops}


def report_entries(entries: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """A sweep as the JSON report keeps it: ``ENTRY_KEYS`` of each size, smallest first."""
    kept = [{key: e.get(key) for key in ENTRY_KEYS} for e in entries if isinstance(e, dict) and e.get("shape")]
    return sorted(kept, key=lambda e: (flops_of(e["shape"]), tuple(e["shape"])))


def is_cublas(name: str) -> bool:
    """A cuBLAS baseline of the reference ladder (``cublas-fp32`` ...)."""
    return str(name) in {f"cublas-{p}" for p in _PRECISION_ORDER}


def _failed_kernels(records: Sequence[dict[str, Any]]) -> set[str]:
    """Kernels not to draw: a failed correctness check, or a timing that cannot be trusted
    (a speed gate, --gemm-min-cublas-fraction, is not a wrong result)."""
    return {r["kernel"] for r in records if r.get("outcome") == "failed"
            and (r.get("check") not in ("speed", "sweep") or r.get("category") in ("timing_escape", "stale_output"))}


def sweep_series(records: Sequence[dict[str, Any]]) -> tuple[list[Shape], list[dict[str, Any]]]:
    """(sizes smallest first, series) for the table and the plot.

    A series is ``{"name", "precision", "cublas", "baseline", "points": {shape: entry}}``, one per
    kernel whose sweep passed and which failed no correctness check, plus for each precision
    without a cuBLAS kernel among them a baseline series ("cuBLAS fp32 (baseline)"): the median
    of the cuBLAS timings measured beside each kernel."""
    failed = _failed_kernels(records)
    series: list[dict[str, Any]] = []
    beside: dict[str, dict[Shape, list[dict[str, Any]]]] = {}
    for r in records:
        if r.get("check") != "sweep" or r.get("outcome") != "passed" or r.get("kernel") in failed:
            continue
        points = {tuple(e["shape"]): e for e in r.get("sweep") or [] if isinstance(e, dict) and e.get("shape")}
        if not points:
            continue
        precision = r.get("precision") or "fp32"
        series.append({"name": r["kernel"], "precision": precision, "cublas": is_cublas(r["kernel"]),
                       "baseline": False, "points": points})
        for shape, e in points.items():
            if e.get("cublas_median_ms"):
                beside.setdefault(precision, {}).setdefault(shape, []).append(e)  # type: ignore[arg-type]
    covered = {s["precision"] for s in series if s["cublas"]}
    for precision, at in sorted(beside.items(), key=lambda kv: _PRECISION_ORDER.get(kv[0], 9)):
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


def sweep_table(records: Sequence[dict[str, Any]]) -> list[str]:
    """The terminal's "TFLOP/s by size" table (tabulate), fastest at the largest size first."""
    from tabulate import tabulate

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


# ---- the GPU part (runs in the kernel's sandbox) ---------------------------

def check_sweep(h: Any, shapes: Sequence[Shape], record: Callable[[dict[str, Any]], None],
                seed: int = SWEEP_SEED, budget_s: float = 0.5, measure_roofs: bool = True) -> None:
    """Time ``h``'s kernel and cuBLAS at its precision at every size, in ``timing_order``;
    record ``sweep`` (entries in measurement order), ``sweep_order``, ``sweep_seed``,
    ``sweep_skipped`` and ``roofs``. Raises GemmCheckFailure like the speed check."""
    import cupy
    import pytest
    import reference_kernels

    from .cases import skip_reason
    from .checks import harness_for
    from .performance import _problems, _timed_run, process_roofs, reject_escaped_work, reject_impossible_timing
    from .roofs import ceilings

    precision = h.kernel.precision
    measured = process_roofs(h.device, measure_roofs)
    limits = ceilings(h.device, precision, measured)
    plan = timing_order(shapes, seed)
    entries: list[dict[str, Any]] = []
    skipped: list[dict[str, Any]] = []
    facts = {"sweep": entries, "sweep_order": [[list(s), list(first)] for s, first in plan],
             "sweep_seed": seed, "sweep_skipped": skipped, "roofs": measured or None}
    record(facts)
    baseline = harness_for(reference_kernels.CUBLAS[precision], h.device)

    def measure(shape: Shape, first: tuple[str, str]) -> dict[str, Any]:
        problems = _problems(precision, shape)  # the same inputs for the kernel and cuBLAS
        timings: dict[str, Any] = {}
        with cupy.cuda.Stream.null:  # whatever stream a kernel left current, the harness works on this one
            for who in first:
                if who == "cublas":
                    timings[who], verify_cublas = _timed_run(baseline, shape, budget_s, problems)
                    verify_cublas()
                    continue
                timing, verify = _timed_run(h, shape, budget_s, problems)
                timings[who] = timing
                where = f"sweep at {shape_str(shape)}: "
                reject_escaped_work(timing, limits, precision, where)
                verify()
                reject_impossible_timing(timing, shape, precision, limits, where)
        return sweep_entry(shape, timings["kernel"], timings["cublas"])

    for shape, first in plan:
        reason = skip_reason(h.kernel, shape)
        if reason is not None:
            skipped.append({"shape": list(shape), "reason": reason})
        else:
            entries.append(measure(shape, first))
            cupy.get_default_memory_pool().free_all_blocks()  # this size's buffers, before the next size
        record(facts)
    if not entries:
        pytest.skip(f"kernel {h.kernel.name!r} claims none of the sweep sizes: " + "; ".join(s["reason"] for s in skipped))
