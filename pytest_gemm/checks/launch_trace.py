"""The launch trace around one check (``dispatch.run_check``), and the judges that read it.

- ``traced``: CUPTI on for the whole check (``measure/trace.py``); the check's facts get
  ``launches``: the kernel's own launches grouped by kernel (``judges/launches.py``: name,
  count, grids, block, registers, shared memory, GPU time), the summary line, how many calls
  and how many of the harness's own launches there were; or ``{"skipped": why}``.
- ``reject_vendor_kernels``: the course setting ``gemm_own_kernel`` (``--gemm-own-kernel``):
  a check whose own launches include a vendor library's kernels fails as ``vendor_kernel``,
  naming them.
- ``reject_traced_escape`` and ``kernel_time``: the speed check's timed calls against their
  launches (``timing_escape``), and the kernels' GPU time beside the event time.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Callable, Iterator

from ..judges.launches import (call_escape, group, kernel_rate_escape, kernel_time_facts, summary_line,
                               vendor_kernels, vendor_sentence)
from ..measure import trace
from ..model import categories as cat
from ..model.categories import GemmCheckFailure
import sys
import time
from ..model.contract import PyKernel


def trace_facts(tracer: trace.Tracer, python_launcher: bool) -> dict[str, Any]:
    t0 = time.perf_counter_ns()
    launches = tracer.launches()
    mine = [x for x in launches if x.call is not None]
    entries = group(mine)
    read_ns = tracer.read_ns + tracer.overhead_ns + time.perf_counter_ns() - t0
    return {"summary": summary_line(entries), "kernels": entries, "calls": len(tracer.windows),
            "launches": len(mine), "harness_launches": len(launches) - len(mine),
            "launcher": "python" if python_launcher else "cuda",
            "api_records": tracer.api_records, "trace_s": round(read_ns / 1e9, 3)}


@contextmanager
def traced(kernel: Any, options: dict[str, Any], facts: dict[str, Any]) -> Iterator[trace.Tracer | None]:
    """Trace the check run inside; its facts get ``launches`` whether it passes or fails."""

    reason = trace.switched_off(options) or _not_asked(kernel, options)
    tracer: trace.Tracer | None = None
    if reason is None:
        tracer = trace.Tracer()
        if not tracer.start():
            reason, tracer = tracer.reason, None
    try:
        yield tracer
    finally:
        if tracer is None:
            facts["launches"] = {"skipped": reason}
        else:
            try:
                _synchronize()  # every launch of the check has ended: its record is complete
                tracer.stop()
                facts["launches"] = trace_facts(tracer, isinstance(kernel, PyKernel))
            except Exception as exc:  # noqa: BLE001 - a context the kernel broke: the check's own failure speaks
                facts["launches"] = {"skipped": f"the trace could not be read ({type(exc).__name__}: {str(exc)[:160]})"}


def _not_asked(kernel: Any, options: dict[str, Any]) -> str | None:
    """``--gemm-trace auto`` (the default) traces Python launchers, and every kernel under the
    course's own-kernel rule: a CUDA C kernel is launched by pytest-gemm itself, once a call."""

    if str(options.get("trace") or "auto") != "auto" or options.get("own_kernel") or isinstance(kernel, PyKernel):
        return None
    return ("not traced: a CUDA C kernel is launched by pytest-gemm itself, one launch a call (its registers and "
            "shared memory are in the compile report); --gemm-trace on traces it too")


def _synchronize() -> None:

    cupy = sys.modules.get("cupy")
    if cupy is not None:
        try:
            cupy.cuda.runtime.deviceSynchronize()
        except Exception:  # noqa: BLE001 - a broken context: the check's own failure says so
            pass


def reject_vendor_kernels(name: str, facts: dict[str, Any], options: dict[str, Any]) -> None:
    """``vendor_kernel`` when the course requires the student's own kernel and this check's own
    launches include a vendor library's (or one of the course's listed) kernels."""
    if not options.get("own_kernel"):
        return
    launches = facts.get("launches") or {}
    found = vendor_kernels(launches.get("kernels") or [], tuple(options.get("vendor_kernels") or ()))
    if not found:
        return
    raise GemmCheckFailure(
        cat.VENDOR_KERNEL, f"{name!r} launched library kernels, not its own: {vendor_sentence(found)}",
        [f"all its launches here: {launches.get('summary')}",
         "this course requires your own kernel (gemm_own_kernel): calling cuBLAS, cuBLASLt, CUTLASS or cuDNN "
         "(cupy.matmul, torch.mm, a @ b) computes the product with NVIDIA's kernels, not yours"])


def reject_traced_escape(name: str, where: str = "", flops: float = 0.0, roof_tflops: float = 0.0,
                         basis: str = "", margin: float = 1.0) -> None:
    """timing_escape when the timed calls and their traced launches disagree, or (given the
    product's ``flops`` and the roof) when their kernels ran too briefly for it (judges/launches.py)."""
    tracer = trace.active()
    if tracer is None:
        return
    tracer.flush()
    calls, launches = tracer.calls(), tracer.launches()
    found = call_escape(calls, launches) or kernel_rate_escape(calls, launches, flops, roof_tflops, basis, margin)
    if found is not None:
        raise GemmCheckFailure(cat.TIMING_ESCAPE, f"{where}{name!r}: {found[0]}", found[1])


def kernel_time(event_ms: float, record: Callable[[dict[str, Any]], None]) -> None:
    """Record the timed calls' kernel time beside their event time (``kernel_time``), when traced."""
    tracer = trace.active()
    if tracer is None:
        return
    tracer.flush()
    facts = kernel_time_facts(tracer.calls(), tracer.launches(), event_ms)
    if facts is not None:
        record({"kernel_time": facts})
