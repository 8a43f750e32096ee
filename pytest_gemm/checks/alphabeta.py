"""alpha/beta semantics: C = alpha*A@B + beta*C for kernels whose signature takes them.

C holds its old values when beta != 0 and the finite fill sentinel when beta == 0,
so a kernel that reads C at beta == 0 (legal here, judged by the beta_zero check
alone) still passes. A wrong epilogue is named (judges/epilogue.py); values that are
merely inaccurate are ``wrong_values``, never a precision finding: the exact inputs
make every product exact, so rounding cannot explain an error here.
"""
from __future__ import annotations

from typing import Any, Callable

from ..judges.bounds import check_accuracy
from ..judges.epilogue import SWAPPED, explain_epilogue
from ..judges.inputs import device_exact, exact_inputs
from ..judges.reference import abs_product
from ..model import categories as cat
from ..model.categories import GemmCheckFailure
from ..model.shapes import Shape, shape_str
from ..kernels.harness import Harness
from .common import assert_exact, reference_f32, reject_launch_damage, run_kernel, to_numpy

_RULE = "C must equal alpha*A@B + beta*C_old"


def check_alpha_beta(h: Harness, shape: Shape, alpha: float, beta: float,
                     record: Callable[[dict[str, Any]], None] = lambda facts: None) -> None:
    import cupy  # lazy: CuPy loads CUDA, and importing a check module must not

    problem = exact_inputs(*shape, precision=h.kernel.precision, seed=3, with_c=True)
    c_old = problem.c0 if beta != 0 else None
    result = run_kernel(h, problem, alpha=alpha, beta=beta, c_init=c_old)
    reject_launch_damage(result, "alphabeta", shape)
    ref64 = reference_f32(problem, alpha, beta, c_old)
    where = f"alpha={alpha}, beta={beta} at {shape_str(shape)}"
    # C_old is what C held: c0 when beta != 0, the fill sentinel (not a C_old to add) when beta == 0
    wrong_formula = explain_epilogue(to_numpy(result.c), problem.a64, problem.b64, c_old, alpha, beta)
    if wrong_formula is not None:
        # the verdict reads it: a swap explains C left as it was where the other checks call (alpha 1, beta 0)
        record({"epilogue": wrong_formula, "alpha_beta_swapped": wrong_formula == SWAPPED})
        raise GemmCheckFailure(cat.WRONG_VALUES, f"{where}: {wrong_formula}", [_RULE])
    if alpha in (0.0, 1.0) and beta in (0.0, 1.0):
        assert_exact(h, result, ref64, problem)
        return
    gauge = abs(alpha) * abs_product(*device_exact(problem, cupy), xp=cupy)
    if beta != 0:
        gauge = gauge + abs(beta) * cupy.abs(cupy.asarray(problem.c0, dtype=cupy.float64))
    report = check_accuracy(result.c, ref64, gauge, shape[2], h.kernel.precision, xp=cupy)
    if report.category is not None:
        category = cat.UNWRITTEN_OUTPUT if report.category == cat.UNWRITTEN_OUTPUT else cat.WRONG_VALUES
        said = report.details[0] if report.category == cat.PRECISION_TOO_LOW else report.message
        raise GemmCheckFailure(category, f"{where}: {said}", [_RULE])


def run(h: Harness, shape: Shape, params: dict, record: Any, options: dict) -> None:
    check_alpha_beta(h, shape, params["alpha"], params["beta"], record)
