"""BLAS's two zero-scalar rules, judged on numpy outputs (checks/beta_zero.py runs them).

- beta == 0: C is not read (it need not be set on input). C is filled with each poison in
  turn; any non-finite output that is not the untouched poison itself shows a read. NaN is
  not enough: a read that filters NaN (``isnan(c) ? 0 : c``) still computes 0 * Inf = NaN
  from +Inf or -Inf. A read that maps *every* non-finite value to 0 (``isfinite(c) ? c : 0``)
  computes the BLAS result for every C a caller can hold, so it passes: it cannot be told
  from a kernel that does not read C at all, and it is not wrong.
- alpha == 0: C = beta * C. A and B are filled with NaN bytes (0xFF: NaN in fp32, fp16 and
  bf16); a kernel that computes ``alpha * acc`` gets 0 * NaN = NaN, which shows that A or B was
  read: a note (``alpha_zero_reads_ab``), not a failure, since BLAS documents no rule for A and B
  at alpha == 0.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from .sentinels import POISON_BITS

# (name, float32 bits): NaN with the never-written payload first (it also shows an unwritten C)
C_POISONS: tuple[tuple[str, int], ...] = (("NaN", POISON_BITS), ("+Inf", 0x7F800000), ("-Inf", 0xFF800000))
NAN_BYTE = 0xFF  # every byte 0xFF: NaN in fp32, fp16 and bf16
ALPHA_ZERO_BETA = 0.5  # C = 0.5 * C_old is exact in float32


def poisoned(shape: Sequence[int], bits: int) -> np.ndarray:
    """A float32 array whose every element has ``bits``."""
    return np.full(tuple(shape), bits, dtype=np.uint32).view(np.float32)


def c_read_mask(got: np.ndarray, poison_bits: int) -> np.ndarray:
    """Outputs that show C was read: non-finite, and not the poison left untouched (unwritten)."""
    g = np.ascontiguousarray(got, dtype=np.float32)
    return ~np.isfinite(g) & (g.view(np.uint32) != np.uint32(poison_bits))


def nan_like(x: np.ndarray) -> np.ndarray:
    """``x``'s shape and dtype, every byte 0xFF (NaN in any float format the suite uses)."""
    return np.full(np.ascontiguousarray(x).view(np.uint8).shape, NAN_BYTE, dtype=np.uint8).view(x.dtype).reshape(x.shape)


def alpha_zero_expected(c_old: np.ndarray, beta: float = ALPHA_ZERO_BETA) -> np.ndarray:
    """What C must hold after a call with alpha == 0: beta * C_old, in float32."""
    return (np.float32(beta) * np.asarray(c_old, dtype=np.float32)).astype(np.float32)


def ab_read_mask(got: np.ndarray, c_old: np.ndarray, beta: float = ALPHA_ZERO_BETA) -> np.ndarray:
    """Outputs that show A or B was read at alpha == 0: NaN where beta * C_old is finite."""
    g = np.asarray(got, dtype=np.float32)
    return np.isnan(g) & np.isfinite(alpha_zero_expected(c_old, beta))


__all__ = ["C_POISONS", "ALPHA_ZERO_BETA", "poisoned", "c_read_mask", "nan_like", "alpha_zero_expected",
           "ab_read_mask"]
