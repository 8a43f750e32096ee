"""BLAS's zero-scalar rules (judges/zero_scalars.py) and the size of a wrong exact output's
errors (judges/bounds.rounding_sized), on numpy: no GPU."""
from __future__ import annotations

import numpy as np
import pytest

from pytest_gemm.judges.bounds import rounding_sized
from pytest_gemm.judges.inputs import exact_inputs
from pytest_gemm.judges.reference import abs_product
from pytest_gemm.judges.sentinels import POISON_BITS
from pytest_gemm.judges.zero_scalars import (C_POISONS, ab_read_mask, alpha_zero_expected, c_read_mask, nan_like,
                                             poisoned)

P = exact_inputs(17, 33, 65, seed=6, with_c=True)
AB = (P.a64 @ P.b64).astype(np.float32)


def _epilogue(c, read):
    """alpha=1, beta=0 epilogues as kernels write them, numpy's float32 standing in for the GPU's
    (whose arithmetic returns the canonical NaN 0x7FFFFFFF, not an operand's payload)."""
    out = _epilogue_numpy(c, read)
    return np.where(np.isnan(out), np.uint32(0x7FFFFFFF).view(np.float32), out).astype(np.float32)


def _epilogue_numpy(c, read):
    with np.errstate(invalid="ignore"):
        if read == "blas":
            return AB.copy()
        if read == "plain":
            return AB + np.float32(0) * c
        if read == "filters_nan":
            return AB + np.float32(0) * np.where(np.isnan(c), np.float32(0), c)
        if read == "filters_inf":
            return AB + np.float32(0) * np.where(np.isinf(c), np.float32(0), c)
        if read == "filters_nonfinite":
            return AB + np.float32(0) * np.where(np.isfinite(c), c, np.float32(0))
    raise ValueError(read)


def _caught_by(read):
    return [name for name, bits in C_POISONS if c_read_mask(_epilogue(poisoned(AB.shape, bits), read), bits).any()]


@pytest.mark.parametrize("read, caught", [
    ("blas", []),
    ("plain", ["NaN", "+Inf", "-Inf"]),
    ("filters_nan", ["+Inf", "-Inf"]),            # 0 * Inf = NaN: Inf shows a read that filters NaN only
    ("filters_inf", ["NaN"]),
    ("filters_nonfinite", []),                    # the BLAS result for every C: passes, as documented
])
def test_each_poison_shows_the_reads_the_others_miss(read, caught):
    assert _caught_by(read) == caught


def test_an_untouched_poison_is_unwritten_not_read():
    c = poisoned(AB.shape, POISON_BITS)
    assert not c_read_mask(c, POISON_BITS).any()
    inf = poisoned(AB.shape, 0x7F800000)
    assert not c_read_mask(inf, 0x7F800000).any()


def test_alpha_zero_with_nan_inputs():
    a, b = nan_like(P.a), nan_like(P.b)
    assert np.isnan(a).all() and np.isnan(b).all() and a.dtype == P.a.dtype and a.shape == P.a.shape
    with np.errstate(invalid="ignore"):
        reads = (np.float32(0) * (a.astype(np.float32) @ b.astype(np.float32)) + np.float32(0.5) * P.c0)
    assert ab_read_mask(reads, P.c0).all()
    right = alpha_zero_expected(P.c0)
    assert not ab_read_mask(right, P.c0).any() and np.array_equal(right, P.c0 / 2)  # exact in float32


def test_nan_bytes_are_nan_in_every_storage_precision():
    for precision in ("fp16", "bf16"):
        q = exact_inputs(4, 4, 4, precision=precision)
        bits = nan_like(q.a).view(np.uint16)
        assert (bits == 0xFFFF).all()  # NaN in fp16 (exponent all ones) and in bf16


def _half_sums(a64, b64, run, dtype):
    """A @ B with runs of ``run`` products summed in ``dtype`` (fp16 / a bf16 stand-in), runs added in float32."""
    k = a64.shape[1]
    out = np.zeros((a64.shape[0], b64.shape[1]), dtype=np.float32)
    for k0 in range(0, k, run):
        part = np.zeros_like(out, dtype=dtype)
        for kk in range(k0, min(k, k0 + run)):
            part = (part + (np.outer(a64[:, kk], b64[kk]).astype(dtype))).astype(dtype)
        out += part.astype(np.float32)
    return out


def _bf16(x):
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    return ((u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000).view(np.float32)


def test_half_precision_partial_sums_are_rounding_sized_and_logic_errors_are_not():
    q = exact_inputs(16, 16, 2048, seed=0)
    ref = q.a64 @ q.b64
    gauge = abs_product(q.a64, q.b64)
    with np.errstate(over="ignore"):
        fp16 = _half_sums(q.a64, q.b64, 16, np.float16)
    assert not np.array_equal(fp16, ref.astype(np.float32))
    assert rounding_sized(fp16, ref, gauge, 2048, "fp32")["rounding_sized"]
    # bf16 partial sums: rounding after every add
    k = q.a64.shape[1]
    bf = np.zeros((16, 16), dtype=np.float32)
    for k0 in range(0, k, 16):
        part = np.zeros((16, 16), dtype=np.float32)
        for kk in range(k0, k0 + 16):
            part = _bf16(part + _bf16(np.outer(q.a64[:, kk], q.b64[kk])))
        bf += part
    facts = rounding_sized(bf, ref, gauge, 2048, "fp32")
    assert facts["rounding_sized"] and facts["max_ratio"] > rounding_sized(fp16, ref, gauge, 2048, "fp32")["max_ratio"]
    # a logic error: one output off by a whole row of products; NaN read from past the end
    wrong = ref.astype(np.float32).copy()
    wrong[3] += np.abs(gauge[3]).astype(np.float32) / 2
    assert not rounding_sized(wrong, ref, gauge, 2048, "fp32")["rounding_sized"]
    nan = ref.astype(np.float32).copy()
    nan[0, 0] = np.nan
    assert not rounding_sized(nan, ref, gauge, 2048, "fp32")["rounding_sized"]
    # an fp16 overflow (Inf) beside rounding-sized errors is still precision
    inf = fp16.copy()
    inf[0, 0] = np.inf
    assert rounding_sized(inf, ref, gauge, 2048, "fp32")["rounding_sized"]
