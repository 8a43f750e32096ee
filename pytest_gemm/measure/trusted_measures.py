"""The roofs and cuBLAS times that confined kernels read, measured by a process that never ran
submitted code.

A gradebook shares these measurements between its students (``run_cache.py``): measured once
per GPU instead of once per student. If the students' own processes wrote them, a submission
graded first could store any cuBLAS time there, and every other student's
``fraction_of_cublas`` (their speed points) would follow it. So under confinement the folder is
bound read-only into the kernels' processes (``checks/sandbox_confine.py``), and before a speed
check the pytest process that judges the kernel (which never imports a submission,
docs/security.md) measures what that check will read: the first student's process that needs an
entry measures it, holding the GPU alone; the others find it stored and take no lock (those that
ask meanwhile wait for it, holding nothing).
"""
from __future__ import annotations

import contextlib
import fcntl
import os
import warnings
from typing import Any, Iterator

from ..kernels.harness import harness_for
from .cublas import CUBLAS
from .gpu_lock import gpu_lock, lock_paths, open_lock_file
from .run_cache import cache_dir, stored
from .timed import (ROOFS_ENTRY, Staged, cublas_entry, gpu_quiet, problems_for, process_roofs, stage_inputs,
                    time_cublas, timed_run)
from .timing import speed_settings
from ..model.shapes import Shape


def wanted(precision: str, shape: Shape, options: dict[str, Any]) -> list[str]:
    """The run cache's entries a speed check at ``precision`` and ``shape`` reads (``options``:
    the check's, as the runner sends them)."""
    return _wanted(precision, shape, speed_settings(options))


def _wanted(precision: str, shape: Shape, settings: tuple[float, float | None]) -> list[str]:
    return [ROOFS_ENTRY, cublas_entry(precision, shape, *settings)]


def measure_for_confined(precision: str, shape: Shape, options: dict[str, Any]) -> bool:
    """Store the roofs and cuBLAS at ``precision`` and ``shape`` in the run's cache unless they
    are there already. Returns whether this process measured. A failure is a warning, not the
    kernel's: its own process then measures for itself (it cannot store what it measured)."""
    if cache_dir() is None or precision not in CUBLAS:
        return False
    try:
        return _measure(precision, tuple(shape), options)  # type: ignore[arg-type]
    except Exception as exc:  # noqa: BLE001 - the kernel's own check still measures, unshared
        warnings.warn(f"pytest-gemm: the run's own measurement of the roofs and cuBLAS failed "
                      f"({type(exc).__name__}: {exc}); each confined kernel measures them itself", stacklevel=2)
        return False


def _measure(precision: str, shape: Shape, options: dict[str, Any]) -> bool:
    from ..kernels.device import probe  # lazy: a test replaces probe on its module

    device = probe()
    if isinstance(device, str):  # no GPU here: the speed check skips, saying why, in the kernel's process
        return False
    budget_s, stop_within = settings = speed_settings(options)
    roofs, cublas = _wanted(precision, shape, settings)
    if stored(device, roofs) and stored(device, cublas):
        return False  # the usual case: an earlier student's process measured them
    with _one_at_a_time():
        if stored(device, roofs) and stored(device, cublas):
            return False  # measured by the process this one waited for
        problems = problems_for(precision, shape)  # host work: drawn before the GPU is taken
        staged = None if stored(device, cublas) else _rehearse(precision, shape, device, problems)
        with _alone() as hold:
            measured = process_roofs(device)  # stored, or measured and stored (it also settles the clocks)
            if not stored(device, cublas):
                gpu_quiet(device, measured, hold.step_aside)
                time_cublas(precision, shape, device, budget_s, problems, stop_within, staged)
        del staged
        _release()
    return True


@contextlib.contextmanager
def _one_at_a_time() -> Iterator[None]:
    """One judging process measures at a time; the others wait here, holding nothing of the GPU,
    and then find the entries stored (in a class's first round several reach their speed checks
    together). The lock file lies beside the GPU lock's, where no sandbox sees it, so a kernel
    cannot hold it."""
    fd = open_lock_file(lock_paths()[0].with_suffix(".measuring"))
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the flock


def _rehearse(precision: str, shape: Shape, device: Any, problems: list[Any]) -> Staged:
    """cuBLAS's timed run once, untimed, under a shared hold, and its inputs left on the GPU: a
    judging process has run nothing on the GPU before, so its CUDA context, cuBLAS's handle and
    kernels, and the CuPy kernels of the timing and its verification are made here, beside the
    other checks, not while every process waits for this one (on the H100 at 7253405 the first
    such measurement held the GPU alone 4.93 s; an unconfined class's first timing, roofs and
    cuBLAS included, 2.46 s). Nothing here goes into the run's cache; the inputs are returned
    for the timing, and the right answers it made stay marked for ``scrub_secrets`` as the
    timing's do (``keep_secret``), which this process never calls: they stay until it exits."""
    import cupy  # lazy: CuPy (the plugin loads with no GPU)

    harness = harness_for(CUBLAS[precision], device)
    with gpu_lock(False, what="measures' rehearsal"), cupy.cuda.Stream.null:
        staged = stage_inputs(harness, problems)
        _, verify = timed_run(harness, shape, 0.0, problems, staged=staged)
        verify()
        cupy.cuda.runtime.deviceSynchronize()  # none of it runs on into the exclusive hold
    return staged


@contextlib.contextmanager
def _alone() -> Iterator[Any]:
    """The GPU held alone, on the null stream the timings use (as checks/speed.py holds it)."""
    import cupy  # lazy: CuPy (the plugin loads with no GPU)

    with gpu_lock(True, what="measures for confined kernels") as hold, cupy.cuda.Stream.null:
        yield hold


def _release() -> None:
    """This process judges: it keeps its CUDA context, not the buffers it measured with."""
    import cupy  # lazy: CuPy (the plugin loads with no GPU)

    cupy.get_default_memory_pool().free_all_blocks()
