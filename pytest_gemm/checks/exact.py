"""Exact correctness: integer inputs small enough that every product and partial sum is
exact in the kernel's precision, compared bit for bit with the float64 reference. A launch
that wrote outside C fails whatever its values (``common.reject_writes_outside_c``)."""
from __future__ import annotations

from typing import Any

from .common import Harness, assert_exact, reference_f32, reject_writes_outside_c, run_kernel
from ..model.shapes import Shape


def check_exact(h: Harness, shape: Shape, seed: int = 0) -> None:
    """Integer inputs, every product and sum exact: the output must match bit for bit."""
    from ..judges.inputs import exact_inputs

    problem = exact_inputs(*shape, precision=h.kernel.precision, seed=seed)
    result = run_kernel(h, problem)
    reject_writes_outside_c(result, "exact", shape)
    assert_exact(h, result, reference_f32(problem), problem)


def run(h: Harness, shape: Shape, params: dict, record: Any, options: dict) -> None:
    check_exact(h, shape)
