"""alice: shared-memory tiled SGEMM, 32 x 32 tiles (correct on every shape)."""
from pytest_gemm import CudaKernel

kernel = CudaKernel(
    source="matmul.cu",
    entry="matmul",
    block=(32, 32),
    tile=(32, 32),
    signature="A,B,C,M,N,K",
    precision="fp32",
    options=("-DTILE=32",),
    name="alice tiled 32",
)
