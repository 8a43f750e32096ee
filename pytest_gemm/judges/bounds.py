"""Accuracy gauge for random inputs: how much rounding error a correct kernel may make.

The gauge (the one the reference BLAS tests use) is, per output element,

    r_ij = |c_ij - ref_ij| / (u * (|A| |B|)_ij),    u = 2**-24 (float32 accumulator)

where ``ref`` is the float64 product of the values the kernel was given. r is
"errors in units of one float32 rounding of the sum of |products|". A kernel
passes when max_ij r_ij <= T(K, precision):

    fp32:       T32(K) = 2*sqrt(K) + 16
                  any correct float32 summation order, rounding to nearest.
    fp16, bf16: TC(K)  = T32(K) + K/2
                  inputs are exact as stored and products of two halves are
                  exact in float32, so only accumulation errs; the K/2 term
                  admits tensor-core accumulation, which aligns and normalises
                  by truncation (round toward zero; Fasi, Higham, Mikaitis,
                  Pranesh 2021), so its errors are biased and grow like K, not
                  sqrt(K).
    tf32:       TC(K) + 2**15 + 16
                  plus rounding both inputs to TF32, nearest or truncated:
                  |product error| <= (2**-9 + 2**-20) |a b|, i.e. 2**15 + 16 in
                  units of u.

Why sqrt(K): rounding errors of a correct order are independent-ish, so they
add like a random walk; the worst elements are those where one large product
dominates the partial sums (heavy-tailed inputs), where r ~ c*sqrt(K). The
worst-case bound (gamma_K, r <= K) would be 28x looser at K=4096 and could not
catch TF32 there.

Measured (numpy simulations, max over all elements, worst over seeds and over
output sizes 16x16 .. 1024x1024; uniform U[-1,1] and Student-t(3) clipped to
+-1000, i.e. ``random_inputs`` data):

  correct fp32 orders: sequential (separate multiply and add rounding),
  sequential FMA, reverse K, split-K into 2/5/16 chunks summed at the end,
  32-lane strided sums with a shuffle tree, pairwise, numpy/OpenBLAS sgemm

      K      uniform   Student-t   T32(K)
      1      0.99      1.0         18       (one rounding: r < 1 always)
      16     4.6       6.2         24
      256    4.5       14.4        48
      1024   5.1       16.3        80
      4096   6.0       31.8        144      (Student-t worst at 1024x1024)
      (positive U[0,1] data, not used by the suite: sequential 53 at K=4096)

  lower precision in a kernel declared fp32: min over 20 seeds of the max
  ratio on a 16x16 output (more elements only raise it); inputs rounded to
  TF32 (or to fp16: identical on these data), float32 accumulation

      K      uniform   Student-t   T32(K)
      16     3603      5307        24
      256    924       1842        48
      1024   441       939         80
      4096   216       445         144
      (bf16 inputs: about 8x these figures)

  fp16 accumulation (fp16 products and sums): 1.1e4 .. 1.1e5 at every K from
  1 to 4096 (1e6 at K=1, where tiny products underflow fp16); bf16
  accumulation: 9.6e4 .. 5.5e5. Both fail T32 and TC by 10x or more.
  fp16 products summed in fp32 (fp16-declared kernel): uniform 4670 at K=16,
  689 at K=1024, 358 at K=4096; Student-t 6848, 3519, 2888. Against TC(K)
  (32, 592, 2192) the uniform data catch it up to K ~ 1000, the Student-t
  data up to 4096; the exact-input tests catch it at any K (their products
  exceed fp16's 11 bits).

  tensor-core accumulation model (8 exact products + accumulator per step,
  aligned with truncation, normalised toward zero), fp16/bf16 inputs, 512^2:
  up to 24 at K=1024 and 18 at K=4096 (exact alignment instead: 44 and 76;
  134 seen at 128^2, K=4096, Student-t); positive data 1450 at K=4096.
  TC(4096) = 2192.

Measured again at commit 2d86a65 on the checks' own inputs (checks/cases.py ACCURACY_SHAPES,
``random_inputs`` seed 5, the accuracy check's, and seeds 0..3; models in tests/correct_models.py,
pinned by tests/test_correct_models.py), max ratio over those seeds:

  fp32 orders        256^2x16      256^2x256     256^2x1024    129x131x4096
                     uni  t(3)     uni  t(3)     uni  t(3)     uni  t(3)
  sequential FMA     3.4  5.6      4.5  9.4      4.4  14.6     3.8  8.9
  reverse K, FMA     3.6  5.4      4.6  11.2     4.3  12.2     4.3  20.9
  split-K 4, reversed 2.1 3.4      1.6  4.6      1.6  7.1      1.2  7.0
  split-K 16, tree   2.0  3.0      0.8  2.2      0.6  2.9      0.5  4.2
  Kahan              1.3  2.1      0.3  1.1      0.2  0.7      0.1  0.5
  fp64, rounded once 0.9  0.9      0.3  0.6      0.1  0.5      0.1  0.3
  T32(K)             24            48            80            144

  tensor cores (seed 5; group of products per step / extra alignment bits / truncation):
  fp16 8/3/zero      2    4        6    14       9    35       15   64
  fp16 4/0/floor     6    13       38   149      71   320      126  559   (t(3) K=256: <= 163 over seeds 0..9)
  bf16 4/0/floor     2    5        5    93       12   253      32   491
  TC(K)              32            176           592           2192
  fp32, exact products (bf16x9-like), 8/3/zero:
                     2.7  3.2      6.1  14.3     10.4 35.5     16.0 63.3   (against T32)
  tf32 4/0/floor     14645 22810   4438 10457    2106 9796     1110 3752   (bound 32816 .. 34976)

  So the fp32 bound keeps >= 6.9x over every correct order and the half bound >= 1.1x over the
  worst truncation modelled (two's complement, toward -inf, no extra bits: not shown to be any
  GPU's; Fasi et al.'s toward zero with 3 extra bits keeps >= 7x).

  3xTF32 declared fp32 on a truncating accumulator (CUTLASS's order, small products first, 8 per
  step; seeds 5, 0, 1): t(3) 26, 20, 24 at K=16 (T32 24), 38..44 at 256, 46..55 at 1024, 44..92 at
  4096; uniform <= 28. With the big products first, 32 at K=16. So it fails the fp32 bound at one K,
  by at most 1.33x (``NEAR_BOUND`` = 2 in the verdict's rule 11b, outputs/verdicts.py), where plain
  TF32 inputs give 150x at K=16 and 1.5x at K=4096.

So T32 leaves a margin of >= 3.3x over every correct order measured and
fails TF32 rounding by >= 1.5x (uniform) / 3x (Student-t) at K=4096, more at
smaller K; the margin narrows at large K because TF32 errors average out
like 1/sqrt(K) while the allowance grows like sqrt(K). Outputs with very few
elements (a single row or column) can let TF32 through at large K by chance:
accuracy tests should use outputs of at least 16x16.

When the bound is exceeded, the error's size names the culprit, counted in
units of the lower precision's roundoff. For fp32 and tf32 kernels: up to
B10 = 16 * 2**13 = 131072 (16 x fp16's 2**-11; or the tf32 bound if larger)
it looks like TF32/fp16 arithmetic, up to B7 = 16 * 2**16 (16 x bf16's 2**-8)
like bf16. An fp16 or bf16 kernel's inputs already are half, so anything up
to B7 is named as its own half type's arithmetic. Beyond B7 (errors over 6%
of |A||B|) it is not rounding at all (``wrong_values``). TF32/fp16 input
rounding measures <= 3.1e4 and bf16 input rounding <= 1.25e5, so on small
outputs a bf16-accumulating fp32 kernel may be named TF32-like; it fails
either way. Magnitude alone is ambiguous at large K (one dropped term out of
4096 is a 2**-12 relative error), so the message says "looks like"; the
exact-input tests settle it.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy

from ..model.categories import PRECISION_TOO_LOW, UNWRITTEN_OUTPUT, WRONG_VALUES, GemmCheckFailure
from .sentinels import unwritten_mask
from ..model.precision import NEAR_BOUND, Precision, get_precision

UNIT_ROUNDOFF = 2.0 ** -24
TF32_INPUT_ROUNDING = 2.0 ** 15 + 16   # (2**-9 + 2**-20) / 2**-24: both inputs truncated to 10 bits


def _check_k(k: int) -> int:
    if isinstance(k, bool) or not isinstance(k, (int, numpy.integer)) or k < 1:
        raise ValueError(f"K must be an int >= 1, got {k!r}")
    return int(k)


def fp32_ratio(k: int) -> float:
    """T32(K): round-to-nearest float32 accumulation in any order."""
    return 2.0 * math.sqrt(_check_k(k)) + 16.0


def tensor_core_ratio(k: int) -> float:
    """TC(K): float32 accumulation that may truncate (tensor cores)."""
    return fp32_ratio(k) + _check_k(k) / 2.0


def allowed_ratio(k: int, precision: str | Precision) -> float:
    """Largest max-over-elements gauge ratio a correct kernel of this precision may show at this K."""
    p = get_precision(precision)
    if p.name == "fp32":
        return fp32_ratio(k)
    if p.name == "tf32":
        return tensor_core_ratio(k) + TF32_INPUT_ROUNDING
    return tensor_core_ratio(k)


def _band_10bit(k: int) -> float:
    """Errors up to 16 units of fp16's roundoff (2**-11), or TF32 input rounding."""
    return max(allowed_ratio(k, "tf32"), 16 * 2.0 ** 13)


