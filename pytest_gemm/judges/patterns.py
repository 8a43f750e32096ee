"""What a wrong output is, when it is one whole-result mistake: transposed, shifted, a K loop
that misses terms, A@B of inputs rounded to a lower precision, a constant factor. Pure numpy
(judges/diagnose.py uses it)."""
from __future__ import annotations

from typing import Any

import numpy as np

from .sentinels import fmt_value

INPUT_CHECK_LIMIT = 2 ** 31  # M*N*K above which re-multiplying A and B on the host takes too long


def _matches(got: np.ndarray, cand: np.ndarray, written: np.ndarray) -> bool:
    """``got`` equals the float32 rounding of ``cand`` wherever the kernel wrote."""
    c32 = cand.astype(np.float32)
    same = (got.view(np.uint32) == c32.view(np.uint32)) | (got == c32)
    return bool(same[written].all())


def value_pattern(got: np.ndarray, want: np.ndarray, bad: np.ndarray, written: np.ndarray,
                   a64: np.ndarray | None, b64: np.ndarray | None) -> tuple[str, list[str]] | None:
    """Recognise a whole-result mistake: transposed, shifted, K loop, transposed input, scaled, all zero."""
    m, n = got.shape
    if not written[bad].any():
        return None
    checks: list[tuple[Any, str, str]] = []
    if m == n:
        checks.append((lambda: want.T, "the result is transposed: C[i][j] holds the value for (j, i)",
                       "row and column are swapped in the store (or the thread mapping): write C[row*N + col]"))
    elif m > 1 and n > 1:
        checks.append((lambda: want.T.reshape(m, n),
                       "C is written column-major: the value for (i, j) is at flat index j*M + i",
                       "C is row-major: write C[row*N + col], not C[col*M + row]"))
    if n > 1:
        checks.append((lambda: np.concatenate([got[:, :1], want[:, :-1]], axis=1),
                       "the result is shifted one column to the right: C[i][j] holds the value for (i, j-1)",
                       "an off-by-one in the column index of the store or of B"))
        checks.append((lambda: np.concatenate([want[:, 1:], got[:, -1:]], axis=1),
                       "the result is shifted one column to the left: C[i][j] holds the value for (i, j+1)",
                       "an off-by-one in the column index of the store or of B"))
    if m > 1:
        checks.append((lambda: np.concatenate([got[:1], want[:-1]], axis=0),
                       "the result is shifted one row down: C[i][j] holds the value for (i-1, j)",
                       "an off-by-one in the row index of the store or of A"))
        checks.append((lambda: np.concatenate([want[1:], got[-1:]], axis=0),
                       "the result is shifted one row up: C[i][j] holds the value for (i+1, j)",
                       "an off-by-one in the row index of the store or of A"))
    if a64 is not None and b64 is not None and m * n * a64.shape[1] <= INPUT_CHECK_LIMIT:
        checks.extend(_k_loop_checks(a64, b64))
    for make, summary, hint in checks:
        cand = make()
        if cand is not None and not _matches(want, cand, written) and _matches(got, cand, written):
            return summary, [hint]
    return _scaled(got, want, written)


def _k_loop_checks(a64: np.ndarray, b64: np.ndarray) -> list[tuple[Any, str, str]]:
    k = a64.shape[1]
    checks: list[tuple[Any, str, str]] = []
    if a64.shape[0] == k:
        checks.append((lambda: a64.T @ b64, "the kernel computes A^T @ B: A is read transposed",
                       "A is M x K row-major: element (row, k) is A[row*K + k]"))
    if b64.shape[1] == k:
        checks.append((lambda: a64 @ b64.T, "the kernel computes A @ B^T: B is read transposed",
                       "B is K x N row-major: element (k, col) is B[k*N + col]"))
    if k >= 2:
        checks.append((lambda: a64[:, :-1] @ b64[:-1], "the K loop stops one step early (K-1 terms summed)",
                       f"loop over all K={k} terms: for (k = 0; k < K; ++k)"))
        checks.append((lambda: a64[:, 1:] @ b64[1:], "the K loop skips the first term (it starts at k = 1)",
                       "start the K loop at k = 0"))
        depths: dict[int, list[int]] = {}
        for depth in (2, 4, 8, 16, 32, 64, 128):
            kept = k - k % depth
            if 0 < kept < k - 1:
                depths.setdefault(kept, []).append(depth)
        for kept, ds in depths.items():
            deep = ds[0] if len(ds) == 1 else ", ".join(map(str, ds[:-1])) + f" or {ds[-1]}"
            checks.append((lambda kept=kept: a64[:, :kept] @ b64[:kept],
                           f"the K loop sums only the first {kept} of K={k} terms: the last {k - kept} are dropped",
                           f"K={k} is not a multiple of the K tile ({deep} deep): a K loop over whole tiles "
                           "misses the partial last tile; loop ceil(K/tile) times and load 0 past K"))
    return checks


