"""Turn a wrong output into words: which elements, which rows/columns/tiles, what pattern.

The pass/fail decision is made on the device with ``xp`` (numpy or CuPy): a
bit comparison and one ``any()``. Only when something is wrong is the output
copied to the host, where the pattern analysis runs in numpy; outputs are at
most a few million elements, so this costs nothing next to a failing test.

Every launch starts from C filled with ``FILL_BITS`` (a finite value no correct
result can equal), or, in the beta == 0 check, ``POISON_BITS`` (a NaN with a
payload no arithmetic produces): an element still holding exactly those bits
was never written by the kernel. The sentinels (``FILL_BITS``, ``POISON_BITS``, ``fill``,
``poison``, ``unwritten_mask``) live in ``sentinels.py``, the region's words (``describe_region``)
in ``region.py``: import those names from there.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .patterns import nan_note, rounded_inputs, three_tf32_output, value_pattern
from .region import describe_region, pct
from .sentinels import fmt_value, unwritten_mask
from ..model.categories import NONDETERMINISTIC, PRECISION_TOO_LOW, UNWRITTEN_OUTPUT, WRONG_VALUES, GemmCheckFailure

def _host(x: Any) -> np.ndarray:
    """numpy copy of a numpy or CuPy array (CuPy arrays have ``.get()``)."""
    if isinstance(x, np.ndarray):
        return x
    get = getattr(x, "get", None)
    return get() if callable(get) else np.asarray(x)


@dataclass
class Diagnosis:
    category: str
    summary: str                                  # one line a student can act on
    details: list[str] = field(default_factory=list)
    count: int = 0                                # elements wrong
    first: tuple[int, int, float, float] | None = None  # (row, col, got, want) of the first, row-major
    pattern: bool = False                         # a whole-result mistake was recognised (value_pattern)
    emulation: str | None = None                  # "3xTF32": the output is exactly that fp32 emulation's result

    def failure(self) -> GemmCheckFailure:
        exc = GemmCheckFailure(self.category, self.summary, self.details)
        exc.pattern = self.pattern  # type: ignore[attr-defined]  # read by the exact check's facts
        exc.emulation = self.emulation  # type: ignore[attr-defined]
        return exc


def _mismatch(got: Any, want: Any, xp: Any) -> tuple[Any, Any, Any]:
    g = xp.ascontiguousarray(got, dtype=xp.float32)
    w = xp.ascontiguousarray(want).astype(xp.float32)
    # bit equality, except that +0 and -0 are the same value
    bad = (g.view(xp.uint32) != w.view(xp.uint32)) & ~(g == w)
    return g, w, bad


def _first(bad: np.ndarray, got: np.ndarray, want: np.ndarray) -> tuple[int, int, float, float]:
    r, c = np.unravel_index(int(np.argmax(bad)), bad.shape)
    return int(r), int(c), float(got[r, c]), float(want[r, c])


def diagnose(got: Any, want: Any, *, tile: tuple[int, int] | None = None, a64: Any = None, b64: Any = None,
             xp: Any = np) -> Diagnosis | None:
    """None when ``got`` equals ``want`` (rounded to float32) bit for bit; else what is wrong, in words.

    ``tile=(rows, cols)`` is the kernel's tile of C per block, used to name
    ragged edges and affected tiles; ``a64``/``b64`` (the exact inputs) enable
    the K-loop and transposed-input checks.
    """
    if tuple(got.shape) != tuple(want.shape):
        return Diagnosis(WRONG_VALUES, f"C has shape {tuple(got.shape)}, expected {tuple(want.shape)}")
    if len(got.shape) != 2:
        raise ValueError(f"diagnose expects 2-D outputs, got shape {tuple(got.shape)}")
    g_dev, w_dev, bad_dev = _mismatch(got, want, xp)
    if not bool(bad_dev.any()):
        return None
    g, w, bad = _host(g_dev), _host(w_dev), _host(bad_dev)
    a = _host(a64).astype(np.float64) if a64 is not None else None
    b = _host(b64).astype(np.float64) if b64 is not None else None
    tile = tuple(int(t) for t in tile) if tile is not None else None  # type: ignore[assignment]
    return _analyse(g, w, bad, tile, a, b)


def _analyse(g: np.ndarray, w: np.ndarray, bad: np.ndarray, tile: tuple[int, int] | None,
             a64: np.ndarray | None, b64: np.ndarray | None) -> Diagnosis:
    m, n = g.shape
    unwritten = unwritten_mask(g)
    written = ~unwritten
    recognised = False
    emulation = None
    count = int(bad.sum())
    first = _first(bad, g, w)
    r, c, gv, wv = first
    head = [f"{count} of {m * n} elements ({pct(count, m * n)}) differ from the exact result",
            f"first mismatch at row {r}, col {c}: got {fmt_value(gv, int(g.view(np.uint32)[r, c]))}, want {fmt_value(wv)}"]
    wrong_written = bad & written
    if unwritten.any():
        category = UNWRITTEN_OUTPUT
        if unwritten.all():
            summary = f"no element of C was written (all {m * n} still hold the value C was filled with)"
            details = ["did the kernel launch, and does it store through the C argument (argument order?)"]
            if tile is not None and (m < tile[0] or n < tile[1]):
                summary += f": M={m}, N={n} is smaller than your {tile[0]}x{tile[1]} tile, so every tile is partial"
                details = ["partial tiles must still compute and store their in-range elements"]
        else:
            summary, details = describe_region(unwritten, "were never written", tile)
        if wrong_written.any():
            more, _ = describe_region(wrong_written, "are wrong", tile)
            details.append(f"besides: {more}")
    elif (rounded := rounded_inputs(g, w, written, a64, b64)) is not None:
        category = PRECISION_TOO_LOW
        summary, details = rounded
    elif (split := three_tf32_output(g, w, written, a64, b64)) is not None:
        category, emulation = PRECISION_TOO_LOW, "3xTF32"
        summary, details = split
    else:
        category = WRONG_VALUES
        pattern = value_pattern(g, w, bad, written, a64, b64)
        recognised = pattern is not None
        if pattern is not None:
            summary, details = pattern
        else:
            summary, details = describe_region(bad, "are wrong", tile)
            if written[bad].all() and np.isfinite(g[bad]).all():
                rel = np.abs(g[bad].astype(np.float64) - w[bad]) / np.maximum(np.abs(w[bad].astype(np.float64)), 1.0)
                details.append(f"largest relative error {float(rel.max()):.3g}")
    note = nan_note(g, written, w)
    if note:
        details.append(note)
    return Diagnosis(category, summary, head + details, count, first, recognised, emulation)


def assert_bit_identical(got: Any, want: Any, *, tile: tuple[int, int] | None = None, a64: Any = None,
                         b64: Any = None, xp: Any = np) -> None:
    """Raise GemmCheckFailure (with the diagnosis) unless ``got`` is ``want`` bit for bit."""
    d = diagnose(got, want, tile=tile, a64=a64, b64=b64, xp=xp)
    if d is not None:
        raise d.failure()


def compare_runs(first: Any, second: Any, *, tile: tuple[int, int] | None = None, xp: Any = np) -> Diagnosis | None:
    """None when two launches on the same inputs gave the same bits; else a NONDETERMINISTIC diagnosis."""
    f_dev = xp.ascontiguousarray(first, dtype=xp.float32)
    s_dev = xp.ascontiguousarray(second, dtype=xp.float32)
    if tuple(f_dev.shape) != tuple(s_dev.shape):
        raise ValueError(f"compare_runs: shapes differ, {tuple(f_dev.shape)} vs {tuple(s_dev.shape)}")
    changed_dev = f_dev.view(xp.uint32) != s_dev.view(xp.uint32)
    if not bool(changed_dev.any()):
        return None
    f, s, changed = _host(f_dev), _host(s_dev), _host(changed_dev)
    f, s, changed = np.atleast_2d(f), np.atleast_2d(s), np.atleast_2d(changed)
    count, total = int(changed.sum()), changed.size
    summary = (f"{count} of {total} elements ({pct(count, total)}) differ between two launches on the same inputs: "
               "a value that changes between runs on the same inputs is a race "
               "(a missing __syncthreads, or float atomics)")
    with np.errstate(invalid="ignore"):
        delta = np.abs(f.astype(np.float64) - s.astype(np.float64))
    delta[~changed] = 0.0
    finite = np.isfinite(delta)
    r, c = np.unravel_index(int(np.argmax(np.where(finite, delta, -1.0))), delta.shape)
    details = []
    if finite[changed].any():
        details.append(f"largest change {fmt_value(delta[r, c])} at row {r}, col {c}: "
                       f"{fmt_value(f[r, c])} in the first run, {fmt_value(s[r, c])} in the second")
    fu, su = (unwritten_mask(x) for x in (f, s))
    once = int((fu != su).sum())
    if once:
        details.append(f"{once} elements were written in one run and left unwritten in the other")
    where, more = describe_region(changed, "changed", tile)
    details.append(where)
    r0, c0 = np.unravel_index(int(np.argmax(changed)), changed.shape)
    first_at = (int(r0), int(c0), float(f[r0, c0]), float(s[r0, c0]))
    return Diagnosis(NONDETERMINISTIC, summary, details + more, count, first_at)


__all__ = ["Diagnosis", "diagnose", "compare_runs", "assert_bit_identical"]

