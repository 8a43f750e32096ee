"""carol: a tiled kernel whose K loop never ends (hangs on the GPU)."""
from pytest_gemm import CudaKernel

kernel = CudaKernel(
    source="matmul.cu",
    entry="matmul",
    block=(16, 16),
    tile=(16, 16),
    signature="A,B,C,M,N,K",
    precision="fp32",
    name="carol tiled 16",
)
