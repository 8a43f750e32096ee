"""``cupy.matmul``: a library call (cuBLAS) as a kernel, the baseline every other example is
ranked against.

    pytest --gemm-kernel examples/ecosystems/cupy_matmul.py:matmul

Stream: CuPy runs cuBLAS on its current stream, the one pytest-gemm made current for the call.
Needs only pytest-gemm with its CuPy extra (``pip install pytest-gemm[cuda12]``).
"""
from pytest_gemm import kernel


@kernel(precision="fp32", name="cupy_matmul")
def matmul(a, b, c):
    import cupy

    cupy.matmul(a, b, out=c)
