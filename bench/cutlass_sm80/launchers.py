"""CUTLASS's Ampere tensor-core GEMM (gemm_sm80.cu, built by build.sh) as pytest-gemm launchers,
one per tile configuration: `pytest --gemm-kernel bench/cutlass_sm80/launchers.py:ALL`.

Somebody else's mma.sync kernel, run through the whole conformance suite and timed against
cuBLAS in the same run: the ceiling that issue 18 compares the `mma-fp16` rung with.
The library is looked for in bench/cutlass_sm80/build/ or at $PYTEST_GEMM_CUTLASS_LIB."""
from __future__ import annotations

import ctypes
import os
from pathlib import Path

from pytest_gemm import kernel

_HERE = Path(__file__).resolve().parent
_BUILD = _HERE / "build"
_lib: ctypes.CDLL | None = None


def _library() -> ctypes.CDLL:
    global _lib
    if _lib is None:
        path = Path(os.environ.get("PYTEST_GEMM_CUTLASS_LIB", _BUILD / "libcutlass_sm80.so"))
        if not path.is_file():
            raise FileNotFoundError(f"{path} does not exist: build it with "
                                    f"CUTLASS_DIR=/path/to/cutlass bash {_HERE / 'build.sh'}")
        _lib = ctypes.CDLL(str(path))
    return _lib


def _entry(config: str):
    """The library's function for ``config``, its C signature declared once (not in the timed call)."""
    fn = getattr(_library(), f"gemm_cutlass_sm80_{config}")
    if fn.argtypes is None:
        fn.restype = ctypes.c_int
        fn.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_int] * 3 + [ctypes.c_void_p]
    return fn


def _launcher(config: str):
    def run(a, b, c):
        import cupy

        fn = _entry(config)
        m, k = a.shape
        n = b.shape[1]
        status = fn(a.data.ptr, b.data.ptr, c.data.ptr, m, n, k, cupy.cuda.get_current_stream().ptr)
        if status == 1:
            raise ValueError(f"CUTLASS cannot run {m}x{n}x{k} with 16-byte accesses "
                             "(K and N multiples of 8, A and B 16-byte aligned)")
        if status != 0:
            raise RuntimeError(f"CUTLASS's launch failed (status {status})")

    run.__name__ = f"cutlass_sm80_{config}"
    return kernel(run, precision="fp16", min_cc=(8, 0), multiple_of=(1, 8, 8), name=f"cutlass-sm80-{config}")


CONFIGS = ("128x256x64_s3", "256x128x64_s3", "128x256x32_s4", "256x128x32_s4", "128x128x64_s4",
           "128x128x32_s5", "128x256x64_s4")
ALL = {f"cutlass-sm80-{config}": _launcher(config) for config in CONFIGS}
