"""bob: tiled 16 whose store forgets the column guard (wrong on ragged N)."""
from pytest_gemm import CudaKernel

kernel = CudaKernel(
    source="matmul.cu",
    entry="matmul",
    block=(16, 16),
    tile=(16, 16),
    signature="A,B,C,M,N,K",
    precision="fp32",
    name="bob tiled 16",
)
