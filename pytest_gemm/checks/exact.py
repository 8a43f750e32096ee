"""Exact correctness: integer inputs small enough that every product and partial sum is
exact in the kernel's precision, compared bit for bit with the float64 reference. A launch
that wrote outside C fails whatever its values (``common.reject_writes_outside_c``).

A wrong output records ``exact_error``: its K, its largest error in u|A||B| and whether the
errors are the size of a lower precision's rounding with no recognised logic pattern; the
verdict reads it to tell precision loss that starts at some K (half-precision partial sums on
a deep-K path) from a logic error (outputs/records.py). An output that is exactly the 3xTF32
result (judges/patterns.py) records ``emulated_fp32``, which the verdict reads the same way."""
from __future__ import annotations

from typing import Any, Callable

from ..kernels.harness import Harness
from .common import assert_exact, reference_f32, reject_launch_damage, run_kernel
from ..judges.bounds import rounding_sized
from ..judges.inputs import device_exact, exact_inputs
from ..judges.reference import abs_product
from ..model import categories as cat
from ..model.categories import GemmCheckFailure
from ..model.shapes import Shape


def check_exact(h: Harness, shape: Shape, seed: int = 0,
                record: Callable[[dict[str, Any]], None] = lambda facts: None) -> None:
    """Integer inputs, every product and sum exact: the output must match bit for bit."""
    problem = exact_inputs(*shape, precision=h.kernel.precision, seed=seed)
    result = run_kernel(h, problem)
    reject_launch_damage(result, "exact", shape)
    ref64 = reference_f32(problem)
    try:
        assert_exact(h, result, ref64, problem)
    except GemmCheckFailure as exc:
        if exc.category == cat.WRONG_VALUES:
            record({"exact_error": _error_size(h, result.c, ref64, problem, bool(getattr(exc, "pattern", False)))})
        elif getattr(exc, "emulation", None):  # the output is exactly an fp32 emulation's (3xTF32)
            record({"emulated_fp32": exc.emulation})
        raise


def _error_size(h: Harness, got: Any, ref64: Any, problem: Any, pattern: bool) -> dict[str, Any]:
    import cupy  # lazy: CuPy loads CUDA, and importing a check module must not

    gauge = abs_product(*device_exact(problem, cupy), xp=cupy)
    facts = rounding_sized(got, ref64, gauge, problem.k, h.kernel.precision, xp=cupy)
    facts["rounding_sized"] = facts["rounding_sized"] and not pattern
    facts["pattern"] = pattern
    return facts


def run(h: Harness, shape: Shape, params: dict, record: Any, options: dict) -> None:
    check_exact(h, shape, record=record)
