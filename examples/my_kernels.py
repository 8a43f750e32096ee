"""Example kernels: run the conformance suite on them with
`pytest --gemm-kernel examples/my_kernels.py:tiled`."""
from pytest_gemm import CudaKernel, kernel

tiled = CudaKernel(
    source="tiled.cu",
    entry="example_tiled",
    block=(16, 16),
    tile=(16, 16),
    signature="A,B,C,M,N,K",
    precision="fp32",
    options=("-DTILE=16",),
    name="example tiled 16",
)


@kernel(precision="fp32", name="cupy matmul")
def cupy_matmul(a, b, c):
    """A Python launcher: any library may write a @ b into c."""
    import cupy

    cupy.matmul(a, b, out=c)


both = [tiled, cupy_matmul]
