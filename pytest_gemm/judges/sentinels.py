"""The values C holds before a launch, so an element still holding one was never written.

``FILL_BITS`` (finite) in every check but one; ``POISON_BITS`` (a NaN with a payload no
arithmetic produces) in the beta == 0 check, where reading C must show.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

# Negative quiet NaN with payload 0x40DEAD: GPU arithmetic returns the canonical
# NaN (0x7FFFFFFF), so these exact bits can only survive by never being written.
POISON_BITS: int = 0xFFC0DEAD


# -1.8238e8 with a payload-like mantissa: finite, so a kernel that computes alpha*acc + beta*C
# at beta == 0 reads 0 * FILL = -0 and is still right (the beta_zero check alone judges that
# BLAS rule); above 2**24 in magnitude, so no exact result equals it; its ulp (16) is small
# enough that a kernel adding into C instead of storing changes it for any |result| > 8.
FILL_BITS: int = 0xCD2DEAD5


SENTINELS = (FILL_BITS, POISON_BITS)


def poison(shape: int | Sequence[int], xp: Any = np) -> Any:
    """A float32 array of ``shape`` whose every element has the bits ``POISON_BITS`` (NaN)."""
    return xp.full(shape, POISON_BITS, dtype=xp.uint32).view(xp.float32)


def fill(shape: int | Sequence[int], xp: Any = np) -> Any:
    """A float32 array of ``shape`` whose every element has the bits ``FILL_BITS`` (finite)."""
    return xp.full(shape, FILL_BITS, dtype=xp.uint32).view(xp.float32)


def unwritten_mask(c: Any, xp: Any = np) -> Any:
    """True where ``c`` still holds a sentinel's bits (the kernel never wrote it)."""
    bits = xp.ascontiguousarray(c, dtype=xp.float32).view(xp.uint32)
    return (bits == xp.uint32(FILL_BITS)) | (bits == xp.uint32(POISON_BITS))


def fmt_value(v: float, bits: int | None = None) -> str:
    if bits == POISON_BITS:
        return "NaN (poison: never written)"
    if bits == FILL_BITS:
        return f"{float(np.uint32(FILL_BITS).view(np.float32)):.5g} (the fill value: never written)"
    v = float(v)
    if v != v:
        return "NaN"
    if v.is_integer() and abs(v) < 1e15:
        return str(int(v))
    return f"{v:.9g}"

