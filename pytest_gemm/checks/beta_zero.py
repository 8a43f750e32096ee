"""BLAS's zero-scalar rules. beta == 0: C is not read (it need not be set on input, and may
hold NaN or Inf). alpha == 0: C = beta*C; whether A and B are read there is a note only (BLAS
documents no rule for them, below).

beta == 0: C is filled with NaN, then +Inf, then -Inf, and the kernel is called with
alpha = 1, beta = 0: every output must be A@B. A kernel whose epilogue is
``alpha*acc + beta*C[i]`` computes 0 * NaN = NaN and fails here with ``beta_zero_reads_c``,
and only here: every other check fills C with a finite sentinel, so the same kernel passes
them. Inf catches a read that filters NaN only (0 * Inf = NaN); a read that maps every
non-finite value to 0 computes the BLAS result for every C and passes
(judges/zero_scalars.py).

alpha == 0: A and B hold NaN, C holds finite values, alpha = 0, beta = 0.5: every output
must be 0.5 * C. A kernel that computes ``alpha * acc`` (0 * NaN = NaN) gets NaN there: that is
a note (fact ``alpha_zero_reads_ab``, outputs/verdicts.py), not a failure. BLAS documents
"when BETA is supplied as zero then C need not be set on input" and nothing of the kind for A
and B at alpha == 0; that reference BLAS leaves them unread is its early return, not a promise
of the interface. Every output that is not NaN must still be 0.5 * C, bit for bit.

A kernel declared ``beta_zero="reads_c"`` (the tutorial convention, ``alpha*acc + beta*C``
always evaluated) is checked with finite C, A and B instead, and its record says it is not
BLAS-conformant on this point.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable

import numpy as np

from ..judges.diagnose import assert_bit_identical
from ..judges.inputs import exact_inputs
from ..judges.zero_scalars import (ALPHA_ZERO_BETA, C_POISONS, ab_read_mask, alpha_zero_expected, c_read_mask, nan_like,
                                   poisoned)
from ..model import categories as cat
from ..model.categories import GemmCheckFailure
from ..model.shapes import Shape, shape_str
from ..kernels.harness import Harness
from .common import assert_exact, reference_f32, reject_launch_damage, run_kernel, to_numpy

SHAPES: tuple[Shape, ...] = ((1, 1, 1), (17, 33, 65), (127, 255, 63), (1000, 1000, 1000))
FIX = ("fix: skip the read when beta is 0, e.g. C[i] = (beta == 0.0f) ? alpha * acc : alpha * acc + beta * C[i] "
       "(BLAS: when beta is zero, C need not be set on input)")
DECLARE = ("or declare the convention with beta_zero=\"reads_c\"; the report then says the kernel is not "
           "BLAS-conformant on this point")


def check_beta_zero(h: Harness, shape: Shape, record: Callable[[dict[str, Any]], None]) -> None:
    problem = exact_inputs(*shape, precision=h.kernel.precision, seed=6, with_c=True)
    declared_reads_c = getattr(h.kernel, "beta_zero", "blas") == "reads_c"
    m, n, _ = shape
    record({"blas_beta_zero": not declared_reads_c})
    ref64 = reference_f32(problem)
    fills = [("finite values", None)] if declared_reads_c else [(name, bits) for name, bits in C_POISONS]
    for name, bits in fills:
        c_init = problem.c0 if bits is None else poisoned((m, n), bits)
        result = run_kernel(h, problem, alpha=1.0, beta=0.0, c_init=c_init)
        reject_launch_damage(result, "beta_zero", shape)
        if bits is not None:
            read = c_read_mask(to_numpy(result.c), bits)
            if read.any():
                count = int(read.sum())
                how = "0 * NaN = NaN" if name == "NaN" else \
                    f"0 * {name.lstrip('+')} = NaN: a read that filters NaN only still shows {name}"
                raise GemmCheckFailure(
                    cat.BETA_ZERO_READS_C,
                    f"with beta == 0 the kernel read C: C held {name} before the call and {count} of {m * n} "
                    f"outputs at {shape_str(shape)} are NaN or Inf (alpha*acc + beta*C gives {how})",
                    [FIX, DECLARE])
        assert_exact(h, result, ref64, problem)
    check_alpha_zero(h, problem, declared_reads_c, record)


def check_alpha_zero(h: Harness, problem: Any, declared_reads_c: bool,
                     record: Callable[[dict[str, Any]], None] = lambda facts: None) -> None:
    """alpha == 0: C = beta * C, with A and B poisoned (finite when the tutorial convention is
    declared). NaN where beta * C is finite (A or B was read) is recorded as a note, not a
    failure; every other output must be beta * C."""
    import cupy  # lazy: CuPy loads CUDA, and importing a check module must not

    m, n = problem.m, problem.n
    nan_ab = problem if declared_reads_c else dataclasses.replace(problem, a=nan_like(problem.a),
                                                                    b=nan_like(problem.b))
    result = run_kernel(h, nan_ab, alpha=0.0, beta=ALPHA_ZERO_BETA, c_init=problem.c0)
    reject_launch_damage(result, "beta_zero", problem.shape)
    got = to_numpy(result.c)
    want = alpha_zero_expected(problem.c0)
    read = ab_read_mask(got, problem.c0)
    if read.any():
        record({cat.ALPHA_ZERO_READS_AB: {"nan_outputs": int(read.sum()), "outputs": m * n,
                                          "shape": shape_str(problem.shape)}})
        got = np.where(read, want, got)  # the NaN are the note; the rest must still be beta*C
    elif bool(cupy.array_equal(result.c.view(cupy.uint32), cupy.asarray(want).view(cupy.uint32))):
        return
    assert_bit_identical(got, want.astype(np.float64))


def run(h: Harness, shape: Shape, params: dict, record: Any, options: dict) -> None:
    check_beta_zero(h, shape, record)
