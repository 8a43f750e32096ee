"""The functions a timing rests on, pinned before a kernel is loaded.

A Python launcher runs in the process that times it, so it could replace the timer
(``cupy.cuda.get_elapsed_time``, ``time.perf_counter``) or this package's own timing
functions and report any speed it likes. The sandbox child calls ``pin()`` before it
imports a kernel (with ``--gemm-isolation none`` the kernels run in pytest's own process, which
pins them before it loads the kernels: ``runner/configure.py``); the speed and sweep checks
call ``tampered()`` before and after timing, and a replaced function is a ``timing_escape``.
"""
from __future__ import annotations

import importlib
from typing import Any

# (module, attribute) pairs whose identity must not change once pinned
WATCHED: tuple[tuple[str, str], ...] = (
    ("time", "perf_counter"), ("time", "monotonic"),
    ("cupy.cuda", "get_elapsed_time"), ("cupy.cuda", "Event"), ("cupy.cuda", "Stream"),
    ("cupy.cuda.runtime", "deviceSynchronize"), ("cupy.cuda.runtime", "eventElapsedTime"),
    ("pytest_gemm.measure.timing", "time_gpu"), ("pytest_gemm.measure.timing", "summarize"),
    ("pytest_gemm.measure.timing", "escaped_work"), ("pytest_gemm.measure.launch_guard", "LaunchGuard"),
    ("pytest_gemm.measure.timed", "timed_run"), ("pytest_gemm.measure.timed", "time_cublas"),
    ("pytest_gemm.checks.speed", "timed_run"), ("pytest_gemm.checks.speed", "time_cublas"),
    ("pytest_gemm.checks.speed", "reject_escaped_work"), ("pytest_gemm.checks.speed", "reject_impossible_timing"),
)
_PINNED: dict[str, tuple[Any, str, Any]] = {}


def _gpu_usable() -> bool:
    try:
        import cupy  # lazy: CuPy (the plugin loads with no GPU)

        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:  # noqa: BLE001 - no CuPy, no driver: nothing will be timed here
        return False


def pin(gpu: bool | None = None) -> None:
    """Remember the functions in ``WATCHED`` as they are now (before any kernel is imported);
    CuPy's and this package's timing modules only where a GPU is usable (nothing is timed
    otherwise). ``gpu=True``: pin them without asking CUDA (pytest's own process, before each
    xdist worker has chosen its GPU: importing CuPy touches no device)."""
    gpu = _gpu_usable() if gpu is None else gpu
    for module_name, attr in WATCHED:
        if not gpu and module_name != "time":
            continue
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        if hasattr(module, attr):
            _PINNED[f"{module_name}.{attr}"] = (module, attr, getattr(module, attr))


def tampered() -> list[str]:
    """The pinned names that no longer hold the pinned object."""
    return [name for name, (module, attr, original) in _PINNED.items() if getattr(module, attr, None) is not original]
