"""BLAS's beta == 0 rule: C is not read (it need not be set on input, and may hold NaN).

C is filled with a NaN bit pattern and the kernel is called with alpha = 1, beta = 0:
every output must be A@B. A kernel whose epilogue is ``alpha*acc + beta*C[i]``
computes 0 * NaN = NaN and fails here with ``beta_zero_reads_c`` — and only here:
every other check fills C with a finite sentinel, so the same kernel passes them.

A kernel declared ``beta_zero="reads_c"`` (the tutorial convention) is checked with
finite C instead, and its record says it is not BLAS-conformant on this point.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ..model import categories as cat
from ..model.categories import GemmCheckFailure
from ..model.shapes import Shape, shape_str
from .common import Harness, assert_exact, reference_f32, reject_writes_outside_c, run_kernel, to_numpy

SHAPES: tuple[Shape, ...] = ((1, 1, 1), (17, 33, 65), (127, 255, 63), (1000, 1000, 1000))
FIX = ("fix: skip the read when beta is 0, e.g. C[i] = (beta == 0.0f) ? alpha * acc : alpha * acc + beta * C[i] "
       "(BLAS: when beta is zero, C need not be set on input)")


def check_beta_zero(h: Harness, shape: Shape, record: Callable[[dict[str, Any]], None]) -> None:
    from ..judges.diagnose import poison
    from ..judges.inputs import exact_inputs

    problem = exact_inputs(*shape, precision=h.kernel.precision, seed=6, with_c=True)
    declared_reads_c = getattr(h.kernel, "beta_zero", "blas") == "reads_c"
    m, n, _ = shape
    c_init = problem.c0 if declared_reads_c else poison((m, n))
    record({"blas_beta_zero": not declared_reads_c})
    result = run_kernel(h, problem, alpha=1.0, beta=0.0, c_init=c_init)
    reject_writes_outside_c(result, "beta_zero", shape)
    ref64 = reference_f32(problem)
    got = to_numpy(result.c)
    nan = np.isnan(got)
    if not declared_reads_c and nan.any():
        count = int(nan.sum())
        raise GemmCheckFailure(
            cat.BETA_ZERO_READS_C,
            f"with beta == 0 the kernel read C: C held NaN before the call and {count} of {m * n} outputs "
            f"at {shape_str(shape)} are NaN (alpha*acc + beta*C gives 0 * NaN = NaN)",
            [FIX, "or declare the convention with beta_zero=\"reads_c\"; the report then says the kernel is not "
                  "BLAS-conformant on this point"])
    assert_exact(h, result, ref64, problem)


def run(h: Harness, shape: Shape, params: dict, record: Any, options: dict) -> None:
    check_beta_zero(h, shape, record)
