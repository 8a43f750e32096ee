"""Where a kernel's seconds went, summed over its check records: pure logic on the records.

Each check's record carries its test's wall time (``wall_s``), its own time in the kernel's
process (``check_s``), its waits for the GPU-wide lock (``lock_wait_s``: the parent's shared
hold, or a timed check's exclusive one), a timed check's wait for a quiet GPU
(``gpu_quiet.waited_s``), and, when it had to start a fresh kernel process, that start-up's
phases (``process_start``: the process and its imports, importing the kernel, the lock wait
before preparing, CuPy's and pytest-gemm's imports, the CUDA context, compiling, loading the
module, the harness's CuPy kernels). The summary goes to Gradescope's ``extra_data`` (and so
to the gradebook's JSON) and to the JSON report, so that a class's staff can see where a
student's minutes went.
"""
from __future__ import annotations

from typing import Any, Iterable
from .records import as_records

#: A start-up's phases, in the order they happen (seconds).
START_PHASES = ("process_s", "kernel_import_s", "lock_wait_s", "imports_s", "cuda_context_s", "compile_s",
                "module_load_s", "harness_kernels_s", "trace_s")


def time_summary(records: Iterable[Any], kernel: str | None = None) -> dict[str, Any]:
    """The seconds of ``kernel``'s checks (every record's when None): ``{"checks", "wall_s",
    "check_s", "lock_wait_s", "quiet_wait_s", "process_starts", "start_s", "start": {phase:
    seconds}}``; ``start_s`` is the start-ups' total (their phases plus what lies between).
    ``records``: ``records.CheckRecord`` (or their JSON form)."""
    out: dict[str, Any] = {"checks": 0, "wall_s": 0.0, "check_s": 0.0, "lock_wait_s": 0.0, "quiet_wait_s": 0.0,
                           "process_starts": 0, "start_s": 0.0, "start": {p: 0.0 for p in START_PHASES}}
    for r in as_records(records):
        if kernel is not None and r.kernel != kernel:
            continue
        facts = r.facts
        out["checks"] += 1
        out["wall_s"] += _num(r.wall_s)
        out["check_s"] += _num(facts.get("check_s"))
        out["lock_wait_s"] += _num(facts.get("lock_wait_s"))
        quiet = facts.get("gpu_quiet")
        out["quiet_wait_s"] += _num(quiet.get("waited_s") if isinstance(quiet, dict) else None)
        start = facts.get("process_start")
        if isinstance(start, dict):
            out["process_starts"] += 1
            out["start_s"] += sum(_num(start.get(p)) for p in ("process_s", "kernel_import_s", "lock_wait_s")) \
                + _num(start.get("prepare_s"))
            for phase in START_PHASES:
                out["start"][phase] += _num(start.get(phase))
    for key in ("wall_s", "check_s", "lock_wait_s", "quiet_wait_s", "start_s"):
        out[key] = round(out[key], 3)
    out["start"] = {k: round(v, 3) for k, v in out["start"].items()}
    return out


def _num(value: Any) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0.0
