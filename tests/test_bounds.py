"""Accuracy bound: correct float32 summation orders pass, lower-precision arithmetic fails.

Kernels are emulated in numpy. ``c = (c + a[:, k:k+1] * b[k:k+1, :])`` in
float32 rounds the product and the sum each step, like separate FMUL/FADD; an
FMA step is computed in float64 (the product is exact there) and rounded once.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from pytest_gemm.model import categories
from pytest_gemm.judges.bounds import (
    AccuracyReport, allowed_ratio, assert_accurate, check_accuracy, fp32_ratio, tensor_core_ratio, tolerance_report,
)
from pytest_gemm.model.categories import GemmCheckFailure
from pytest_gemm.judges.sentinels import poison
from pytest_gemm.judges.inputs import random_inputs
from pytest_gemm.model.precision import bf16_bits_to_float32, float32_to_bf16_bits, round_to_tf32
from pytest_gemm.judges.reference import abs_gauge, abs_product, reference

F32, F64 = np.float32, np.float64


# -- emulated kernels -----------------------------------------------------------------

def seq(a, b, ks=None):
    c = np.zeros((a.shape[0], b.shape[1]), F32)
    for k in range(a.shape[1]) if ks is None else ks:
        c = c + a[:, k:k + 1] * b[k:k + 1, :]
    return c


def seq_fma(a, b):
    a64, b64 = a.astype(F64), b.astype(F64)
    c = np.zeros((a.shape[0], b.shape[1]), F32)
    for k in range(a.shape[1]):
        c = (c.astype(F64) + a64[:, k:k + 1] * b64[k:k + 1, :]).astype(F32)
    return c


def reverse(a, b):
    return seq(a, b, range(a.shape[1] - 1, -1, -1))


def split_k(a, b, chunks):
    """Split-K: contiguous chunks summed separately, partial results added at the end."""
    edges = np.linspace(0, a.shape[1], chunks + 1).astype(int)
    c = np.zeros((a.shape[0], b.shape[1]), F32)
    for lo, hi in zip(edges[:-1], edges[1:]):
        c = (c + seq(a[:, lo:hi], b[lo:hi])).astype(F32)
    return c


def warp_tree(a, b, lanes=32):
    """Lane t sums k = t, t+32, ...; then a shuffle-down tree over the lanes."""
    parts = [seq(a[:, t::lanes], b[t::lanes]) for t in range(lanes)]
    while len(parts) > 1:
        half = len(parts) // 2
        parts = [(parts[i] + parts[i + half]).astype(F32) for i in range(half)]
    return parts[0]


def pairwise(a, b, leaf=8):
    k = a.shape[1]
    if k <= leaf:
        return seq(a, b)
    h = k // 2
    return (pairwise(a[:, :h], b[:h], leaf) + pairwise(a[:, h:], b[h:], leaf)).astype(F32)


def blas(a, b):
    return np.matmul(a, b)


def _rz32(x):
    y = x.astype(F32)
    over = np.abs(y.astype(F64)) > np.abs(x)
    y[over] = np.nextafter(y[over], F32(0))
    return y


def tensor_core(a, b, w=8):
    """Tensor-core accumulation: w exact products plus C summed, normalised toward zero."""
    a64, b64 = a.astype(F64), b.astype(F64)
    c = np.zeros((a.shape[0], b.shape[1]), F32)
    for lo in range(0, a.shape[1], w):
        c = _rz32(c + a64[:, lo:lo + w] @ b64[lo:lo + w])
    return c


def tf32_in_fp32_kernel(a, b):
    return np.matmul(round_to_tf32(a), round_to_tf32(b))  # TF32 products are exact in float32


def tf32_truncated(a, b):
    def trunc(x):
        return (np.ascontiguousarray(x, F32).view(np.uint32) & np.uint32(0xFFFFE000)).view(F32)
    return np.matmul(trunc(a), trunc(b))


def fp16_inputs(a, b):
    return np.matmul(a.astype(np.float16).astype(F32), b.astype(np.float16).astype(F32))


def bf16(x):
    return bf16_bits_to_float32(float32_to_bf16_bits(x))


def fp16_accumulate(a, b):
    a16, b16 = a.astype(np.float16), b.astype(np.float16)
    c = np.zeros((a.shape[0], b.shape[1]), np.float16)
    with np.errstate(over="ignore", invalid="ignore"):
        for k in range(a.shape[1]):
            c = c + a16[:, k:k + 1] * b16[k:k + 1, :]
    return c.astype(F32)


def bf16_accumulate(a, b):
    ab, bb = bf16(a), bf16(b)
    c = np.zeros((a.shape[0], b.shape[1]), F32)
    for k in range(a.shape[1]):
        c = bf16(bf16(ab[:, k:k + 1] * bb[k:k + 1, :]) + c)
    return c


CORRECT_ORDERS = {
    "sequential": seq, "fma": seq_fma, "reverse": reverse, "split2": lambda a, b: split_k(a, b, 2),
    "split7": lambda a, b: split_k(a, b, 7), "split16": lambda a, b: split_k(a, b, 16),
    "warp_tree": warp_tree, "pairwise": pairwise, "blas": blas,
}


def gauge(problem, kernel):
    a32 = problem.a64.astype(F32)
    b32 = problem.b64.astype(F32)
    got = kernel(a32, b32)
    return check_accuracy(got, reference(problem.a64, problem.b64), abs_product(problem.a64, problem.b64),
                          problem.k, problem.precision)


# -- correct kernels pass ----------------------------------------------------------------

@pytest.mark.parametrize("k", [1, 16, 257, 2048])
@pytest.mark.parametrize("distribution", ["uniform", "heavy"])
@pytest.mark.parametrize("order", list(CORRECT_ORDERS))
def test_correct_fp32_orders_pass(order, distribution, k):
    p = random_inputs(32, 32, k, "fp32", distribution, seed=11)
    report = gauge(p, CORRECT_ORDERS[order])
    assert report.passed, report.message
    assert report.max_ratio < report.allowed / 3  # with margin
    assert "allowed" in report.message


@pytest.mark.parametrize("precision", ["fp16", "bf16", "tf32"])
@pytest.mark.parametrize("distribution", ["uniform", "heavy"])
@pytest.mark.parametrize("k", [16, 1024])
def test_tensor_core_accumulation_passes_half_and_tf32(precision, distribution, k):
    p = random_inputs(32, 32, k, precision, distribution, seed=3)
    kernel = tensor_core
    if precision == "tf32":
        kernel = lambda a, b: tensor_core(round_to_tf32(a), round_to_tf32(b))  # noqa: E731
    assert gauge(p, kernel).passed
    assert gauge(p, seq).passed


@pytest.mark.parametrize("distribution", ["uniform", "heavy"])
@pytest.mark.parametrize("k", [1, 16, 4096])
def test_tf32_rounding_passes_tf32_bound(distribution, k):
    p = random_inputs(16, 16, k, "tf32", distribution, seed=1)
    assert gauge(p, tf32_in_fp32_kernel).passed
    assert gauge(p, tf32_truncated).passed


# -- lower precision fails ----------------------------------------------------------------

@pytest.mark.parametrize("k", [16, 256, 1024, 4096])
@pytest.mark.parametrize("distribution", ["uniform", "heavy"])
def test_tf32_inside_fp32_kernel_fails(distribution, k):
    p = random_inputs(32, 32, k, "fp32", distribution, seed=7)
    report = gauge(p, tf32_in_fp32_kernel)
    assert report.category == categories.PRECISION_TOO_LOW
    assert report.message.startswith("errors look like TF32 (10-bit mantissa) arithmetic in a kernel declared fp32")
    assert report.max_ratio > 1.4 * report.allowed


@pytest.mark.parametrize("k", [16, 1024, 4096])
def test_fp16_or_bf16_inputs_inside_fp32_kernel_fail(k):
    p = random_inputs(32, 32, k, "fp32", "uniform", seed=2)
    assert gauge(p, fp16_inputs).category == categories.PRECISION_TOO_LOW
    report = gauge(p, lambda a, b: np.matmul(bf16(a), bf16(b)))
    assert report.category == categories.PRECISION_TOO_LOW


@pytest.mark.parametrize("declared", ["fp32", "fp16"])
@pytest.mark.parametrize("k", [16, 256, 4096])
def test_fp16_accumulation_fails(declared, k):
    p = random_inputs(32, 32, k, declared, "uniform", seed=4)
    report = gauge(p, fp16_accumulate)
    assert report.category == categories.PRECISION_TOO_LOW
    assert "10-bit mantissa" in report.message
    if declared == "fp16":
        assert "declared fp16, which must multiply and accumulate in fp32" in report.message


@pytest.mark.parametrize("k", [16, 256])
def test_fp16_accumulation_heavy_fails(k):
    p = random_inputs(32, 32, k, "fp16", "heavy", seed=4)
    report = gauge(p, fp16_accumulate)
    assert not report.passed  # may overflow to inf (wrong_values) or just be imprecise


@pytest.mark.parametrize("declared", ["fp32", "bf16"])
@pytest.mark.parametrize("distribution", ["uniform", "heavy"])
@pytest.mark.parametrize("k", [16, 1024, 4096])
def test_bf16_accumulation_fails(declared, distribution, k):
    p = random_inputs(16, 16, k, declared, distribution, seed=5)
    report = gauge(p, bf16_accumulate)
    assert report.category == categories.PRECISION_TOO_LOW
    if declared == "bf16":
        assert "bf16 (7-bit mantissa) arithmetic in a kernel declared bf16" in report.message
        assert "__nv_bfloat16" in report.message


def test_bf16_accumulation_named_in_fp32_kernel():
    p = random_inputs(64, 64, 64, "fp32", "heavy", seed=5)
    report = gauge(p, bf16_accumulate)
    assert report.category == categories.PRECISION_TOO_LOW
    assert report.message.startswith("errors look like bf16 (7-bit mantissa) arithmetic in a kernel declared fp32")


# -- wrong values ----------------------------------------------------------------------

def test_garbage_is_wrong_values_not_precision():
    p = random_inputs(32, 32, 64, "fp32", seed=0)
    got = seq(p.a64.astype(F32), p.b64.astype(F32))
    got[:16, :16] = 3.0  # a tile computed from the wrong inputs
    report = check_accuracy(got, reference(p.a64, p.b64), abs_product(p.a64, p.b64), 64, "fp32")
    assert report.category == categories.WRONG_VALUES
    assert "far beyond any rounding" in report.message
    assert report.worst[0] < 16 and report.worst[1] < 16


def test_nan_and_poison():
    p = random_inputs(8, 8, 8, seed=0)
    ref, gauge64 = reference(p.a64, p.b64), abs_product(p.a64, p.b64)
    got = ref.astype(F32)
    got[2, 3] = np.nan
    report = check_accuracy(got, ref, gauge64, 8, "fp32")
    assert report.category == categories.WRONG_VALUES and report.worst == (2, 3)
    assert "1 elements are NaN or inf" in report.message and report.max_ratio == math.inf
    got[2, 3] = poison(1)[0]
    report = check_accuracy(got, ref, gauge64, 8, "fp32")
    assert report.category == categories.UNWRITTEN_OUTPUT and "never written" in report.message


def test_zero_gauge_elements():
    a = np.array([[0.0, 0.0], [1.0, 2.0]])
    b = np.array([[1.0, 2.0], [3.0, 4.0]])
    ref, g = reference(a, b), abs_product(a, b)
    assert check_accuracy(ref.astype(F32), ref, g, 2, "fp32").passed
    got = ref.astype(F32)
    got[0, 0] = 1e-30  # any error where |A||B| is zero is infinitely wrong
    assert check_accuracy(got, ref, g, 2, "fp32").category == categories.WRONG_VALUES


def test_alpha_beta_gauge():
    p = random_inputs(24, 24, 300, "fp32", "uniform", seed=1, with_c=True)
    a32, b32 = p.a64.astype(F32), p.b64.astype(F32)
    got = (F32(-1.5) * seq(a32, b32) + F32(0.25) * p.c0).astype(F32)
    ref = reference(p.a64, p.b64, alpha=-1.5, beta=0.25, c0=p.c0)
    report = check_accuracy(got, ref, abs_gauge(p.a64, p.b64, alpha=-1.5, beta=0.25, c0=p.c0), 300, "fp32")
    assert report.passed, report.message


def test_assert_accurate():
    p = random_inputs(32, 32, 512, "fp32", seed=0)
    ref, g = reference(p.a64, p.b64), abs_product(p.a64, p.b64)
    ok = assert_accurate(seq(p.a64.astype(F32), p.b64.astype(F32)), ref, g, 512, "fp32")
    assert isinstance(ok, AccuracyReport) and ok.passed
    with pytest.raises(GemmCheckFailure) as info:
        assert_accurate(tf32_in_fp32_kernel(p.a64.astype(F32), p.b64.astype(F32)), ref, g, 512, "fp32")
    assert info.value.category == "precision_too_low"
    text = str(info.value)
    assert text.startswith("[precision_too_low] errors look like TF32")
    assert "allowed 61.3 for fp32 at K=512" in text and "elements exceed the bound" in text


def test_shape_mismatch_is_an_error():
    with pytest.raises(ValueError, match="shapes differ"):
        check_accuracy(np.zeros((2, 2), F32), np.zeros((2, 3)), np.zeros((2, 3)), 4, "fp32")


# -- the formula ---------------------------------------------------------------------------

def test_allowed_ratio_formula():
    assert allowed_ratio(1, "fp32") == 18.0
    assert allowed_ratio(4096, "fp32") == fp32_ratio(4096) == 2 * 64 + 16
    assert allowed_ratio(4096, "fp16") == allowed_ratio(4096, "bf16") == tensor_core_ratio(4096) == 144 + 2048
    assert allowed_ratio(4096, "tf32") == 2192 + 2 ** 15 + 16
    ks = [1, 2, 16, 100, 4096, 10 ** 6]
    for name in ("fp32", "tf32", "fp16", "bf16"):
        values = [allowed_ratio(k, name) for k in ks]
        assert values == sorted(values)
    for k in ks:
        assert allowed_ratio(k, "fp32") <= allowed_ratio(k, "fp16") < allowed_ratio(k, "tf32")


@pytest.mark.parametrize("bad", [0, -1, 2.5, True])
def test_allowed_ratio_validates_k(bad):
    with pytest.raises(ValueError, match="K must be"):
        allowed_ratio(bad, "fp32")


def test_allowed_ratio_unknown_precision():
    with pytest.raises(ValueError, match="fp8.*fp32, tf32, fp16, bf16"):
        allowed_ratio(16, "fp8")


def test_tolerance_report_text():
    text = tolerance_report()
    assert "2*sqrt(K) + 16" in text and "TC(K)  = T32(K) + K/2" in text
    assert "Allowed max ratio" in text and "  4096" in text and "2192" in text
