"""Test inputs: exact integer problems and seeded random problems.

Exact problems use integers small enough that every product and every partial
sum is exact in a float32 accumulator, so any correct kernel, whatever its
summation order, returns the float64 reference bit for bit. Random problems
(uniform or heavy-tailed) exercise rounding and are judged by ``bounds``.

Data is seeded by ``(seed, kind, M, N, K)`` so each shape gets its own data
and a rerun gets the same data. Arrays here are numpy; moving them to the
device is the caller's business.
"""
from __future__ import annotations

import math
import operator
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

from ..model.precision import Precision, from_storage, get_precision, to_storage

ACCUMULATOR_EXACT_LIMIT = 2 ** 24  # float32 holds every integer up to 2**24 exactly
DISTRIBUTIONS = ("uniform", "heavy")
HEAVY_DF = 3          # Student t degrees of freedom: finite variance, heavy tails
HEAVY_CLIP = 1000.0   # keeps every input (not every sum) inside the fp16 range
_KIND_TAG = {"exact": 0, "uniform": 1, "heavy": 2}


class GemmInexactError(ValueError):
    """No integer inputs keep this problem exact in a float32 accumulator."""


@dataclass
class GemmProblem:
    """One GEMM problem: what the kernel receives and the exact values it represents."""

    m: int
    n: int
    k: int
    precision: str
    a: np.ndarray = field(repr=False)    # (M, K) storage dtype, C-contiguous: handed to the kernel
    b: np.ndarray = field(repr=False)    # (K, N) storage dtype, C-contiguous
    c0: np.ndarray | None = field(default=None, repr=False)  # (M, N) float32 initial C for beta tests
    kind: str = "exact"
    seed: int = 0

    # The exact values of ``a`` and ``b`` as float64, made from the storage when first read: at
    # 4096^3 they are 256 MB that most checks never read on the host (their references start
    # from the storage on the GPU: ``device_exact``), and a speed check draws 4 such problems.
    @cached_property
    def a64(self) -> np.ndarray:
        return from_storage(self.a, self.precision)

    @cached_property
    def b64(self) -> np.ndarray:
        return from_storage(self.b, self.precision)

    @property
    def shape(self) -> tuple[int, int, int]:
        return (self.m, self.n, self.k)


def device_exact(problem: GemmProblem, xp: Any) -> tuple[Any, Any]:
    """``problem``'s exact values of A and B as float64 arrays of ``xp`` (CuPy: on the GPU),
    made from the storage there: half the bytes to copy of float64, and no host conversion.
    numpy: the problem's own, made once (``GemmProblem.a64``)."""
    if xp is np:
        return problem.a64, problem.b64
    return from_storage(xp.asarray(problem.a), problem.precision, xp), \
        from_storage(xp.asarray(problem.b), problem.precision, xp)


def _check_dims(m: object, n: object, k: object) -> tuple[int, int, int]:
    dims = []
    for name, value in (("M", m), ("N", n), ("K", k)):
        if isinstance(value, bool):
            raise ValueError(f"{name} must be a positive int, got {value!r}")
        try:
            v = operator.index(value)  # accepts numpy ints, rejects floats
        except TypeError:
            raise ValueError(f"{name} must be a positive int, got {value!r}") from None
        if v < 1:
            raise ValueError(f"{name} must be >= 1, got {v}; a GEMM needs at least one row, column and term")
        dims.append(v)
    return dims[0], dims[1], dims[2]


def _rng(seed: int, kind: str, m: int, n: int, k: int) -> np.random.Generator:
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be an int >= 0, got {seed!r}")
    return np.random.default_rng([int(seed), _KIND_TAG[kind], m, n, k])


