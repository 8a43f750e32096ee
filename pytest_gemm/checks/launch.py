"""Compiles and launches on this device; records registers, spills, shared memory, occupancy."""
from __future__ import annotations

from typing import Any, Callable

from .common import Harness, run_kernel


_LAUNCH_RESOURCE_SHAPE = (64, 64, 64)  # the shape the launch check runs; occupancy is reported there


def check_launch(h: Harness, record: Callable[[dict[str, Any]], None]) -> None:
    """Compiles and launches on this device; records registers, spills, shared memory, occupancy."""
    from ..judges.inputs import exact_inputs

    problem = exact_inputs(64, 64, 64, precision=h.kernel.precision)
    run_kernel(h, problem)
    info: dict[str, Any] = {"arch": h.device.arch}
    compiled = h.loaded.compiled
    if compiled is not None:
        res = compiled.resources
        info.update(registers=res.registers, spill_stores=res.spill_stores, spill_loads=res.spill_loads,
                    stack_frame=res.stack_frame)
    attrs = h.loaded.attributes(*_LAUNCH_RESOURCE_SHAPE)
    if attrs is not None:
        info.update(registers=attrs.registers, shared_static=attrs.shared_static, local_bytes=attrs.local_bytes,
                    blocks_per_sm=attrs.blocks_per_sm, occupancy=round(attrs.occupancy, 3),
                    dynamic_shared=h.kernel.dynamic_shared_mem(*_LAUNCH_RESOURCE_SHAPE))  # type: ignore[union-attr]
    record({"resources": info})


def run(h: Harness, shape: Any, params: dict, record: Callable[[dict[str, Any]], None], options: dict) -> None:
    check_launch(h, record)
