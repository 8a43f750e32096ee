"""Why CUDA cannot be used, in words that name the real cause.

CUDA says ``cudaErrorInsufficientDriver: CUDA driver version is insufficient`` both when the
driver is older than the runtime and when there is no driver at all. :func:`no_gpu_reason`
tells them apart: no ``libcuda.so.1`` on the loader path is "no NVIDIA driver"; a driver whose
CUDA version (``cuDriverGetVersion``) is below the runtime's is "driver older than the runtime".
The facts are gathered by :func:`driver_facts` (ctypes, no CuPy); :func:`explain` is pure.
"""
from __future__ import annotations

import ctypes
from typing import Any

LIBCUDA = "libcuda.so.1"


def _version(v: int) -> str:
    return f"{v // 1000}.{(v % 1000) // 10}"


def driver_facts() -> tuple[bool, int | None]:
    """(libcuda found, the CUDA version its driver supports, e.g. 12040, or None when unknown)."""
    try:
        lib = ctypes.CDLL(LIBCUDA)
    except OSError:
        return False, None
    version = ctypes.c_int(0)
    try:
        status = lib.cuDriverGetVersion(ctypes.byref(version))
    except AttributeError:
        return True, None
    return True, (version.value if status == 0 and version.value > 0 else None)


def explain(error: str, libcuda: bool, driver: int | None, runtime: int | None) -> str:
    """The cause of ``error`` (what CUDA said) and the fix, from the facts about the driver."""
    if not libcuda:
        return (f"no NVIDIA driver: {LIBCUDA} not found (no driver installed, or not on the loader path; "
                f"in a container, expose the GPU: docker run --gpus all)")
    if driver is not None and runtime is not None and driver < runtime:
        major = runtime // 1000
        hint = (f"install the extra of your driver's CUDA major instead, pip install 'pytest-gemm[cuda{driver // 1000}]'"
                if driver // 1000 != major and driver // 1000 in (12, 13) else "or update the driver")
        return (f"the NVIDIA driver supports CUDA {_version(driver)}, older than CuPy's CUDA runtime "
                f"{_version(runtime)}: update the driver, {hint}. CUDA said: {error}")
    if "insufficient" in error.lower() or "no cuda-capable device" in error.lower() or "NoDevice" in error:
        return f"the NVIDIA driver ({LIBCUDA}) loads but reports no usable device (check nvidia-smi). CUDA said: {error}"
    return error


def no_gpu_reason(exc: BaseException, cupy: Any) -> str:
    """``explain`` for an exception CuPy raised while finding the device."""
    libcuda, driver = driver_facts()
    try:
        runtime: int | None = int(cupy.cuda.runtime.runtimeGetVersion())
    except Exception:  # noqa: BLE001 - unknown: judged without it
        runtime = None
    return explain(str(exc) or type(exc).__name__, libcuda, driver, runtime)
