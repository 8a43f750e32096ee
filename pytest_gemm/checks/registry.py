"""The one list of conformance checks. Collection, dispatch, Gradescope's weights and
labels, ``--help`` and the table of checks in docs/checks.md all read it.

A check is a module of this package with a function
``run(h, shape, params, record, options)`` (``h``: the kernel's launch harness;
``record``: adds facts to the check's record; ``options``: run-wide options such
as ``min_cublas_fraction``) that returns when the kernel passes and raises
``GemmCheckFailure`` when it does not. Adding one is that module plus one ``Check``
entry below (CONTRIBUTING.md has a worked example).
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any, Callable

from ..model import categories as cat
from ..model.contract import GemmKernel
from ..model.shapes import Shape
from . import cases as C


@dataclass(frozen=True)
class Check:
    name: str                                  # test ids, records, Gradescope keys: exact, coverage, ...
    summary: str                               # one line: what passing proves (docs, --help)
    module: str                                # pytest_gemm.checks.<module> holds run(...)
    shapes: tuple[Shape, ...] | str = ()       # the shapes it runs on; "bench": --gemm-bench-shape
    quick: tuple[Shape, ...] | None = None     # --gemm-shapes quick: a small representative set (None: shapes)
    params: tuple[dict[str, Any], ...] = ({},)  # one case per parameter set and shape
    applies: Callable[[GemmKernel], bool] | None = None  # None: every kernel
    not_applicable: str = ""                   # why a kernel has no case (Gradescope, reports)
    weight: float = 0.0                        # default Gradescope points
    label: str = ""                            # display name when it differs from ``name``
    categories: tuple[str, ...] = ()           # the categories it can report itself
    gpu: bool = True                           # False: runs with no GPU (compile)
    per_kernel: bool = False                   # one test per kernel (the sweep), not per shape
    timed: bool = False                        # times the kernel: takes the GPU lock alone itself (CONTRIBUTING.md)
    timeout_factor: float = field(default=1.0)
    # compares C's values with the reference: a wrong value it finds is a correctness failure, in
    # the verdict's rules (outputs/verdicts.py; precision_too_low's evidence reads these checks)
    judges_values: bool = False
    # its passing shows the kernel computes the right result (a kernel with one such pass and no
    # failure has passed, outputs/verdicts.py); compiling, launching and timing do not
    correctness: bool = False

    @property
    def display(self) -> str:
        return self.label or self.name

    def runner(self) -> Callable[..., None]:
        """The check's ``run`` function (imported on first use: check modules import CuPy lazily)."""
        return importlib.import_module(f"{__package__}.{self.module}").run


_CUDA = (cat.FAULT, cat.LAUNCH_ERROR, cat.TIMEOUT, cat.COMPILE_ERROR)
# what every launching value check rejects before it judges values (common.reject_launch_damage)
_DAMAGE = (cat.OUT_OF_BOUNDS_WRITE, cat.INPUT_MODIFIED)

# --gemm-shapes quick: few shapes, shared between checks (a kernel that autotunes or compiles
# per shape meets few distinct ones): tiny, aligned, ragged non-square, large ragged, large aligned.
QUICK_EXACT: tuple[Shape, ...] = ((1, 1, 1), (64, 64, 64), (127, 255, 63), (1000, 1000, 1000), (1024, 1024, 1024))
QUICK_EDGE: tuple[Shape, ...] = ((64, 64, 64), (127, 255, 63))
# Two K: precision_too_low is a root cause only when the random-input errors follow a lower
# precision's rounding at two K or more (outputs/verdicts.py). Both of the full set, as every quick
# set is: a kernel seen autotuning at run time keeps only its full-set cases that are quick ones, and
# must end with the cases a kernel found autotuning in its code runs (64^3 here, not in the full set,
# left it one K: the Triton tutorial's fp32 read wrong_values on the H200 at b9cffe2).
QUICK_ACCURACY: tuple[Shape, ...] = ((256, 256, 256), (256, 256, 1024))