def _band_7bit(k: int) -> float:
    """Errors up to 16 units of bf16's roundoff (2**-8)."""
    return max(allowed_ratio(k, "tf32"), 16 * 2.0 ** 16)


_TF32_IN_FP32 = ("errors look like TF32 (10-bit mantissa) arithmetic in a kernel declared fp32: are the inputs "
                 "rounded to TF32 (tensor cores, allow_tf32) or to fp16, or the accumulator a half?")
_TRUNCATING_FP32 = (" (errors this close to the bound, {x:.2g} x it, are also what a float32 accumulator that "
                    "truncates makes: tensor cores computing an fp32 emulation such as 3xTF32)")
_BF16_IN = ("errors look like bf16 (7-bit mantissa) arithmetic in a kernel declared {p}: are the inputs or "
            "the accumulator held in bfloat16?")
_FP16_IN_TF32 = ("errors exceed what TF32 input rounding allows and look like fp16 (10-bit mantissa) accumulation "
                 "in a kernel declared tf32, which must accumulate in fp32")
_FP16_IN_FP16 = ("errors look like fp16 (10-bit mantissa) arithmetic in a kernel declared fp16, which must "
                 "multiply and accumulate in fp32: is a product or the accumulator a __half?")
_BF16_IN_BF16 = ("errors look like bf16 (7-bit mantissa) arithmetic in a kernel declared bf16, which must "
                 "multiply and accumulate in fp32: is a product or the accumulator a __nv_bfloat16?")


