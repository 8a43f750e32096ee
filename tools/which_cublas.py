#!/usr/bin/env python3
"""Which cuBLAS CuPy loads here: the ``libcublas`` files mapped into this process.

    python3 tools/which_cublas.py

imports CuPy's cuBLAS binding (which loads ``libcublas`` and ``libcublasLt``: from the CUDA pip
component the ``cuda12``/``cuda13`` extra installs, found by cuda-pathfinder, or a system CUDA
toolkit), and on a GPU also creates a cuBLAS handle and multiplies two small matrices through it;
then prints each ``libcublas*`` file in ``/proc/self/maps``. Exit status 1, with the reason, when
the binding cannot load (no cuBLAS: ``pip install -e ".[cuda12]"`` brings it). No GPU needed.
"""
from __future__ import annotations

import argparse
import sys


def mapped(prefix: str = "libcublas") -> list[str]:
    """The files named ``prefix*`` mapped into this process, in the order first seen."""
    seen: list[str] = []
    with open("/proc/self/maps") as maps:
        for line in maps:
            path = line.split()[-1] if len(line.split()) >= 6 else ""
            if path.rsplit("/", 1)[-1].startswith(prefix) and path not in seen:
                seen.append(path)
    return seen


def main() -> int:
    argparse.ArgumentParser(description=__doc__.split("\n", 1)[0]).parse_args()
    try:
        import cupy
        from cupy_backends.cuda.libs import cublas  # noqa: F401 - loads libcublas and libcublasLt
    except ImportError as exc:
        print(f"cuBLAS: CuPy cannot load it: {exc}; install the extra of your CUDA major, "
              "pip install -e \".[cuda12]\" (or cuda13), which brings the CUDA pip component cuBLAS")
        return 1
    try:
        cupy.cuda.runtime.getDeviceCount()
        cupy.cuda.device.get_cublas_handle()
        a = cupy.ones((64, 64), dtype=cupy.float32)
        ok = float((a @ a)[0, 0]) == 64.0
        where = f"a handle created and a 64x64 product {'right' if ok else 'WRONG'} on {cupy.cuda.Device().pci_bus_id}"
    except Exception as exc:  # noqa: BLE001 - no GPU: the binding alone
        where = f"no GPU here ({type(exc).__name__}): the binding loaded, no handle created"
    files = mapped()
    print(f"cuBLAS: CuPy {cupy.__version__}, {where}")
    for path in files:
        print(f"  {path}")
    if not any("/libcublas.so" in p for p in files):
        print("cuBLAS: no libcublas.so is mapped into this process")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
