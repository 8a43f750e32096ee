"""Accuracy on random and heavy-tailed inputs, within the bound derived from K and the
declared precision's unit roundoff (judges/bounds.py)."""
from __future__ import annotations

from typing import Any

import numpy as np

from ..kernels.harness import Harness, keep_secret
from .common import reject_launch_damage, run_kernel
from ..judges.bounds import check_accuracy
from ..judges.inputs import device_exact, random_inputs
from ..judges.reference import abs_product, reference
from ..model.categories import GemmCheckFailure
from ..model.shapes import Shape


def assert_accurate_problem(got: Any, problem: Any, precision: str | None = None,
                            alpha: float = 1.0, beta: float = 0.0, on_report: Any = None) -> Any:
    """Accuracy of ``got`` against the float64 reference of ``problem``, within the
    K- and precision-derived bound (bounds.py); returns the AccuracyReport."""
    xp = np
    if type(got).__module__.startswith("cupy"):
        import cupy as xp  # type: ignore[no-redef]  # lazy: CuPy loads CUDA
    a64, b64 = device_exact(problem, xp)
    c0 = None if problem.c0 is None or beta == 0 else xp.asarray(problem.c0, dtype=xp.float64)
    ref = reference(a64, b64, alpha=alpha, beta=beta, c0=c0, xp=xp)
    if xp is not np:
        keep_secret(ref)
    gauge = abs(alpha) * abs_product(a64, b64, xp=xp)
    if c0 is not None:
        gauge = gauge + abs(beta) * xp.abs(c0)
    report = check_accuracy(got, ref, gauge, problem.k, precision or problem.precision, xp=xp)
    if on_report is not None:
        on_report(report)
    if report.category is not None:
        raise GemmCheckFailure(report.category, report.message, report.details[:1])
    return report


def check_accuracy_random(h: Harness, shape: Shape, distribution: str, record: Any = None) -> None:
    """Random inputs: error within the bound for the declared precision. Records the error
    ratio, the bound and K (``accuracy``), which the verdict reads to tell a lower precision
    (errors that follow its rounding at every K) from a logic error."""
    problem = random_inputs(*shape, precision=h.kernel.precision, distribution=distribution, seed=5)
    result = run_kernel(h, problem)
    reject_launch_damage(result, "accuracy", shape)

    def keep(report: Any) -> None:
        if record is not None:
            ratio = report.max_ratio if np.isfinite(report.max_ratio) else None
            record({"accuracy": {"k": shape[2], "max_ratio": ratio, "allowed": report.allowed}})

    assert_accurate_problem(result.c, problem, on_report=keep)


def run(h: Harness, shape: Shape, params: dict, record: Any, options: dict) -> None:
    check_accuracy_random(h, shape, params["dist"], record)
