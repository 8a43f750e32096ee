"""Compiles and launches on this device; records registers, spills, shared memory, occupancy."""
from __future__ import annotations

from typing import Any, Callable

from ..model import categories as cat
from ..model.categories import GemmCheckFailure
from ..model.contract import PyKernel
from ..kernels.harness import Harness
from .common import run_kernel
from ..judges.inputs import exact_inputs
from ..kernels.stream_probe import run_held


_LAUNCH_RESOURCE_SHAPE = (64, 64, 64)  # the launch check's shape (rounded up to what a kernel claims: multiple_of)


def check_launch(h: Harness, record: Callable[[dict[str, Any]], None],
                 shape: tuple[int, int, int] = _LAUNCH_RESOURCE_SHAPE) -> None:
    """Compiles and launches on this device; records registers, spills, shared memory, occupancy,
    at ``shape``: the case's shape, which the kernel claims. Its declaration's callables
    (``shared_mem``) are asked about that shape only: a shape outside ``multiple_of`` is skipped,
    not failed (docs/kernels.md), so they may refuse one (before, occupancy was read at 64^3
    whatever the kernel claimed, and a ``shared_mem`` that refused 64^3 made the kernel a
    ``launch_error``)."""

    problem = exact_inputs(*shape, precision=h.kernel.precision)
    run_kernel(h, problem)
    if isinstance(h.kernel, PyKernel):
        check_current_stream(h, problem)
    info: dict[str, Any] = {"arch": h.device.arch}
    compiled = h.loaded.compiled
    if compiled is not None:
        res = compiled.resources
        info.update(registers=res.registers, spill_stores=res.spill_stores, spill_loads=res.spill_loads,
                    stack_frame=res.stack_frame)
    attrs = h.loaded.attributes(*shape)
    if attrs is not None:
        info.update(registers=attrs.registers, shared_static=attrs.shared_static, local_bytes=attrs.local_bytes,
                    blocks_per_sm=attrs.blocks_per_sm, occupancy=round(attrs.occupancy, 3),
                    dynamic_shared=h.kernel.dynamic_shared_mem(*shape))  # type: ignore[union-attr]
    record({"resources": info})


def run(h: Harness, shape: Any, params: dict, record: Callable[[dict[str, Any]], None], options: dict) -> None:
    check_launch(h, record, tuple(shape))


STREAM_HINT = ("a stream-ordering bug, not a timing one: work on another stream runs unordered with the caller's "
               "uploads and reads (CUDA semantics), so its output may be read before it is written")
STREAM_FIXES = (
    "CuPy: launch on the current stream, cupy.cuda.get_current_stream() (CuPy kernels and cupy.matmul do "
    "by default); do not make a Stream of your own current around them",
    "torch: wrap the call in with torch.cuda.stream(torch.cuda.ExternalStream(cupy.cuda.get_current_stream().ptr)):"
    " (torch otherwise uses its own default stream); Numba or Triton: pass that stream's handle",
    "a stream of your own: join it both ways, mine.wait_event(current.record()) before your launches and "
    "current.wait_event(mine.record()) after them (a synchronize() at the end alone is not enough: your work "
    "could start before the caller's uploads)",
)


def check_current_stream(h: Harness, problem: Any) -> None:
    """A Python launcher's work must go on the current stream (kernels/stream_probe.py)."""

    a, b, c = h.upload(problem)
    message = run_held(h.device.arch, lambda: h.loaded(a.array, b.array, c.array, problem.m, problem.n, problem.k),
                       c.array)
    if message is not None:
        raise GemmCheckFailure(cat.WRONG_STREAM, f"{h.kernel.name!r} at {problem.m}x{problem.n}x{problem.k}: {message}",
                               [STREAM_HINT, *STREAM_FIXES])
