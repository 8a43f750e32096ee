"""Determinism: launches on the same inputs give bit-identical outputs."""
from __future__ import annotations

from typing import Any

from .common import Harness, reject_writes_outside_c, run_kernel, to_numpy
from ..model import categories as cat
from ..model.categories import GemmCheckFailure
from ..model.shapes import Shape


def check_deterministic(h: Harness, shape: Shape, runs: int = 5) -> None:
    """Random (inexact) inputs so summation order shows: every launch bit-identical."""
    import cupy

    from ..judges.diagnose import compare_runs
    from ..judges.inputs import random_inputs

    problem = random_inputs(*shape, precision=h.kernel.precision, distribution="uniform", seed=4)
    launch = run_kernel(h, problem)
    reject_writes_outside_c(launch, "deterministic", shape)  # its race would make this check's verdict a coin toss
    first = launch.c
    for _ in range(runs - 1):
        again = run_kernel(h, problem).c
        if not bool(cupy.array_equal(first.view(cupy.uint32), again.view(cupy.uint32))):
            d = compare_runs(to_numpy(first), to_numpy(again))
            raise GemmCheckFailure(cat.NONDETERMINISTIC, d.summary if d else "outputs differ between launches",
                                   d.details if d else [])


def run(h: Harness, shape: Shape, params: dict, record: Any, options: dict) -> None:
    check_deterministic(h, shape)
