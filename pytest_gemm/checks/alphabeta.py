"""alpha/beta semantics: C = alpha*A@B + beta*C for kernels whose signature takes them."""
from __future__ import annotations

from typing import Any

from .common import Harness, assert_exact, reference_f32, run_kernel
from ..model import categories as cat
from ..model.categories import GemmCheckFailure
from ..model.shapes import Shape, shape_str


def check_alpha_beta(h: Harness, shape: Shape, alpha: float, beta: float) -> None:
    """C = alpha*A@B + beta*C; with beta == 0, C's old contents (NaN here) must not be read."""
    import cupy

    from ..judges.inputs import exact_inputs
    from ..judges.reference import abs_product

    problem = exact_inputs(*shape, precision=h.kernel.precision, seed=3, with_c=True)
    c_init = problem.c0 if beta != 0 else None  # beta == 0: C holds NaN poison, which must not leak
    result = run_kernel(h, problem, alpha=alpha, beta=beta, c_init=c_init)
    ref64 = reference_f32(problem, alpha, beta, problem.c0 if beta != 0 else None)
    if alpha in (0.0, 1.0) and beta in (0.0, 1.0):
        assert_exact(h, result, ref64, problem)
        return
    from ..judges.bounds import check_accuracy

    gauge = abs(alpha) * abs_product(cupy.asarray(problem.a64), cupy.asarray(problem.b64), xp=cupy)
    if beta != 0:
        gauge = gauge + abs(beta) * cupy.abs(cupy.asarray(problem.c0, dtype=cupy.float64))
    report = check_accuracy(result.c, ref64, gauge, shape[2], h.kernel.precision, xp=cupy)
    if report.category is not None:
        raise GemmCheckFailure(cat.WRONG_VALUES if report.category != cat.PRECISION_TOO_LOW else report.category,
                               f"alpha={alpha}, beta={beta} at {shape_str(shape)}: {report.message}",
                               ["C must equal alpha*A@B + beta*C_old; beta == 0 means C_old is not read "
                                "(it may hold NaN)"])


def run(h: Harness, shape: Shape, params: dict, record: Any, options: dict) -> None:
    check_alpha_beta(h, shape, params["alpha"], params["beta"])
