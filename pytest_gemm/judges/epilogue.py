"""Which epilogue a kernel's output matches, when it is not ``alpha*A@B + beta*C_old``.

Pure numpy: the alpha/beta and beta == 0 checks call it on the host copy of C, so a
kernel that ignores beta is told so (not "the K loop never runs", which is what a
generic diagnosis of an all-zero output at alpha == 0 would say).
"""
from __future__ import annotations

from typing import Any

import numpy as np


# C = beta*A@B + alpha*C_old: at alpha == 1, beta == 0 (every check but alpha/beta's) C keeps what it held,
# which reads as "never written"; the verdict names the swap instead (outputs/verdicts.py)
SWAPPED = "alpha and beta are swapped (C = beta*A@B + alpha*C_old)"


def _close(got: np.ndarray, cand: np.ndarray, scale: float) -> bool:
    return bool(np.allclose(got, cand, rtol=1e-4, atol=1e-4 * scale, equal_nan=False))


def explain_epilogue(got: Any, a64: Any, b64: Any, c0: Any, alpha: float, beta: float) -> str | None:
    """A sentence naming the formula ``got`` matches instead of alpha*A@B + beta*C_old, or None
    when it matches the right one or none of the usual mistakes."""
    g = np.asarray(got, dtype=np.float64)
    if not np.isfinite(g).all():
        return None
    ab = np.asarray(a64, dtype=np.float64) @ np.asarray(b64, dtype=np.float64)
    c = np.zeros_like(ab) if c0 is None else np.asarray(c0, dtype=np.float64)
    want = alpha * ab + beta * c
    scale = float(max(np.abs(ab).max(initial=0.0), np.abs(c).max(initial=0.0), 1.0))
    if _close(g, want, scale):
        return None
    # the smallest claim first: where two formulas give the same values here (alpha == 1, or
    # beta == 0), the one that blames less is said
    candidates = (
        (alpha * ab, "beta is ignored: C_old is not added (C = alpha*A@B)"),
        (ab + beta * c, "alpha is ignored (C = A@B + beta*C_old)"),
        (ab, "alpha and beta are ignored: C = A@B"),
        (alpha * ab + c, "beta is taken as 1 (C = alpha*A@B + C_old)"),
        (ab + c, "alpha and beta are ignored and C_old is added (C = A@B + C_old)"),
        # with no C_old (beta == 0: C held the fill) a swap's alpha*C_old is not known, and beta*A@B is 0:
        # an all-zero output (a K loop that never runs) would read as a swap
        *(() if c0 is None else ((beta * ab + alpha * c, SWAPPED),)),
    )
    for cand, sentence in candidates:
        if not _close(want, cand, scale) and _close(g, cand, scale):
            return sentence
    return None