def exact_value_bound(k: int, precision: str | Precision = "fp32", with_c: bool = False) -> int:
    """Largest r such that integer inputs in [-r, r] keep a K-term GEMM exact.

    Needs K*r*r (+ r for a C term) <= 2**24, so every product and partial sum
    fits the float32 accumulator, and r <= the largest integer the storage
    precision holds exactly (2**11 for fp16/tf32, 2**8 for bf16).
    """
    _, _, k = _check_dims(1, 1, k)
    p = get_precision(precision)
    extra = 1 if with_c else 0
    r = math.isqrt(ACCUMULATOR_EXACT_LIMIT // k)
    while r >= 1 and k * r * r + extra * r > ACCUMULATOR_EXACT_LIMIT:
        r -= 1
    if r < 1:
        total = f"K + 1 = {k + 1}" if with_c else f"K = {k}"
        raise GemmInexactError(
            f"K={k}: even inputs in {{-1, 0, 1}} can sum to {total} > 2**24 = {ACCUMULATOR_EXACT_LIMIT}, "
            "which a float32 accumulator cannot hold exactly; exact tests need "
            f"K <= {ACCUMULATOR_EXACT_LIMIT - extra}: use random_inputs and the accuracy bound instead"
        )
    return min(r, p.max_exact_int)


def _nonzero_ints(rng: np.random.Generator, r: int, shape: tuple[int, ...]) -> np.ndarray:
    # No zeros: every term then changes the sum, so a skipped or extra K step always shows.
    # Uniform over the 2r values -r..-1, 1..r: draw -r..r-1 and move 0..r-1 up by one. One
    # draw of int16 (r <= 4096) is about 8x faster than magnitude and sign drawn apart, which
    # matters at 8192^3, where a timed run draws 4 sets of 2 x 67 M values.
    # Returned as int16: the storage is made from them directly (a float64 copy first cost 0.28 s
    # per 4096^2 matrix here), and the float64 values only when read (``GemmProblem.a64``).
    values = rng.integers(-r, r, size=shape, dtype=np.int16)
    values += values >= 0
    return values


def exact_inputs(m: int, n: int, k: int, precision: str | Precision = "fp32", seed: int = 0,
                 with_c: bool = False) -> GemmProblem:
    """Nonzero integers in [-r, r] (r from ``exact_value_bound``), mean zero.

    Any correct kernel reproduces ``a64 @ b64`` (+ C) bit for bit on these.
    """
    m, n, k = _check_dims(m, n, k)
    p = get_precision(precision)
    r = exact_value_bound(k, p, with_c)
    rng = _rng(seed, "exact", m, n, k)
    a = to_storage(_nonzero_ints(rng, r, (m, k)), p)
    b = to_storage(_nonzero_ints(rng, r, (k, n)), p)
    c0 = _nonzero_ints(rng, r, (m, n)).astype(np.float32) if with_c else None
    return GemmProblem(m, n, k, p.name, a, b, c0, "exact", int(seed))


def _draw(rng: np.random.Generator, distribution: str, shape: tuple[int, ...]) -> np.ndarray:
    if distribution == "uniform":
        return rng.uniform(-1.0, 1.0, size=shape)
    return np.clip(rng.standard_t(HEAVY_DF, size=shape), -HEAVY_CLIP, HEAVY_CLIP)


def random_inputs(m: int, n: int, k: int, precision: str | Precision = "fp32", distribution: str = "uniform",
                  seed: int = 0, with_c: bool = False) -> GemmProblem:
    """Seeded random inputs rounded to the storage precision.

    ``uniform``: U[-1, 1]. ``heavy``: Student t with 3 degrees of freedom,
    clipped to +-1000 so every input is finite in fp16. ``a64``/``b64`` are
    the values actually stored (after rounding), so the reference is exact
    for what the kernel was given.
    """
    if distribution not in DISTRIBUTIONS:
        raise ValueError(f"unknown distribution {distribution!r}; valid distributions are {', '.join(DISTRIBUTIONS)}")
    m, n, k = _check_dims(m, n, k)
    p = get_precision(precision)
    rng = _rng(seed, distribution, m, n, k)
    a = to_storage(_draw(rng, distribution, (m, k)), p)
    b = to_storage(_draw(rng, distribution, (k, n)), p)
    c0 = _draw(rng, distribution, (m, n)).astype(np.float32) if with_c else None
    return GemmProblem(m, n, k, p.name, a, b, c0, distribution, int(seed))


__all__ = [
    "GemmInexactError", "GemmProblem", "exact_value_bound", "exact_inputs", "random_inputs",
    "DISTRIBUTIONS", "HEAVY_DF", "HEAVY_CLIP",
]
