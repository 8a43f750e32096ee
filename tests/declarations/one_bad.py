"""Three kernels for the fake GPU (tests/fakegpu.py decides what each does by its name), one
of them declared wrong: precision="bf16" with __half* pointers (the C prototype says fp16)."""
from pytest_gemm import CudaKernel, kernel

HALF = r'''
#include <cuda_fp16.h>
extern "C" __global__ void mm(const __half* A, const __half* B, float* C, int M, int N, int K) {}
'''


@kernel(name="ok")
def ok(a, b, c):
    raise AssertionError("the fake dispatcher never launches a kernel")


@kernel(name="ok0")
def ok0(a, b, c):
    raise AssertionError("the fake dispatcher never launches a kernel")


bad = CudaKernel(source=HALF, entry="mm", block=(16, 16), tile=(16, 16), precision="bf16", name="bad")

KERNELS = [ok, bad, ok0]