def _round_mantissa(x: np.ndarray, bits: int) -> np.ndarray:
    """float32 values rounded to ``bits`` explicit mantissa bits (nearest, ties to even), as float64."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    drop = 23 - bits
    half = np.uint64(1 << (drop - 1))
    odd = (u >> np.uint64(drop)) & np.uint64(1)
    u = (u + half - np.uint64(1) + odd) & ~np.uint64((1 << drop) - 1)
    return u.astype(np.uint32).view(np.float32).astype(np.float64)


def _round_mantissa_away(x: np.ndarray, bits: int) -> np.ndarray:
    """float32 values rounded to ``bits`` explicit mantissa bits, nearest with ties away from zero
    (``cvt.rna.tf32.f32``), as float64: half an ulp added to the magnitude, then truncated."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    drop = 23 - bits
    u = (u + np.uint64(1 << (drop - 1))) & ~np.uint64((1 << drop) - 1)
    return u.astype(np.uint32).view(np.float32).astype(np.float64)


def _truncate_mantissa(x: np.ndarray, bits: int) -> np.ndarray:
    """float32 values with all but ``bits`` explicit mantissa bits dropped (towards zero), as float64."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    return (u & np.uint32(0xFFFFFFFF ^ ((1 << (23 - bits)) - 1))).view(np.float32).astype(np.float64)


# Three roundings of each lower precision. To nearest, ties to even: a conversion (__float2half_rn,
# __float2bfloat16_rn, wmma::__float_to_tf32). To nearest, ties away from zero: cvt.rna.tf32.f32
# (CUTLASS's default float -> tfloat32_t) and its bf16 twin, adding half an ulp to the bits.
# Truncated: float32 fed to tensor cores as TF32 (Triton's default tl.dot on fp32, a TF32 wmma/mma
# fed raw floats) keeps the top 10 mantissa bits and drops the rest. The roundings differ only on
# ties (and truncation on every inexact value), so the first that explains the output names it.
_LOWER = (("fp16 or TF32 (10-bit mantissa)", lambda x: _round_mantissa(x, 10)),
          ("TF32 rounded half away from zero (cvt.rna.tf32.f32)", lambda x: _round_mantissa_away(x, 10)),
          ("TF32 by truncation (the low 13 mantissa bits dropped, as tensor cores do when fed float32)",
           lambda x: _truncate_mantissa(x, 10)),
          ("bf16 (7-bit mantissa)", lambda x: _round_mantissa(x, 7)),
          ("bf16 rounded half away from zero", lambda x: _round_mantissa_away(x, 7)),
          ("bf16 by truncation (the low 16 bits dropped)", lambda x: _truncate_mantissa(x, 7)))


def rounded_inputs(got: np.ndarray, want: np.ndarray, written: np.ndarray,
                    a64: np.ndarray | None, b64: np.ndarray | None) -> tuple[str, list[str]] | None:
    """The output is exactly A@B computed from inputs rounded to a lower precision: the kernel
    multiplies in that precision, whatever it declares (a logic error does not do this)."""
    if a64 is None or b64 is None or not written.all() or got.size * a64.shape[1] > INPUT_CHECK_LIMIT:
        return None
    for name, rounding in _LOWER:
        with np.errstate(over="ignore", invalid="ignore"):
            cand = rounding(a64) @ rounding(b64)
        if np.isfinite(cand).all() and not _matches(want, cand, written) and _matches(got, cand, written):
            return (f"the result is exactly A@B with the inputs rounded to {name}: the kernel multiplies in a "
                    "lower precision than it declares",
                    ["keep the inputs in the declared precision (no __half / tf32 conversion, no tensor-core "
                     "path for an fp32 kernel), or declare the precision it computes in"])
    return None


# 3xTF32, the fp32 emulation of CUTLASS's fast fp32 tensor-core GEMMs (arch::OpMultiplyAddFastF32):
# each float32 x is split into big = tf32(x) and small = tf32(x - big), and A@B is summed, in the fp32
# accumulator, as small(A)@big(B) + big(A)@small(B) + big(A)@big(B); small x small is dropped.
# CUTLASS (include/cutlass/gemm/warp/mma_tensor_op_fast_f32.h, MmaTensorOpFastF32::MmaFastF32 and
# include/cutlass/numeric_conversion.h, NumericConverterFastF32) rounds big toward zero (the bits
# & 0xffffe000) and small with round_half_ulp_truncate (half an ulp added, then truncated); a
# hand-written split rounds big to nearest (cvt.rna.tf32.f32, or ties to even), so all three are
# modelled. On exact inputs (integers up to 2**12, at most 12 significant bits) big and small are
# exact and every product and partial sum is an integer below 2**24, so any accumulation order
# gives these bits; only small(A)*small(B) is missing, nonzero where both inputs need a 12th bit.
SPLITS = {"toward zero": lambda x: _truncate_mantissa(x, 10),  # CUTLASS's
          "nearest, ties away": lambda x: _round_mantissa_away(x, 10),  # cvt.rna.tf32.f32
          "nearest, ties to even": lambda x: _round_mantissa(x, 10)}
# What the exact check can tell apart: on integer inputs every inexact value is a tie (one bit
# dropped), and toward zero and ties away give small parts of opposite signs, so the same products.
_JUDGED_SPLITS = (("big rounded toward zero (as CUTLASS does) or to nearest with ties away from zero "
                   "(cvt.rna.tf32.f32), which drop the same products on these inputs", "toward zero"),
                  ("big rounded to nearest, ties to even", "nearest, ties to even"))


def split_tf32(x: np.ndarray, big: str = "toward zero") -> tuple[np.ndarray, np.ndarray]:
    """(big, small) of float32 values as float64: big = tf32(x) rounded as ``big`` says (a key of
    ``SPLITS``; CUTLASS's is toward zero), small = tf32(x - big) rounded half away from zero, as
    CUTLASS's ``NumericConverterFastF32`` does (x - big is exact in float32)."""
    big = SPLITS[big](x)
    rest = (np.asarray(x, dtype=np.float32).astype(np.float64) - big).astype(np.float32)
    return big, _round_mantissa_away(rest, 10)


def three_tf32(a: np.ndarray, b: np.ndarray, big: str = "toward zero") -> np.ndarray:
    """A@B as 3xTF32 computes it: small(A)@big(B) + big(A)@small(B) + big(A)@big(B), in float64
    (exact wherever the three products and their sums are, as on the exact inputs)."""
    a_big, a_small = split_tf32(a, big)
    b_big, b_small = split_tf32(b, big)
    return a_small @ b_big + a_big @ b_small + a_big @ b_big


THREE_TF32 = ("the result is exactly A@B computed as 3xTF32 (each input split into two TF32 parts, big and small, "
              "and the small x small product dropped, as CUTLASS's fast fp32 tensor-core GEMMs do): products accurate to "
              "about fp32's rounding, but not IEEE fp32 products, which exact integer inputs need")


def three_tf32_output(got: np.ndarray, want: np.ndarray, written: np.ndarray,
                      a64: np.ndarray | None, b64: np.ndarray | None) -> tuple[str, list[str]] | None:
    """The output is exactly the 3xTF32 result (``three_tf32``, with any of the splits of big): the
    kernel multiplies by a documented fp32 emulation, not by fp32 FMA (a logic error does not do this)."""
    if a64 is None or b64 is None or not written.all() or got.size * a64.shape[1] > INPUT_CHECK_LIMIT:
        return None
    for name, big in _JUDGED_SPLITS:
        with np.errstate(over="ignore", invalid="ignore"):
            cand = three_tf32(a64, b64, big)
        if np.isfinite(cand).all() and not _matches(want, cand, written) and _matches(got, cand, written):
            return THREE_TF32, [f"the split: {name}; small = x - big, to TF32",
                                "for precision=\"fp32\", multiply with fp32 FMA (in CUTLASS: OpMultiplyAdd, not "
                                "OpMultiplyAddFastF32); or declare precision=\"tf32\", whose checks allow TF32-rounded "
                                "inputs (3xTF32 passes them with room to spare) and which is timed against cuBLAS TF32"]
    return None


def _scaled(got: np.ndarray, want: np.ndarray, written: np.ndarray) -> tuple[str, list[str]] | None:
    g = got[written].astype(np.float64)
    w = want[written].astype(np.float64)
    if not np.isfinite(g).all() or not (w != 0).any():
        return None
    if not g.any():
        return ("every element is 0: the K loop never runs, or the accumulated sum is never stored",
                ["check the K loop bound and that the final store writes the accumulator"])
    nz = w != 0
    s = float(np.median(g[nz] / w[nz]))
    # a clean factor only: tiny rounding differences are not "scaled by 1.0000001"
    if abs(s - 1.0) < 1e-3 or not np.allclose(g, s * w, rtol=1e-6, atol=0):
        return None
    if s == -1.0:
        return "every element has the wrong sign (-1 x the exact value)", ["check the sign of alpha or of a product"]
    return (f"every element is {fmt_value(s)} x the exact value",
            ["a constant factor: is alpha applied twice or not at all, or the result added to C more than once?"])


def nan_note(got: np.ndarray, written: np.ndarray, want: np.ndarray) -> str | None:
    computed_nan = written & np.isnan(got) & ~np.isnan(want)
    n_nan = int(computed_nan.sum())
    if not n_nan:
        return None
    return (f"{n_nan} written elements are NaN: the kernel read uninitialised shared memory or read past the end "
            "of A or B (or read C when it held NaN)")