def _suspects(k: int, precision: str) -> list[tuple[float, str]]:
    """(upper band, what it looks like), narrowest first, for errors above the declared bound.

    A half kernel's inputs are already half, so its extra error is its own
    arithmetic in that half type; fp32/tf32 kernels can be told apart from
    10-bit and 7-bit arithmetic by size alone.
    """
    if precision == "fp16":
        return [(_band_7bit(k), _FP16_IN_FP16)]
    if precision == "bf16":
        return [(_band_7bit(k), _BF16_IN_BF16)]
    first = _TF32_IN_FP32 if precision == "fp32" else _FP16_IN_TF32
    return [(_band_10bit(k), first), (_band_7bit(k), _BF16_IN.format(p=precision))]


@dataclass
class AccuracyReport:
    max_ratio: float                 # max over elements of |c - ref| / (u |A||B|); inf for NaN/inf outputs
    allowed: float                   # allowed_ratio(K, precision)
    worst: tuple[int, int]           # (row, col) of the max
    category: str | None             # None: passed
    message: str                     # one line, also when passing
    details: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return self.category is None


def _host_scalar(x: Any) -> float:
    return float(x.item() if hasattr(x, "item") else x)


def _fmt(v: float) -> str:
    return f"{v:.3g}" if math.isfinite(v) else str(v)


