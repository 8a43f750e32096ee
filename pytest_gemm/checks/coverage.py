"""Coverage: C is poisoned before the launch; every element must be overwritten."""
from __future__ import annotations

from typing import Any

from .common import Harness, reference_f32, reject_writes_outside_c, run_kernel, tile_of, to_numpy
from ..model import categories as cat
from ..model.categories import GemmCheckFailure
from ..model.shapes import Shape


def check_coverage(h: Harness, shape: Shape) -> None:
    """C is poisoned before the launch; every element must be overwritten."""
    import cupy

    from ..judges.diagnose import diagnose, unwritten_mask
    from ..judges.inputs import exact_inputs

    problem = exact_inputs(*shape, precision=h.kernel.precision, seed=1)
    result = run_kernel(h, problem)
    reject_writes_outside_c(result, "coverage", shape)
    if not bool(unwritten_mask(result.c, xp=cupy).any()):
        return
    d = diagnose(to_numpy(result.c), to_numpy(reference_f32(problem)), tile=tile_of(h.kernel))
    raise GemmCheckFailure(cat.UNWRITTEN_OUTPUT, d.summary if d else "some outputs were never written",
                           d.details if d else [])


def run(h: Harness, shape: Shape, params: dict, record: Any, options: dict) -> None:
    check_coverage(h, shape)
