"""Declarations checked against the C prototype of their entry (``model/prototype.py``), and
unknown keyword arguments named with the nearest valid one. Pure text: no NVRTC, no GPU."""
from __future__ import annotations

import textwrap

import pytest

from pytest_gemm import CudaKernel, kernel
from pytest_gemm.model.declaration import GemmSpecError
from pytest_gemm.model.prototype import find, problems

SOURCE = textwrap.dedent("""
    // a comment naming __global__ void mm_naive(int x) must not count
    template <int BM, int BN = 16>
    __global__ void __launch_bounds__(256) mm_t(const float* __restrict__ A, const float* B, float* C,
                                                int M, int N, int K) {}
    extern "C" __global__ void mm_naive(const float* A, const float* B, float *C, int M, int N, int K) {}
    extern "C" __global__ void mm_ab(const float* A, const float* B, float* C, int M, int N, int K,
                                     float alpha, float beta) {}
    extern "C" __global__ void mm_half(const __half* A, const __half* B, float* C, int M, int N, int K) {}
    extern "C" __global__ void mm_bits(const unsigned short* A, const unsigned short* B, float* C, int M, int N, int K) {}
    extern "C" __global__ void mm_sizet(const float* A, const float* B, float* C, size_t M, int N, int K) {}
    template <typename T> __global__ void mm_any(const T* A, const T* B, float* C, int M, int N, int K) {}
    #define ELEM float
    extern "C" __global__ void mm_macro(const ELEM* A, const ELEM* B, float* C, int M, int N, int K) {}
    extern "C" __global__ void mm_built(const float* A, const float* B,
    #if WITH_D
                                        float* D,
    #endif
                                        float* C, int M, int N, int K) {}
    extern "C" __global__ void mm_square(const float* A, const float* B, float* C, int N) {}
""")
T6 = ("A", "B", "C", "M", "N", "K")
T8 = T6 + ("alpha", "beta")


def test_the_prototype_is_found_with_its_template_and_parameters():
    proto = find(SOURCE, "mm_t")
    assert proto is not None and proto.template == "int BM, int BN = 16" and len(proto.params) == 6
    naive = find(SOURCE, "mm_naive")
    assert naive is not None and naive.template is None and naive.params[2] == "float *C"
    assert find(SOURCE, "nope") is None


@pytest.mark.parametrize("entry, tokens, precision", [
    ("mm_naive", T6, "fp32"), ("mm_naive", T6, "tf32"), ("mm_ab", T8, "fp32"), ("mm_half", T6, "fp16"),
    ("mm_bits", T6, "bf16"), ("mm_bits", T6, "fp16"), ("mm_t<16>", T6, "fp32"), ("mm_t<16, 32>", T6, "fp32"),
    ("mm_any<__half>", T6, "fp16"), ("mm_macro", T6, "fp16"), ("not_there", T6, "fp32"),
    ("mm_built", T6, "fp32"),  # a parameter under #if: how many there are depends on the -D options
])
def test_declarations_that_match_their_prototype_or_that_the_source_does_not_spell_out_pass(entry, tokens, precision):
    assert problems(SOURCE, "mm.cu", entry, tokens, precision) == []


