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


#: A kernel file as a tutorial writes it for nvcc: host headers, a host launcher, its own header.
NVCC_STYLE_CU = textwrap.dedent("""
    #include <stdio.h>
    #include <cublas_v2.h>
    #include "kernel/acc.cuh"
    template <const int BM, const int BN>
    __global__ __launch_bounds__(256) void sgemm(int M, int N, int K, float alpha, float *A, float *B, float beta, float *C) {
        int r = blockIdx.y * BM + threadIdx.x / BN, col = blockIdx.x * BN + threadIdx.x % BN;
        if (r < M && col < N) C[r * N + col] = alpha * dot(A + r * K, B + col, K, N) + beta * C[r * N + col];
    }
    void run_sgemm(int M, int N, int K, float alpha, float *A, float *B, float beta, float *C, cublasHandle_t h) {
        sgemm<16, 16><<<dim3((N + 15) / 16, (M + 15) / 16), 256>>>(M, N, K, alpha, A, B, beta, C);
    }
""")
ACC_CUH = textwrap.dedent("""
    #pragma once
    __device__ inline float dot(const float *a, const float *b, int k, int ldb) {
        float s = 0.f;
        #pragma unroll 4
        for (int i = 0; i < k; ++i) s += a[i] * b[i * ldb];
        return s;
    }
""")
DECLARATION = textwrap.dedent("""
    from pytest_gemm import CudaKernel
    k = CudaKernel(source="{source}", entry="sgemm<16, 16>", block=(256,), tile=(16, 16),
                   signature="M,N,K,alpha,A,B,beta,C", beta_zero="reads_c", arches=("sm_80",))
""")


@pytest.mark.parametrize("header, needle", [
    ("stdio.h", "device code needs none for printf, assert or the math functions"),
    ("cublas_v2.h", "<cublas_v2.h> is a host library's header"),
    ("helper_cuda.h", "<helper_cuda.h> is a host library's header"),
    ("stdint.h", "include <cuda/std/cstdint> instead"),
    ("vector", "<vector> is a C/C++ library header"),
    ("helper.h", "'helper.h' was not found: a kernel's includes resolve in its source's own folder"),
])
def test_a_header_nvrtc_cannot_open_says_what_to_do(header, needle):
    from pytest_gemm.kernels.compile_hints import include_hint

    hint = include_hint(f'mm.cu(1): catastrophic error: cannot open source file "{header}"\n  #include <{header}>')
    assert needle in hint
    assert "__CUDACC_RTC__" in hint or "cuda/std" in hint
    assert include_hint('mm.cu(3): error: expected a ";"') is None


def test_a_host_typedef_nvrtc_lacks_says_which_typedef_to_add():
    """siboehm/SGEMM_CUDA's kernels use ``uint`` (glibc's <sys/types.h>), which NVRTC does not declare."""
    from pytest_gemm.kernels.compile_hints import include_hint

    log = ('1_naive.cuh(9): error: identifier "uint" is undefined\n'
           '1_naive.cuh(10): error: identifier "uint" is undefined\n2 errors detected')
    hint = include_hint(log)
    assert "typedef unsigned int uint;" in hint and "__CUDACC_RTC__" in hint and hint.startswith("uint is a type")
    assert include_hint('mm.cu(3): error: identifier "tile_k" is undefined') is None  # the kernel's own typo


@pytest.fixture
def nvrtc() -> None:
    pytest.importorskip("cuda.bindings")
    from pytest_gemm.kernels.compiler import toolchain_problem

    problem = toolchain_problem()
    if problem:
        pytest.skip(problem)


def _compile_only(pytester: pytest.Pytester, source: str) -> tuple[pytest.RunResult, str]:
    (pytester.path / "kernel").mkdir()
    (pytester.path / "kernel" / "acc.cuh").write_text(ACC_CUH)
    (pytester.path / "sgemm.cu").write_text(source)
    pytester.makepyfile(mine=DECLARATION.format(source="sgemm.cu"))
    result = pytester.runpytest_subprocess("--gemm-kernel", "mine:k", "--gemm-arch", "sm_80", "-p", "no:cacheprovider")
    return result, result.stdout.str() + result.stderr.str()


def test_an_nvcc_style_file_hears_which_header_and_what_to_do(pytester: pytest.Pytester, nvrtc):
    result, text = _compile_only(pytester, NVCC_STYLE_CU)
    assert result.ret != 0, text
    assert "sgemm.cu(2)" in text and "cannot open source file \"stdio.h\"" in text, text
    assert "#ifndef __CUDACC_RTC__ ... #endif" in text and "fix the error at the file(line)" not in text, text


def test_the_same_file_with_its_host_lines_guarded_compiles(pytester: pytest.Pytester, nvrtc):
    """What the hint says works: templates, __launch_bounds__, #pragma unroll, the file's own header
    in a subfolder, a host launcher behind the guard."""
    guarded = NVCC_STYLE_CU.replace("#include <stdio.h>", "#ifndef __CUDACC_RTC__\n#include <stdio.h>")
    guarded = guarded.replace('#include "kernel/acc.cuh"', '#endif\n#include "kernel/acc.cuh"')
    guarded = guarded.replace("void run_sgemm", "#ifndef __CUDACC_RTC__\nvoid run_sgemm") + "#endif\n"
    result, text = _compile_only(pytester, guarded)
    assert result.ret == 0, text
    result.assert_outcomes(passed=1)


@pytest.mark.parametrize("source, entry, signature", [
    (NO_M_CU, "MatrixMul<32>", "C,A,B,K,N"),        # no M: 'missing M'
    (LDA_CU, "sgemm<16>", "M,N,K,A,B,C"),           # leading dimensions: 'has 6 tokens'
    (HALF_C_CU, "hgemm", "A,B,C,M,N,K"),            # half C, size_t sizes
])
def test_a_kernel_whose_parameters_are_not_the_contract_s_hears_how_to_test_it_unchanged(source, entry, signature):
    """Not only 'declare it float*' (an edit of someone else's kernel): the launcher way too."""
    precision = "fp16" if "half" in source else "fp32"
    with pytest.raises(GemmSpecError) as info:
        CudaKernel(source=source, entry=entry, block=(32,), tile=(16, 16), signature=signature,
                   precision=precision).validate()
    assert str(info.value).endswith("(@kernel with builds=: docs/kernels.md, 'Kernels from another repository')")
