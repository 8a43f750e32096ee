"""Numpy models of correct GEMM kernels someone else might write, for the judges' tests.

Each model takes the float32 (or half, as float32) values a kernel receives and returns the
float32 C it would write. Pure numpy; tests/test_correct_models.py pushes their outputs through
the judges the checks use (judges/bounds.py, judges/diagnose.py, judges/zero_scalars.py,
outputs/verdicts.py) and pins that they pass, with the margin measured.

fp32 orders round to nearest after every operation (float32 numpy arithmetic; an FMA is the
float64 product and sum rounded once). Tensor-core accumulation (``tensor_core_truncating``)
follows Fasi, Higham, Mikaitis and Pranesh, "Numerical behavior of NVIDIA tensor cores" (2021):
each step adds ``group`` exact products to the accumulator; every term is aligned to the largest
exponent among them, keeping 24 + ``extra`` bits, the bits shifted out dropped (toward zero, or
toward -inf as a two's complement adder would), and the sum is normalised to float32 toward zero.
"""
from __future__ import annotations

import numpy as np

F32, F64 = np.float32, np.float64


# -- fp32 summation orders (round to nearest) ------------------------------------------------

def sequential(a: np.ndarray, b: np.ndarray, ks: range | None = None) -> np.ndarray:
    """c += a*b with the product and the sum rounded separately (FMUL then FADD)."""
    c = np.zeros((a.shape[0], b.shape[1]), F32)
    for k in range(a.shape[1]) if ks is None else ks:
        c = c + a[:, k:k + 1].astype(F32) * b[k:k + 1, :].astype(F32)
    return c


def fma(a: np.ndarray, b: np.ndarray, ks: range | None = None) -> np.ndarray:
    """c = fma(a, b, c): the float64 product is exact, the sum rounded once to float32."""
    a64, b64 = a.astype(F64), b.astype(F64)
    c = np.zeros((a.shape[0], b.shape[1]), F32)
    for k in range(a.shape[1]) if ks is None else ks:
        c = (c.astype(F64) + a64[:, k:k + 1] * b64[k:k + 1, :]).astype(F32)
    return c


def reverse_fma(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return fma(a, b, range(a.shape[1] - 1, -1, -1))


def split_k(a: np.ndarray, b: np.ndarray, chunks: int, combine: str = "in order") -> np.ndarray:
    """Split-K: contiguous chunks summed by FMA, the partials combined ``in order``, ``reversed``
    (as the last block to finish might), or as a ``tree``."""
    edges = np.linspace(0, a.shape[1], chunks + 1).astype(int)
    parts = [fma(a[:, lo:hi], b[lo:hi]) for lo, hi in zip(edges[:-1], edges[1:]) if hi > lo]
    if combine == "reversed":
        parts = parts[::-1]
    if combine == "tree":
        while len(parts) > 1:
            parts = [(parts[i] + parts[i + 1]).astype(F32) if i + 1 < len(parts) else parts[i]
                     for i in range(0, len(parts), 2)]
        return parts[0]
    c = parts[0]
    for p in parts[1:]:
        c = (c + p).astype(F32)
    return c


def kahan(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Compensated (Kahan) summation of float32 products: more accurate than any plain order."""
    c = np.zeros((a.shape[0], b.shape[1]), F32)
    comp = np.zeros_like(c)
    for k in range(a.shape[1]):
        y = (a[:, k:k + 1].astype(F32) * b[k:k + 1, :].astype(F32)) - comp
        t = c + y
        comp = (t - c) - y
        c = t
    return c


def pairwise(a: np.ndarray, b: np.ndarray, leaf: int = 8) -> np.ndarray:
    k = a.shape[1]
    if k <= leaf:
        return fma(a, b)
    h = k // 2
    return (pairwise(a[:, :h], b[:h], leaf) + pairwise(a[:, h:], b[h:], leaf)).astype(F32)


def fp64_accumulate(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Products and sums in float64, rounded once to float32: more accurate than fp32."""
    return (a.astype(F64) @ b.astype(F64)).astype(F32)


# -- tensor-core accumulation (truncating) ----------------------------------------------------

def _rz32(x: np.ndarray) -> np.ndarray:
    """float64 -> float32 toward zero."""
    y = x.astype(F32)
    over = np.abs(y.astype(F64)) > np.abs(x)
    y[over] = np.nextafter(y[over], F32(0))
    return y


def tc_step(acc: np.ndarray, products: np.ndarray, extra: int = 0, toward: str = "zero") -> np.ndarray:
    """One tensor-core step: ``acc`` (float32, M x N) plus ``products`` (G x M x N, exact in
    float64), every term aligned to the largest exponent keeping 24 + ``extra`` bits, the rest
    dropped toward zero (sign-magnitude) or toward -inf (two's complement), the sum normalised
    to float32 toward zero."""
    terms = np.concatenate([acc.astype(F64)[None], products], axis=0)
    top = np.abs(terms).max(axis=0)
    _, e = np.frexp(top)                       # top in [2**(e-1), 2**e)
    q = np.ldexp(1.0, e - 24 - extra)          # the weight of the last kept bit
    q = np.where(top > 0, q, 1.0)
    cut = np.trunc if toward == "zero" else np.floor
    return _rz32((cut(terms / q) * q).sum(axis=0))


def tensor_core_truncating(a: np.ndarray, b: np.ndarray, group: int = 8, extra: int = 0,
                           toward: str = "zero") -> np.ndarray:
    """Half (or TF32) inputs, exact products, ``group`` of them per step into a float32
    accumulator that aligns and normalises by truncation."""
    a64, b64 = a.astype(F64), b.astype(F64)
    acc = np.zeros((a.shape[0], b.shape[1]), F32)
    for lo in range(0, a.shape[1], group):
        prods = a64.T[lo:lo + group, :, None] * b64[lo:lo + group, None, :]
        acc = tc_step(acc, prods, extra, toward)
    return acc


def three_tf32_truncating(a: np.ndarray, b: np.ndarray, group: int = 8, small_first: bool = True,
                          big: str = "toward zero") -> np.ndarray:
    """3xTF32 (CUTLASS's OpMultiplyAddFastF32) on a truncating tensor-core accumulator: per
    K-block, small(A)big(B), big(A)small(B), big(A)big(B) as three steps into the same
    accumulator (CUTLASS adds the small products first), small x small dropped."""
    from pytest_gemm.judges.patterns import split_tf32

    a_big, a_small = split_tf32(a.astype(F32), big)
    b_big, b_small = split_tf32(b.astype(F32), big)
    pairs = [(a_small, b_big), (a_big, b_small), (a_big, b_big)]
    if not small_first:
        pairs = pairs[::-1]
    acc = np.zeros((a.shape[0], b.shape[1]), F32)
    for lo in range(0, a.shape[1], group):
        for x, y in pairs:
            acc = tc_step(acc, x.T[lo:lo + group, :, None] * y[lo:lo + group, None, :])
    return acc


def round_tf32(x: np.ndarray, how: str = "nearest") -> np.ndarray:
    """float32 values rounded to TF32: ``nearest`` (ties to even) or ``truncate`` (tensor cores
    fed float32), as float32."""
    u = np.ascontiguousarray(x, F32).view(np.uint32)
    if how == "truncate":
        return (u & np.uint32(0xFFFFE000)).view(F32)
    u64 = u.astype(np.uint64)
    u64 = (u64 + np.uint64(0xFFF) + ((u64 >> np.uint64(13)) & np.uint64(1))) & ~np.uint64(0x1FFF)
    return u64.astype(np.uint32).view(F32)
