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
from typing import Any, Iterable, Sequence

from ..model.shapes import Shape, parse_shape, shape_str

SWEEP_SEED = 20240617   # the default shuffle seed: the same order in every run and for every kernel

EXAMPLE = "--gemm-sweep 512,1024,2048,4096 or --gemm-sweep 1000x64x300,4096"

ENTRY_KEYS = ("shape", "median_ms", "tflops", "fraction_of_cublas", "spread", "cublas_median_ms", "cublas_tflops")

PRECISION_ORDER = {"fp32": 0, "tf32": 1, "fp16": 2, "bf16": 3}

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
    return str(name) in {f"cublas-{p}" for p in PRECISION_ORDER}