def check_accuracy(got: Any, ref64: Any, absprod64: Any, k: int, precision: str | Precision,
                   xp: Any = numpy) -> AccuracyReport:
    """Gauge ``got`` (float32 M x N) against the float64 reference and |A||B|.

    For alpha/beta results pass ``|alpha| |A||B| + |beta| |C0|`` as ``absprod64``
    (``reference.abs_gauge``).
    """
    p = get_precision(precision)
    k = _check_k(k)
    allowed = allowed_ratio(k, p)
    g32 = xp.ascontiguousarray(got, dtype=xp.float32)
    ref = xp.asarray(ref64, dtype=xp.float64)
    gauge = xp.asarray(absprod64, dtype=xp.float64)
    if tuple(g32.shape) != tuple(ref.shape) or tuple(ref.shape) != tuple(gauge.shape):
        raise ValueError(f"check_accuracy: shapes differ: got {tuple(g32.shape)}, ref {tuple(ref.shape)}, "
                         f"|A||B| {tuple(gauge.shape)}")
    n_cols = int(ref.shape[1]) if len(ref.shape) == 2 else 1
    g = g32.astype(xp.float64)
    err = xp.abs(g - ref)
    scale = UNIT_ROUNDOFF * gauge
    safe = xp.where(scale > 0, scale, 1.0)
    ratio = xp.where(scale > 0, err / safe, xp.where(err == 0, 0.0, xp.inf))
    ratio = xp.where(xp.isnan(ratio), xp.inf, ratio)  # NaN outputs count as infinitely wrong

    flat = int(_host_scalar(xp.argmax(ratio)))
    worst = (flat // n_cols, flat % n_cols)
    max_ratio = _host_scalar(ratio.ravel()[flat])
    where = f"at row {worst[0]}, col {worst[1]}"
    got_v, ref_v = _host_scalar(g.ravel()[flat]), _host_scalar(ref.ravel()[flat])
    bound = f"allowed {_fmt(allowed)} for {p.name} at K={k}"

    bad_values = ~xp.isfinite(g) & xp.isfinite(ref)
    n_bad = int(_host_scalar(bad_values.sum()))
    if n_bad:
        poisoned = int(_host_scalar(unwritten_mask(g32, xp=xp).sum()))
        if poisoned:
            return AccuracyReport(max_ratio, allowed, worst, UNWRITTEN_OUTPUT,
                                  f"{poisoned} elements were never written (they still hold the fill value), first {where}")
        return AccuracyReport(max_ratio, allowed, worst, WRONG_VALUES,
                              f"{n_bad} elements are NaN or inf where the exact result is finite, first {where}",
                              ["an overflow in a half-precision accumulator, or a read of uninitialised or "
                               "out-of-bounds memory"])

    summary = f"max error {_fmt(max_ratio)} u|A||B| {where} (got {got_v:.9g}, want {ref_v:.9g}); {bound}"
    if max_ratio <= allowed:
        return AccuracyReport(max_ratio, allowed, worst, None, summary)

    n_over = int(_host_scalar((ratio > allowed).sum()))
    details = [summary, f"{n_over} of {int(ratio.size)} elements exceed the bound "
                        "(error / (2**-24 * (|A||B|)_ij), see pytest_gemm.judges.bounds)"]
    for band, looks_like in _suspects(k, p.name):
        if band > allowed and max_ratio <= band:
            details.append("a logic error can look like this at large K; if the exact-input tests fail too, "
                           "fix those first")
            if looks_like is _TF32_IN_FP32 and max_ratio <= NEAR_BOUND * allowed:
                looks_like += _TRUNCATING_FP32.format(x=max_ratio / allowed)
            return AccuracyReport(max_ratio, allowed, worst, PRECISION_TOO_LOW, looks_like, details)
    return AccuracyReport(max_ratio, allowed, worst, WRONG_VALUES,
                          f"errors up to {_fmt(max_ratio)} u|A||B| {where} are far beyond any rounding "
                          f"({bound}): the result is wrong, not imprecise", details)


def rounding_sized(got: Any, ref64: Any, absprod64: Any, k: int, precision: str | Precision,
                   xp: Any = numpy) -> dict[str, Any]:
    """Whether the errors of a wrong exact output are the size of a lower precision's rounding
    at this K: no NaN, and every finite error within the widest band ``_suspects`` names
    (16 units of bf16's roundoff, in u|A||B|). Infinities are allowed: a half-precision sum
    overflows (fp16's range ends at 65504) where float32 does not. The verdict reads this
    fact to tell precision loss that starts at some K from a logic error (outputs/records.py)."""
    p = get_precision(precision)
    k = _check_k(k)
    g = xp.asarray(got, dtype=xp.float32).astype(xp.float64)
    ref = xp.asarray(ref64, dtype=xp.float64)
    gauge = UNIT_ROUNDOFF * xp.asarray(absprod64, dtype=xp.float64)
    finite = xp.isfinite(g)
    err = xp.where(finite, xp.abs(g - ref), 0.0)
    ratio = xp.where(gauge > 0, err / xp.where(gauge > 0, gauge, 1.0), xp.where(err == 0, 0.0, xp.inf))
    max_ratio = _host_scalar(ratio.max()) if ratio.size else 0.0
    band = max(b for b, _ in _suspects(k, p.name))
    nan = bool(_host_scalar(xp.isnan(g).any()))
    return {"k": k, "max_ratio": max_ratio if math.isfinite(max_ratio) else None,
            "rounding_sized": (not nan) and math.isfinite(max_ratio) and max_ratio <= band}


def assert_accurate(got: Any, ref64: Any, absprod64: Any, k: int, precision: str | Precision,
                    xp: Any = numpy) -> AccuracyReport:
    """``check_accuracy``, raising GemmCheckFailure when it fails; returns the report when it passes."""
    report = check_accuracy(got, ref64, absprod64, k, precision, xp=xp)
    if report.category is not None:
        raise GemmCheckFailure(report.category, report.message, report.details)
    return report


def tolerance_report(ks: tuple[int, ...] = (1, 16, 256, 1024, 4096)) -> str:
    """The derivation above plus a table of the allowed ratios, for the README."""
    header = "      K    " + "".join(f"{name:>10}" for name in ("fp32", "tf32", "fp16", "bf16"))
    rows = [f"  {k:>5}    " + "".join(f"{allowed_ratio(k, name):>10.0f}" for name in ("fp32", "tf32", "fp16", "bf16"))
            for k in ks]
    return (__doc__ or "").strip() + "\n\nAllowed max ratio T(K, precision):\n\n" + "\n".join([header, *rows]) + "\n"


def fraction_within_bound(got: Any, ref64: Any, absprod64: Any, k: int, precision: str | Precision,
                          xp: Any = numpy) -> float:
    """The fraction of the elements of ``got`` within ``check_accuracy``'s bound, element by
    element: a race spoils some elements of a launch; memory that nobody computed spoils all."""
    allowed = allowed_ratio(_check_k(k), get_precision(precision))
    g = xp.ascontiguousarray(got, dtype=xp.float32).astype(xp.float64)
    ref = xp.asarray(ref64, dtype=xp.float64)
    scale = UNIT_ROUNDOFF * xp.asarray(absprod64, dtype=xp.float64)
    ok = xp.abs(g - ref) <= allowed * scale  # NaN compares False
    return float(_host_scalar(ok.sum())) / max(int(ok.size), 1)


__all__ = [
    "fraction_within_bound", "UNIT_ROUNDOFF", "AccuracyReport", "allowed_ratio", "fp32_ratio", "tensor_core_ratio", "check_accuracy",
    "assert_accurate", "tolerance_report", "rounding_sized",
]
