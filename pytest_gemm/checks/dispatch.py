"""Run one named check on one kernel: what the sandbox child (and the in-process mode)
executes. Returns the facts the check recorded. ``release_memory`` gives back, between
checks, what CuPy's memory pools kept."""
from __future__ import annotations

import sys
from typing import Any

from ..model.contract import GemmKernel
from . import registry
import gc
from ..kernels.device import require_device
from ..model import categories as cat
from ..model.categories import GemmCheckFailure
from .launch_trace import reject_vendor_kernels, traced


def run_check(kernel: GemmKernel, check: str, shape: list[int] | tuple[int, ...], params: dict[str, Any],
              options: dict[str, Any], facts: dict[str, Any]) -> dict[str, Any]:
    """Execute ``check`` (a registry name); raise GemmCheckFailure (or pytest's Skipped) as the
    check does. What the check records goes into ``facts``, which survives a failure."""
    from ..kernels.harness import harness_for, scrub_secrets  # lazy: a test replaces harness_for on its module

    spec = registry.get(check)
    if not spec.gpu:
        raise ValueError(f"check {check!r} runs without a GPU, in its own conformance test")

    h = harness_for(kernel, require_device())
    h.loaded.returned = None
    try:
        with traced(kernel, options, facts):  # every GPU kernel launched during the check (launch_trace.py)
            spec.runner()(h, tuple(shape), params, facts.update, options)
    except GemmCheckFailure as exc:
        if h.loaded.returned and exc.category in (cat.UNWRITTEN_OUTPUT, cat.WRONG_VALUES):
            exc.details.append(f"the launcher returned {h.loaded.returned}: only C is read, so write the result into c "
                               "(e.g. cupy.matmul(a, b, out=c), or c[...] = result)")
        raise
    finally:
        scrub_secrets()
    reject_vendor_kernels(str(kernel.name), facts, options)  # the course's gemm_own_kernel
    return facts


def release_memory() -> dict[str, int]:
    """Free the blocks CuPy's default (device) and pinned (host) memory pools keep for reuse,
    so that a process idle between checks holds its CUDA context and little else. Returns
    the bytes the device pool held before (its high-water mark for the check just run,
    since a check frees nothing back to the device itself); {} when CuPy was never imported."""
    cupy = sys.modules.get("cupy")
    if cupy is None:
        return {}
    try:
        cupy.cuda.runtime.getDeviceCount()
    except Exception:  # noqa: BLE001 - CuPy imported where there is no GPU: nothing was allocated
        return {}

    gc.collect()  # arrays kept alive only by reference cycles (tracebacks, closures) go first
    pool = cupy.get_default_memory_pool()
    held = {"pool_bytes": int(pool.total_bytes())}
    pool.free_all_blocks()
    cupy.get_default_pinned_memory_pool().free_all_blocks()
    return held
