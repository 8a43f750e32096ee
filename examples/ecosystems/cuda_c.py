"""CUDA C: a ``.cu`` file (examples/tiled.cu, shared-memory tiles of 16 x 16) declared with
``CudaKernel``; pytest-gemm compiles it with NVRTC and launches it itself.

    pytest --gemm-kernel examples/ecosystems/cuda_c.py:tiled

Stream: pytest-gemm launches a CudaKernel on the stream it times, so there is nothing to do.
Needs only pytest-gemm with its CuPy extra (``pip install pytest-gemm[cuda12]``).
"""
from pytest_gemm import CudaKernel

tiled = CudaKernel(source="../tiled.cu", entry="example_tiled", block=(16, 16), tile=(16, 16),
                   signature="A,B,C,M,N,K", precision="fp32", name="cuda_c_tiled")
