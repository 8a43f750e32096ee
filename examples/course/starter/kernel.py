"""Your submission. Fill in matmul.cu (keep the name `kernel` below: the grader loads it).

Check it yourself before submitting, exactly as the grader will:

    pytest --gemm-kernel kernel.py:kernel

With no GPU, that still compile-checks matmul.cu for every architecture the installed NVRTC supports (13 with CUDA 12.9's NVRTC: sm_70 up to sm_121).
"""
from pytest_gemm import CudaKernel

kernel = CudaKernel(
    source="matmul.cu",        # next to this file
    entry="matmul",            # the extern "C" function in matmul.cu
    block=(16, 16),            # threads per block (x, y)
    tile=(16, 16),             # rows, cols of C per block: grid = (ceil(N/16), ceil(M/16))
    signature="A,B,C,M,N,K",   # the kernel's argument order
    precision="fp32",
    name="starter naive",
)
