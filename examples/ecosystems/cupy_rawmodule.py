"""CuPy ``RawModule``: your own CUDA C (examples/tiled.cu), compiled and launched by CuPy from a
Python launcher.

    pytest --gemm-kernel examples/ecosystems/cupy_rawmodule.py:tiled

Stream: a CuPy kernel launch goes on CuPy's current stream, which is the one pytest-gemm made
current for the call, so there is nothing to do (never pass a stream of your own).
Needs only pytest-gemm with its CuPy extra (``pip install pytest-gemm[cuda12]``).
"""
import functools
from pathlib import Path

from pytest_gemm import kernel

TILE = 16  # examples/tiled.cu's default tile


@functools.cache
def _function():
    import cupy

    module = cupy.RawModule(code=(Path(__file__).parent.parent / "tiled.cu").read_text())
    return module.get_function("example_tiled")


@kernel(precision="fp32", name="cupy_rawmodule_tiled")
def tiled(a, b, c):
    import numpy as np

    m, k = a.shape
    n = b.shape[1]
    grid = ((n + TILE - 1) // TILE, (m + TILE - 1) // TILE)
    _function()(grid, (TILE, TILE), (a, b, c, np.int32(m), np.int32(n), np.int32(k)))
