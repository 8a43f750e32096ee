"""How a kernel process's host thread waits for the GPU (``PYTEST_GEMM_CUDA_WAIT``).

CUDA's default (``auto``) spins a core whenever a process has fewer CUDA contexts than the
machine has cores, which is every kernel process: a synchronise, a copy back, an event waited
for all keep a core busy until the GPU is done. When a class's students share one GPU, each
kernel process spins while the others' work runs, and the cores they spin on are the ones
the students' pytest processes, start-ups and input draws need. ``blocking`` makes the
thread sleep until the GPU signals it instead (CU_CTX_SCHED_BLOCKING_SYNC). Nothing asks for
it by default: whether it makes a class faster is still to be measured (docs/courses.md).
Timings are CUDA events, read on the GPU, so how the host waits does not move them.

The mode is set on the device's primary context before CUDA starts it (``set_wait``, called by
the kernel process's start-up), through the driver (``libcuda``), which CuPy does not expose.
"""
from __future__ import annotations

import ctypes
from typing import Any, Mapping

WAIT_ENV = "PYTEST_GEMM_CUDA_WAIT"
# CUDA's CU_CTX_SCHED_* values (cuda.h)
MODES = {"auto": 0, "spin": 1, "yield": 2, "blocking": 4}
SCHED_MASK = 0x7


def wait_mode(env: Mapping[str, str]) -> str | None:
    """The mode ``env`` asks for, None when it asks for none (CUDA's default stays)."""
    given = env.get(WAIT_ENV, "").strip().lower()
    if not given:
        return None
    if given not in MODES:
        raise ValueError(f"{WAIT_ENV}={env[WAIT_ENV]!r} is not a way to wait for the GPU; "
                         f"use one of {', '.join(MODES)} (or leave it unset for CUDA's default)")
    return given


def _driver() -> Any:
    from .driver import LIBCUDA  # lazy: ctypes only, no CuPy

    return ctypes.CDLL(LIBCUDA)


def _device(lib: Any, ordinal: int) -> tuple[Any, str | None]:
    """The driver's handle of device ``ordinal``, and None; or why there is none."""
    device = ctypes.c_int(0)
    for call, args in (("cuInit", (0,)), ("cuDeviceGet", (ctypes.byref(device), ordinal))):
        status = getattr(lib, call)(*args)
        if status != 0:
            return device, f"{call} returned CUDA error {status}"
    return device, None


def set_wait(mode: str, ordinal: int, lib: Any = None) -> str | None:
    """Set ``mode`` on device ``ordinal``'s primary context (before CUDA starts it). None when
    set; else why not, in words (the process then waits as CUDA's default does)."""
    flags = MODES[mode]
    try:
        lib = _driver() if lib is None else lib
    except OSError as exc:
        return f"the NVIDIA driver could not be loaded ({exc})"
    device, missing = _device(lib, ordinal)
    if missing:
        return missing
    setter = getattr(lib, "cuDevicePrimaryCtxSetFlags_v2", None) or lib.cuDevicePrimaryCtxSetFlags
    status = setter(device, ctypes.c_uint(flags))
    return None if status == 0 else f"cuDevicePrimaryCtxSetFlags returned CUDA error {status}"


def current_wait(ordinal: int, lib: Any = None) -> str:
    """The wait mode of device ``ordinal``'s primary context, as a name of ``MODES``."""
    lib = _driver() if lib is None else lib
    device, missing = _device(lib, ordinal)
    if missing:
        raise RuntimeError(missing)
    flags, active = ctypes.c_uint(0), ctypes.c_int(0)
    if lib.cuDevicePrimaryCtxGetState(device, ctypes.byref(flags), ctypes.byref(active)) != 0:
        raise RuntimeError("cuDevicePrimaryCtxGetState failed")
    wanted = flags.value & SCHED_MASK
    return next(name for name, value in MODES.items() if value == wanted)