CHECKS: tuple[Check, ...] = (
    Check("compile", "compiles with NVRTC for every architecture it claims (no GPU needed)", "compile",
          not_applicable="compile checks run only for CUDA C kernels (CudaKernel)",
          categories=(cat.COMPILE_ERROR,), gpu=False),
    Check("launch", "compiles and launches on this device (registers, spills, shared memory, occupancy); a Python "
          "launcher does its work on the current stream", "launch",
          shapes=((64, 64, 64),), categories=(cat.WRONG_STREAM, *_CUDA)),
    Check("exact", "bit-identical to the float64 reference on exact-integer inputs, on every shape it claims",
          "exact", shapes=C.EXACT_SHAPES, quick=QUICK_EXACT, weight=40,
          categories=(cat.WRONG_VALUES, cat.UNWRITTEN_OUTPUT, *_DAMAGE, *_CUDA),
          judges_values=True, correctness=True),
    Check("coverage", "C is filled with a sentinel before every launch and every element is written", "coverage",
          shapes=C.EDGE_SHAPES, quick=QUICK_EDGE, weight=10, categories=(cat.UNWRITTEN_OUTPUT, *_DAMAGE, *_CUDA),
          judges_values=True, correctness=True),
    Check("guards", "nothing written outside C (guard bands) and A, B unchanged", "guards",
          shapes=C.EDGE_SHAPES, quick=QUICK_EDGE, weight=10, categories=(*_DAMAGE, *_CUDA),
          correctness=True),
    Check("alphabeta", "C = alpha*A@B + beta*C for alpha in 0, 1, 0.7 and beta in 0, 1, 1.3", "alphabeta",
          shapes=(C.ALPHA_BETA_SHAPE,), params=tuple({"alpha": a, "beta": b} for a in C.ALPHAS for b in C.BETAS),
          applies=lambda k: k.takes_alpha_beta, weight=5, label="alpha/beta",
          not_applicable="this check runs only for kernels whose signature takes alpha and beta",
          categories=(cat.WRONG_VALUES, cat.PRECISION_TOO_LOW, *_DAMAGE, *_CUDA),
          judges_values=True, correctness=True),
    Check("beta_zero", "BLAS's zero rules: with beta == 0, C is not read (C holds NaN, then +Inf, then -Inf, and every "
          "output must be A@B); with alpha == 0, C = beta*C (A and B hold NaN: reading them is a note, not a failure)",
          "beta_zero", shapes=((1, 1, 1), (17, 33, 65), (127, 255, 63), (1000, 1000, 1000)),
          applies=lambda k: k.takes_alpha_beta, weight=0, label="beta == 0",
          not_applicable="this check runs only for kernels whose signature takes alpha and beta",
          categories=(cat.BETA_ZERO_READS_C, cat.WRONG_VALUES, cat.UNWRITTEN_OUTPUT, *_DAMAGE, *_CUDA),
          judges_values=True, correctness=True),
    Check("deterministic", "five launches on the same random inputs are bit-identical (a square and a deep-K shape)", "deterministic",
          shapes=C.DETERMINISM_SHAPES, quick=(C.DETERMINISM_SHAPES[1],), applies=lambda k: k.deterministic,
          weight=10,
          not_applicable="this check does not run for a kernel declared deterministic=False",
          categories=(cat.NONDETERMINISTIC, *_DAMAGE, *_CUDA, cat.STALE_OUTPUT, cat.UNWRITTEN_OUTPUT,
                      cat.WRONG_VALUES), correctness=True),
    Check("accuracy", "random uniform and heavy-tailed inputs within the K- and precision-derived error bound",
          "accuracy", shapes=C.ACCURACY_SHAPES, quick=QUICK_ACCURACY, params=tuple({"dist": d} for d in C.DISTRIBUTIONS), weight=15,
          categories=(cat.WRONG_VALUES, cat.PRECISION_TOO_LOW, *_DAMAGE, *_CUDA),
          judges_values=True, correctness=True),
    Check("speed", "event-timed against cuBLAS at the same precision in the same process, ranked", "speed",
          shapes="bench", weight=10, categories=(cat.TIMING_ESCAPE, cat.STALE_OUTPUT, *_CUDA), timed=True),
    Check("sweep", "TFLOP/s and the fraction of cuBLAS at every --gemm-sweep size", "sweep",
          shapes="bench", per_kernel=True, categories=(cat.TIMING_ESCAPE, cat.STALE_OUTPUT, *_CUDA),
          timed=True),
)

BY_NAME: dict[str, Check] = {c.name: c for c in CHECKS}
#: The checks a Gradescope run scores, in the order its tests are listed (the sweep is opt-in).
GRADED: tuple[str, ...] = tuple(c.name for c in CHECKS if c.name != "sweep")


def get(name: str) -> Check:
    try:
        return BY_NAME[name]
    except KeyError:
        raise ValueError(f"unknown check {name!r}; valid checks: {', '.join(BY_NAME)}") from None


def quick_summary() -> str:
    """The ``--gemm-shapes quick`` sets, as docs/options.md lists them ("exact: 1³, 64³, ...; coverage
    and guards: ...")."""
    def shape(s: Shape) -> str:
        return f"{s[0]}³" if s[0] == s[1] == s[2] else "x".join(map(str, s))

    groups: dict[tuple[Shape, ...], list[str]] = {}
    for c in CHECKS:
        if c.quick is not None:
            groups.setdefault(c.quick, []).append(c.name)
    return "; ".join(f"{' and '.join(names)}: {', '.join(map(shape, quick))}" for quick, names in groups.items())


def markdown_table() -> str:
    """The table of checks in docs/checks.md."""
    rows = ["| check | what passing proves | default points | GPU |", "| --- | --- | --- | --- |"]
    rows += [f"| `{c.name}` | {c.summary} | {c.weight:g} | {'yes' if c.gpu else 'no'} |" for c in CHECKS]
    return "\n".join(rows)
