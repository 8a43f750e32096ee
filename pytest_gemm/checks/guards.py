"""Guard bands: nothing written outside C, and A and B left exactly as uploaded."""
from __future__ import annotations

from typing import Any

from ..kernels.harness import Harness
from .common import reject_modified_inputs, run_kernel
from ..model import categories as cat
from ..model.categories import GemmCheckFailure
from ..model.shapes import Shape
from ..judges.inputs import exact_inputs


def check_guards(h: Harness, shape: Shape) -> None:
    """Nothing written outside C, and A and B left exactly as uploaded."""

    problem = exact_inputs(*shape, precision=h.kernel.precision, seed=2)
    r = run_kernel(h, problem)
    m, n, k = shape
    for name, g in (("C", r.c_guard), ("A", r.a_guard), ("B", r.b_guard)):
        if g.after or g.before:
            where = []
            if g.after:
                where.append(f"{g.after} bytes changed after the end of {name} "
                             f"(from {g.first_after} to {g.last_after} bytes past it)")
            if g.before:
                where.append(f"{g.before} bytes changed before the start of {name} "
                             f"(up to {g.first_before} bytes before it)")
            hint = ("rows past M were written: guard the store with row < M" if name == "C"
                    else f"the kernel writes through its {name} pointer")
            raise GemmCheckFailure(cat.OUT_OF_BOUNDS_WRITE,
                                   f"writes outside {name} at {m}x{n}x{k}: {'; '.join(where)}", [hint])
    reject_modified_inputs(r, "guards", shape)


def run(h: Harness, shape: Shape, params: dict, record: Any, options: dict) -> None:
    check_guards(h, shape)
