"""Kernels written elsewhere, declared as a newcomer would (docs/kernels.md, "Kernels from
another repository"): our own minimal stand-ins for the public tutorials' styles. A Python
launcher's ``builds=`` compiles CUDA C whose parameters are the launcher's business (leading
dimensions, no M, a half C), and a source that includes a C library header hears what to do."""
from __future__ import annotations

import textwrap

import pytest

from pytest_gemm import CudaKernel, GemmSpecError, kernel

#: A tutorial's kernel with leading dimensions, templated on its block size (how-to-optimize-gemm's style).
LDA_CU = textwrap.dedent("""
    template <int BLOCK>
    __global__ void sgemm(int m, int n, int k, float *a, int lda, float *b, int ldb, float *c, int ldc) {
        int r = blockIdx.y * BLOCK + threadIdx.y, col = blockIdx.x * BLOCK + threadIdx.x;
        if (r < m && col < n) {
            float s = 0.f;
            for (int i = 0; i < k; ++i) s += a[r * lda + i] * b[i * ldb + col];
            c[r * ldc + col] = s;
        }
    }
""")
#: No M: the grid carries it (the CUDA samples' matrixMul style), C first.
NO_M_CU = textwrap.dedent("""
    template <int BLOCK_SIZE> __global__ void MatrixMul(float *C, float *A, float *B, int wA, int wB) {
        int r = blockIdx.y * BLOCK_SIZE + threadIdx.y, col = blockIdx.x * BLOCK_SIZE + threadIdx.x;
        float s = 0.f;
        for (int i = 0; i < wA; ++i) s += A[r * wA + i] * B[i * wB + col];
        C[r * wB + col] = s;
    }
""")
#: half in, half out, size_t sizes (cuda_hgemm's style).
HALF_C_CU = textwrap.dedent("""
    #include <cuda_fp16.h>
    __global__ void hgemm(const half *A, const half *B, half *C, size_t M, size_t N, size_t K) {
        size_t r = blockIdx.y * 16 + threadIdx.y, col = blockIdx.x * 16 + threadIdx.x;
        if (r < M && col < N) { float s = 0.f; for (size_t i = 0; i < K; ++i) s += __half2float(A[r * K + i]) * __half2float(B[i * N + col]); C[r * N + col] = __float2half(s); }
    }
""")


def _launcher(build: CudaKernel):
    @kernel(builds=[build], name="launcher")
    def launcher(a, b, c):
        raise RuntimeError("only called on a GPU")
    return launcher


@pytest.mark.parametrize("source, entry", [(LDA_CU, "sgemm<16>"), (NO_M_CU, "MatrixMul<32>"), (HALF_C_CU, "hgemm")])
def test_a_launcher_s_build_is_not_held_to_the_contract_s_parameters(source, entry):
    """The launcher passes the arguments, so lda, a missing M or a half C is its own business."""
    _launcher(CudaKernel(source=source, entry=entry, block=(16, 16), tile=(16, 16))).validate()


def test_a_launcher_s_build_still_names_a_wrong_entry():
    """What a build's compile depends on is still judged: its entry must instantiate the template."""
    with pytest.raises(GemmSpecError, match="is a template <int BLOCK>; entry must name one instantiation"):
        _launcher(CudaKernel(source=LDA_CU, entry="sgemm", block=(16, 16), tile=(16, 16))).validate()


def test_a_cuda_kernel_launched_by_pytest_gemm_is_still_held_to_its_signature():
    with pytest.raises(GemmSpecError, match="has 6 tokens, but sgemm"):
        CudaKernel(source=LDA_CU, entry="sgemm<16>", block=(16, 16), tile=(16, 16), signature="M,N,K,A,B,C").validate()