@pytest.mark.parametrize("entry, tokens, precision, needles", [
    ("mm_naive", T8, "fp32", ["has 8 tokens", "mm_naive in mm.cu takes 6 parameters"]),
    ("mm_ab", T6, "fp32", ["has 6 tokens", "takes 8 parameters"]),
    ("mm_square", T6, "fp32", ["has 6 tokens", "takes 4 parameters", "written for square matrices (one size N)",
                               "give it M, N and K"]),
    ("mm_naive", T6, "fp16", ["'const float* A' of mm_naive in mm.cu is A, a float pointer",
                              "precision='fp16' stores A as __half"]),
    ("mm_half", T6, "fp32", ["a __half pointer", "precision='fp32' stores A as float"]),
    ("mm_half", T6, "bf16", ["stores A as __nv_bfloat16"]),
    ("mm_sizet", T6, "fp32", ["'size_t M'", "passed as a 32-bit int"]),
    ("mm_naive<16>", T6, "fp32", ["instantiates a template, but mm_naive in mm.cu is not a template",
                                  "write entry='mm_naive'"]),
    ("mm_t<float>", T6, "fp32", ["template argument 'float' is a type", "'int BM' (a value)", "a number such as 16"]),
    ("mm_any<16>", T6, "fp32", ["template argument '16' is a value", "a type such as float"]),
    ("mm_t<1, 2, 3>", T6, "fp32", ["gives 3 template argument(s)", "template <int BM, int BN = 16>"]),
    ("mm_t", T6, "fp32", ["mm_t in mm.cu is a template <int BM, int BN = 16>", "mm_t<...>"]),
])
def test_a_declaration_that_contradicts_its_prototype_is_named(entry, tokens, precision, needles):
    text = "; ".join(problems(SOURCE, "mm.cu", entry, tokens, precision))
    for needle in needles:
        assert needle in text, text


def test_validate_reports_the_prototype_mismatch_as_a_spec_error(tmp_path):
    (tmp_path / "mm.cu").write_text(SOURCE)
    k = CudaKernel(source=str(tmp_path / "mm.cu"), entry="mm_naive", block=(16, 16), tile=(16, 16),
                   signature="A,B,C,M,N,K,alpha,beta")
    with pytest.raises(GemmSpecError, match="kernel 'mm_naive': signature 'A,B,C,M,N,K,alpha,beta' has 8 tokens"):
        k.validate()


@pytest.mark.parametrize("make, needle", [
    (lambda: CudaKernel(source="mm.cu", entry="mm", block=(16, 16), tiles=(16, 16)), "tiles=; did you mean tile=?"),
    (lambda: CudaKernel(source="mm.cu", entry="mm", block=(16, 16), tile=(16, 16), precison="fp16"),
     "precison=; did you mean precision=?"),
    (lambda: kernel(precison="fp16"), "@kernel: unknown keyword argument precison=; did you mean precision=?"),
    (lambda: kernel(bulds=()), "did you mean builds=?"),
    (lambda: kernel(zzz=1), "valid keywords: precision, min_cc"),
])
def test_an_unknown_keyword_names_the_nearest_valid_one(make, needle):
    with pytest.raises(GemmSpecError) as info:
        make()
    assert needle in str(info.value)


def test_a_kernel_still_resolves_its_source_relative_to_the_declaring_module():
    k = CudaKernel(source="mm.cu", entry="mm", block=(16, 16), tile=(16, 16))
    assert k.origin == __import__("pathlib").Path(__file__).resolve().parent


@pytest.mark.parametrize("declaration, needles", [
    ('CudaKernel(source="mm.cu", entry="mm_naive", block=(16, 16), tile=(16, 16), signature="A,B,C,M,N,K,alpha,beta")',
     ["has 8 tokens", "takes 6 parameters"]),
    ('CudaKernel(source="mm.cu", entry="mm_naive", block=(32, 8), tile=(16, 16), precision="fp16")',
     ["a float pointer", "stores A as __half"]),
    ('CudaKernel(source="mm.cu", entry="mm_naive", block=(16, 16), tiles=(16, 16))', ["did you mean tile=?"]),
])
def test_a_wrong_declaration_ends_the_run_with_one_message(pytester: pytest.Pytester, declaration, needles):
    pytester.makefile(".cu", mm=SOURCE)
    pytester.makepyfile(mine=f"from pytest_gemm import CudaKernel\nk = {declaration}\n")
    result = pytester.runpytest_subprocess("--gemm-kernel", "mine:k", "--gemm-arch", "sm_80", "-p", "no:cacheprovider")
    text = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.USAGE_ERROR, text
    assert "Traceback" not in text, text
    for needle in needles:
        assert needle in text, text
