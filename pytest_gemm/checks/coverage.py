"""Coverage: C is poisoned before the launch; every element must be overwritten."""
from __future__ import annotations

from typing import Any

from ..kernels.harness import Harness
from .common import reference_f32, reject_launch_damage, run_kernel, tile_of, to_numpy
from ..judges.diagnose import diagnose
from ..judges.sentinels import unwritten_mask
from ..judges.inputs import exact_inputs
from ..model import categories as cat
from ..model.categories import GemmCheckFailure
from ..model.shapes import Shape

LEFT_UNWRITTEN = ("left C unwritten after its first calls: no element of C was written, but the same launch with a "
                  "fresh call history (the CUDA module loaded again) writes every element")
FRESH_WRITES = ("state kept in __device__ memory between launches (a tile counter or a flag that is never reset) "
                "stops the kernel after its first launches: reset it at the end of every launch (e.g. by the last "
                "block to finish), or from the host before each launch")


def check_coverage(h: Harness, shape: Shape, record: Any = lambda facts: None) -> None:
    """C is poisoned before the launch; every element must be overwritten. A CUDA kernel that
    wrote nothing is launched once more with a fresh call history (its module loaded again):
    if that launch writes every element, state kept between launches stopped it."""
    import cupy  # lazy: CuPy loads CUDA, and importing a check module must not
    from .history_replay import with_fresh_history  # lazy: a rare path (C left wholly unwritten)

    problem = exact_inputs(*shape, precision=h.kernel.precision, seed=1)
    result = run_kernel(h, problem)
    reject_launch_damage(result, "coverage", shape)
    unwritten = unwritten_mask(result.c, xp=cupy)
    if not bool(unwritten.any()):
        return
    fresh = with_fresh_history(h) if bool(unwritten.all()) else None
    if fresh is not None and not bool(unwritten_mask(run_kernel(fresh, problem).c, xp=cupy).any()):
        record({"call_history": "the same launch with the CUDA module loaded again"})
        raise GemmCheckFailure(cat.UNWRITTEN_OUTPUT, LEFT_UNWRITTEN, [FRESH_WRITES])
    d = diagnose(to_numpy(result.c), to_numpy(reference_f32(problem)), tile=tile_of(h.kernel))
    raise GemmCheckFailure(cat.UNWRITTEN_OUTPUT, d.summary if d else "some outputs were never written",
                           d.details if d else [])


def run(h: Harness, shape: Shape, params: dict, record: Any, options: dict) -> None:
    check_coverage(h, shape, record)
