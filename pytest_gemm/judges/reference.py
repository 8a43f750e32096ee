"""float64 references: the exact-ish result and the error gauge |A| @ |B|.

Inputs are the exact float64 values of what the kernel received
(``GemmProblem.a64``/``b64``). For exact problems the float64 product is
exact; for random ones its error (~K * 2**-53) is far below any float32 bound.
"""
from __future__ import annotations

from typing import Any

import numpy


def reference(a64: Any, b64: Any, *, alpha: float = 1.0, beta: float = 0.0, c0: Any = None,
              xp: Any = numpy) -> Any:
    """``alpha * A @ B + beta * C0`` in float64, shape (M, N).

    ``beta == 0`` means C0 is not read at all (the BLAS convention), so a
    poisoned or missing C0 cannot leak NaN into the reference.
    """
    a = xp.asarray(a64, dtype=xp.float64)
    b = xp.asarray(b64, dtype=xp.float64)
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[0]:
        raise ValueError(f"reference: A {tuple(a.shape)} and B {tuple(b.shape)} do not form a matrix product")
    out = xp.matmul(a, b)
    if alpha != 1.0:
        out *= alpha
    if beta != 0.0:
        if c0 is None:
            raise ValueError("reference: beta != 0 needs c0, the initial C")
        c = xp.asarray(c0, dtype=xp.float64)
        if tuple(c.shape) != tuple(out.shape):
            raise ValueError(f"reference: c0 has shape {tuple(c.shape)}, expected {tuple(out.shape)}")
        out += beta * c
    return out


def abs_product(a64: Any, b64: Any, xp: Any = numpy) -> Any:
    """``|A| @ |B|`` in float64: the scale each output's rounding error is measured against."""
    return xp.matmul(xp.abs(xp.asarray(a64, dtype=xp.float64)), xp.abs(xp.asarray(b64, dtype=xp.float64)))


def abs_gauge(a64: Any, b64: Any, *, alpha: float = 1.0, beta: float = 0.0, c0: Any = None,
              xp: Any = numpy) -> Any:
    """``|alpha| |A||B| + |beta| |C0|``: the gauge for an alpha/beta result."""
    out = abs(alpha) * abs_product(a64, b64, xp=xp)
    if beta != 0.0 and c0 is not None:
        out += abs(beta) * xp.abs(xp.asarray(c0, dtype=xp.float64))
    return out


__all__ = ["reference", "abs_product", "abs_gauge"]
