"""What each kernel launched (the launch trace, ``checks/launch_trace.py``) as the outputs show it:
one terminal line per kernel, the JSON report's ``launches`` entries, JUnit properties, and the
speed line of a Python launcher (kernel time beside event time, the overhead per call).

Pure: reads the run's records (``records.RunResults``); tested with no GPU.
"""
from __future__ import annotations

from typing import Any

from .records import CheckRecord, KernelResult, RunResults

_PREFERRED = ("exact", "launch", "speed")  # the check whose launches stand for the kernel: one plain call (exact) first


def check_launches(r: CheckRecord) -> dict[str, Any] | None:
    """A check's ``launches`` fact (traced, or why not), or None when it has none."""
    launches = r.facts.get("launches")
    return dict(launches) if isinstance(launches, dict) else None


def kernel_launches(result: KernelResult) -> dict[str, Any] | None:
    """The launches that stand for a kernel: those of its exact check (one call) at the largest
    problem when traced, else of its launch check (two calls), else of the first traced check;
    ``{"skipped": why}`` when no check was traced. The largest, not the first: the records come in
    the order the checks ended (xdist's), and at 1x1x1 cupy.matmul runs an elementwise product and
    a sum, not cuBLAS (the H200 at 6fd4208)."""
    traced = [r for r in result.checks if (check_launches(r) or {}).get("kernels") is not None]
    if traced:
        def rank(r: CheckRecord) -> tuple[int, int]:
            volume = r.shape[0] * r.shape[1] * r.shape[2] if r.shape and len(r.shape) == 3 else 0
            return (_PREFERRED.index(r.check) if r.check in _PREFERRED else len(_PREFERRED), -volume)

        best = min(traced, key=rank)
        return dict(check_launches(best) or {}, check=best.where)
    skipped = next((check_launches(r) for r in result.checks if (check_launches(r) or {}).get("skipped")), None)
    return {"skipped": str(skipped["skipped"])} if skipped else None


#: Said wherever a skipped trace leaves a course's own-kernel rule unjudged (terminal, Gradescope).
OWN_KERNEL_UNCHECKED = "the course's own-kernel rule (gemm_own_kernel) was not checked"


def launch_lines(records: Any, own_kernel: bool = False) -> list[str]:
    """One line per kernel under test: ``mine (launch 64x64x64): 3 launches: my_kernel<128,128> x2,
    splitk_reduce x1``; a trace skipped everywhere is said once, with its reason."""
    lines, skipped = [], []
    for name, result in RunResults.build(records).kernels.items():
        if result.ladder:
            continue
        launches = kernel_launches(result)
        if launches is None:
            continue
        if "skipped" in launches:
            skipped.append(launches["skipped"])
            continue
        lines.append(f"{name} ({launches['check']}): {launches.get('summary')}")
    for reason in dict.fromkeys(skipped):
        lines.append(f"launch trace skipped: {reason}"
                     + (f"; {OWN_KERNEL_UNCHECKED}" if own_kernel else ""))
    return lines


def speed_lines(records: Any) -> list[str]:
    """The speed line of each Python launcher, traced: kernel time beside event time, and the
    launcher's overhead per call inside the timed region."""
    lines = []
    for name, result in RunResults.build(records).kernels.items():
        for r in result.timed:
            kt = r.facts.get("kernel_time")
            launcher = (check_launches(r) or {}).get("launcher")
            if not isinstance(kt, dict) or launcher != "python":
                continue
            lines.append(f"{name} speed {'x'.join(map(str, r.shape or []))}: event {kt['event_ms']:.4f} ms a call, "
                         f"its GPU kernels {kt['kernel_ms']:.4f} ms ({kt['launches_per_call']:.3g} launches a call), "
                         f"launcher overhead {kt['overhead_ms']:.4f} ms a call")
    return lines


def timing_trace(r: CheckRecord) -> dict[str, Any]:
    """The JSON timing entry's traced figures (None when not traced)."""
    kt = r.facts.get("kernel_time") if isinstance(r.facts.get("kernel_time"), dict) else {}
    return {"kernel_ms": kt.get("kernel_ms"), "overhead_ms": kt.get("overhead_ms")}


def launch_properties(records: Any) -> list[tuple[str, str]]:
    """JUnit: ``gemm:<kernel>:launches`` per kernel (the summary line, or why it was not traced)."""
    props = []
    for name, result in RunResults.build(records).kernels.items():
        launches = kernel_launches(result)
        if launches is not None:
            props.append((f"gemm:{name}:launches", f"skipped: {launches['skipped']}" if "skipped" in launches
                          else f"{launches['check']}: {launches.get('summary')}"))
    return props
