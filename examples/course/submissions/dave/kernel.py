"""dave: a naive kernel that writes far past the end of C (illegal address)."""
from pytest_gemm import CudaKernel

kernel = CudaKernel(
    source="matmul.cu",
    entry="matmul",
    block=(16, 16),
    tile=(16, 16),
    signature="A,B,C,M,N,K",
    precision="fp32",
    name="dave naive",
)
