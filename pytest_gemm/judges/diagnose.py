"""Turn a wrong output into words: which elements, which rows/columns/tiles, what pattern.

The pass/fail decision is made on the device with ``xp`` (numpy or CuPy): a
bit comparison and one ``any()``. Only when something is wrong is the output
copied to the host, where the pattern analysis runs in numpy; outputs are at
most a few million elements, so this costs nothing next to a failing test.

Every launch starts from C filled with ``FILL_BITS`` (a finite value no correct
result can equal), or, in the beta == 0 check, ``POISON_BITS`` (a NaN with a
payload no arithmetic produces): an element still holding exactly those bits
was never written by the kernel.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from ..model.categories import NONDETERMINISTIC, PRECISION_TOO_LOW, UNWRITTEN_OUTPUT, WRONG_VALUES, GemmCheckFailure

# Negative quiet NaN with payload 0x40DEAD: GPU arithmetic returns the canonical
# NaN (0x7FFFFFFF), so these exact bits can only survive by never being written.
POISON_BITS: int = 0xFFC0DEAD
# -1.8238e8 with a payload-like mantissa: finite, so a kernel that computes alpha*acc + beta*C
# at beta == 0 reads 0 * FILL = -0 and is still right (the beta_zero check alone judges that
# BLAS rule); above 2**24 in magnitude, so no exact result equals it; its ulp (16) is small
# enough that a kernel adding into C instead of storing changes it for any |result| > 8.
FILL_BITS: int = 0xCD2DEAD5
SENTINELS = (FILL_BITS, POISON_BITS)

_UINT_FOR_SIZE = {1: "uint8", 2: "uint16", 4: "uint32", 8: "uint64"}
_MAX_LISTED = 6  # ranges or tiles spelled out before "..."
_INPUT_CHECK_LIMIT = 2 ** 31  # M*N*K above which re-multiplying A and B on the host takes too long


# -- poison -----------------------------------------------------------------

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


def _host(x: Any) -> np.ndarray:
    """numpy copy of a numpy or CuPy array (CuPy arrays have ``.get()``)."""
    if isinstance(x, np.ndarray):
        return x
    get = getattr(x, "get", None)
    return get() if callable(get) else np.asarray(x)


# -- the result -------------------------------------------------------------

@dataclass
class Diagnosis:
    category: str
    summary: str                                  # one line a student can act on
    details: list[str] = field(default_factory=list)
    count: int = 0                                # elements wrong
    first: tuple[int, int, float, float] | None = None  # (row, col, got, want) of the first, row-major

    def failure(self) -> GemmCheckFailure:
        return GemmCheckFailure(self.category, self.summary, self.details)


# -- formatting -------------------------------------------------------------

def _fmt(v: float, bits: int | None = None) -> str:
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


def _ranges(flags: np.ndarray) -> list[tuple[int, int]]:
    """Contiguous runs of True as inclusive (start, stop) pairs."""
    idx = np.flatnonzero(flags)
    if idx.size == 0:
        return []
    breaks = np.flatnonzero(np.diff(idx) > 1)
    starts = np.concatenate(([idx[0]], idx[breaks + 1]))
    stops = np.concatenate((idx[breaks], [idx[-1]]))
    return [(int(a), int(b)) for a, b in zip(starts, stops)]


def _fmt_ranges(ranges: list[tuple[int, int]]) -> str:
    parts = [f"{a}..{b}" if b > a else f"{a}" for a, b in ranges[:_MAX_LISTED]]
    if len(ranges) > _MAX_LISTED:
        parts.append(f"... ({len(ranges)} ranges)")
    return ", ".join(parts)


def _noun(word: str, ranges: list[tuple[int, int]]) -> str:
    single = len(ranges) == 1 and ranges[0][0] == ranges[0][1]
    return word if single else word + "s"


def _pct(count: int, total: int) -> str:
    pct = 100.0 * count / total
    return f"{pct:.2g}%" if pct < 10 else f"{pct:.0f}%"


# -- where: rows, columns, tiles ---------------------------------------------

def _tile_grid(mask: np.ndarray, tile: tuple[int, int], fill: bool) -> np.ndarray:
    """Per-tile any() (fill=False) or all() (fill=True) of ``mask``; ragged edges padded with ``fill``."""
    tr, tc = tile
    m, n = mask.shape
    nbr, nbc = -(-m // tr), -(-n // tc)
    padded = np.full((nbr * tr, nbc * tc), fill, dtype=bool)
    padded[:m, :n] = mask
    blocks = padded.reshape(nbr, tr, nbc, tc)
    return blocks.all(axis=(1, 3)) if fill else blocks.any(axis=(1, 3))


def _ragged_reason(axis: str, ranges: list[tuple[int, int]], size: int, tile: tuple[int, int] | None) -> str:
    """'N=1000 is not a multiple of your 16-wide tile' when the range is exactly the ragged tail."""
    if tile is None or len(ranges) != 1:
        return ""
    width = tile[1] if axis == "column" else tile[0]
    dim, shape_word = ("N", "wide") if axis == "column" else ("M", "tall")
    tail = size % width
    if tail and ranges[0] == (size - tail, size - 1):
        return f"{dim}={size} is not a multiple of your {width}-{shape_word} tile"
    return ""


def _line_phrase(axis: str, ranges: list[tuple[int, int]], size: int) -> str:
    text = f"{_noun(axis, ranges)} {_fmt_ranges(ranges)}"
    if len(ranges) == 1 and ranges[0][1] == size - 1 and ranges[0][0] > 0:
        last = size - ranges[0][0]
        text += f" (the last {last})" if last > 1 else " (the last one)"
    return text


def _tile_list(tiles: np.ndarray) -> str:
    coords = [(int(r), int(c)) for r, c in zip(*np.nonzero(tiles))]
    listed = ", ".join(f"({r}, {c})" for r, c in coords[:_MAX_LISTED])
    if len(coords) > _MAX_LISTED:
        listed += ", ..."
    return listed


def _tile_phrase(tiles: np.ndarray) -> str:
    """Name a set of tiles: the last tile row/column, a block of tiles, or a list."""
    nbr, nbc = tiles.shape
    total, hit = tiles.size, int(tiles.sum())
    count = f"({hit} of {total} tiles)"
    rows, cols = _ranges(tiles.any(axis=1)), _ranges(tiles.any(axis=0))
    if hit == total:
        return f"every tile {count}"
    if rows == [(nbr - 1, nbr - 1)] and tiles[nbr - 1].all():
        return f"only the last tile row (blockIdx.y = {nbr - 1}) {count}"
    if cols == [(nbc - 1, nbc - 1)] and tiles[:, nbc - 1].all():
        return f"only the last tile column (blockIdx.x = {nbc - 1}) {count}"
    if hit == 1:
        r, c = (int(v[0]) for v in np.nonzero(tiles))
        which = " (the last tile)" if (r, c) == (nbr - 1, nbc - 1) else ""
        return f"only the tile at (blockIdx.y, blockIdx.x) = ({r}, {c}){which} {count}"
    if len(rows) == 1 and len(cols) == 1 and hit == (rows[0][1] - rows[0][0] + 1) * (cols[0][1] - cols[0][0] + 1):
        return (f"the tiles in block {_noun('row', rows)} {_fmt_ranges(rows)}, "
                f"block {_noun('column', cols)} {_fmt_ranges(cols)} {count}")
    return f"tiles at (blockIdx.y, blockIdx.x) = {_tile_list(tiles)} {count}"


def _same_part_of_each_tile(mask: np.ndarray, tiles: np.ndarray, tile: tuple[int, int]) -> str | None:
    """If every affected tile is damaged in the same (partial) positions, name them.

    At least two full-size tiles must be affected; ragged edge tiles must show
    the same pattern clipped to the matrix.
    """
    tr, tc = tile
    m, n = mask.shape
    hit = list(zip(*np.nonzero(tiles)))
    full = [(r, c) for r, c in hit if (r + 1) * tr <= m and (c + 1) * tc <= n]
    if len(full) < 2:
        return None
    part = mask[full[0][0] * tr:(full[0][0] + 1) * tr, full[0][1] * tc:(full[0][1] + 1) * tc]
    if part.all():
        return None  # whole tiles: named as tiles, not as a pattern
    for r, c in hit:
        block = mask[r * tr:(r + 1) * tr, c * tc:(c + 1) * tc]
        if not np.array_equal(block, part[:block.shape[0], :block.shape[1]]):
            return None
    rows_all, cols_all = part.all(axis=1), part.all(axis=0)
    if np.array_equal(part, np.broadcast_to(rows_all[:, None], part.shape)):
        return f"{_noun('row', _ranges(rows_all))} {_fmt_ranges(_ranges(rows_all))}"
    if np.array_equal(part, np.broadcast_to(cols_all[None, :], part.shape)):
        return f"{_noun('column', _ranges(cols_all))} {_fmt_ranges(_ranges(cols_all))}"
    return (f"{int(part.sum())} of {tr * tc} positions (rows {_fmt_ranges(_ranges(part.any(axis=1)))}, "
            f"columns {_fmt_ranges(_ranges(part.any(axis=0)))})")


_SINGULAR = {"are wrong": "is wrong", "were never written": "was never written", "differ": "differs"}


def _verb(verb: str, count: int) -> str:
    return _SINGULAR.get(verb, verb) if count == 1 else verb


def describe_region(mask: np.ndarray, verb: str, tile: tuple[int, int] | None = None) -> tuple[str, list[str]]:
    """One line naming where ``mask`` is True, plus detail lines.

    ``verb`` completes the sentence in the plural: "were never written", "are wrong", "changed".
    """
    m, n = mask.shape
    count = int(mask.sum())
    if mask.all():
        return f"all {m * n} elements {verb}", []
    if count <= 3:
        cells = ", ".join(f"row {r}, col {c}" for r, c in zip(*np.nonzero(mask)))
        return f"{count} element{'' if count == 1 else 's'} {_verb(verb, count)}: {cells}", []
    tiles = _tile_grid(mask, tile, fill=False) if tile is not None else None
    lines = _whole_lines(mask, verb, tile)
    if lines is not None and lines[2]:  # one run of columns and/or rows: clearest as it is
        return lines[0], lines[1]
    if tile is not None:
        # a repeating in-tile pattern says more than a list of row ranges
        same = _same_part_of_each_tile(mask, tiles, tile)
        if same is not None:
            tr, tc = tile
            if tiles.all():
                summary = f"{same} of every {tr}x{tc} tile {verb} ({count} elements)"
            else:
                summary = f"{same} of each {tr}x{tc} tile {verb}, in {_tile_phrase(tiles)}"
            return summary, ["each block handles only part of its tile: do the block's threads (and the elements "
                             "each thread computes) cover the whole tile?"]
    if lines is not None:
        return lines[0], lines[1]
    rows, cols = _ranges(mask.any(axis=1)), _ranges(mask.any(axis=0))
    where = f"rows {_fmt_ranges(rows)}, columns {_fmt_ranges(cols)}"
    if tile is not None and not tiles.all():
        hit = int(tiles.sum())
        if np.array_equal(tiles, _tile_grid(mask, tile, fill=True)):
            summary = f"{_tile_phrase(tiles)} {_verb(verb, hit)} (whole {tile[0]}x{tile[1]} tiles)"
        else:
            summary = f"{count} elements {verb}, all in {_tile_phrase(tiles)}"
        return summary, [f"elements in {where}"]
    return f"{count} of {m * n} elements ({_pct(count, m * n)}) {verb}, in {where}", []


def _whole_lines(mask: np.ndarray, verb: str, tile: tuple[int, int] | None) -> tuple[str, list[str], bool] | None:
    """Whole columns, whole rows, or both (an L at the ragged edges); the flag: one run per axis."""
    m, n = mask.shape
    rows_all, cols_all = mask.all(axis=1), mask.all(axis=0)
    use_cols = cols_all.any() and np.array_equal(mask, np.broadcast_to(cols_all[None, :], mask.shape))
    use_rows = rows_all.any() and np.array_equal(mask, np.broadcast_to(rows_all[:, None], mask.shape))
    if not (use_cols or use_rows):
        use_cols = use_rows = bool(rows_all.any() and cols_all.any()
                                   and np.array_equal(mask, rows_all[:, None] | cols_all[None, :]))
    if not (use_cols or use_rows):
        return None
    parts, reasons = [], []
    simple = True
    for axis, flags, size, used in (("column", cols_all, n, use_cols), ("row", rows_all, m, use_rows)):
        if used:
            ranges = _ranges(flags)
            simple = simple and len(ranges) == 1
            parts.append(_line_phrase(axis, ranges, size))
            reason = _ragged_reason(axis, ranges, size, tile)
            if reason:
                reasons.append(reason)
    summary = " and ".join(parts) + f" {verb}"
    details: list[str] = []
    if reasons:
        summary += ": " + " and ".join(reasons)
        details.append("the partial tiles at the edge must still compute and store their in-range elements: "
                       "bounds-check the loads (use 0 outside the matrix) and the store (row < M && col < N)")
    return summary, details, simple


# -- what: value patterns -----------------------------------------------------

def _matches(got: np.ndarray, cand: np.ndarray, written: np.ndarray) -> bool:
    """``got`` equals the float32 rounding of ``cand`` wherever the kernel wrote."""
    c32 = cand.astype(np.float32)
    same = (got.view(np.uint32) == c32.view(np.uint32)) | (got == c32)
    return bool(same[written].all())


def _value_pattern(got: np.ndarray, want: np.ndarray, bad: np.ndarray, written: np.ndarray,
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
    if a64 is not None and b64 is not None and m * n * a64.shape[1] <= _INPUT_CHECK_LIMIT:
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


_LOWER = (("fp16 or TF32 (10-bit mantissa)", lambda x: _round_mantissa(x, 10)),
          ("bf16 (7-bit mantissa)", lambda x: _round_mantissa(x, 7)))


def _rounded_inputs(got: np.ndarray, want: np.ndarray, written: np.ndarray,
                    a64: np.ndarray | None, b64: np.ndarray | None) -> tuple[str, list[str]] | None:
    """The output is exactly A@B computed from inputs rounded to a lower precision: the kernel
    multiplies in that precision, whatever it declares (a logic error does not do this)."""
    if a64 is None or b64 is None or not written.all() or got.size * a64.shape[1] > _INPUT_CHECK_LIMIT:
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
    return (f"every element is {_fmt(s)} x the exact value",
            ["a constant factor: is alpha applied twice or not at all, or the result added to C more than once?"])


def _nan_note(got: np.ndarray, written: np.ndarray, want: np.ndarray) -> str | None:
    computed_nan = written & np.isnan(got) & ~np.isnan(want)
    n_nan = int(computed_nan.sum())
    if not n_nan:
        return None
    return (f"{n_nan} written elements are NaN: the kernel read uninitialised shared memory or read past the end "
            "of A or B (or read C when it held NaN)")


# -- public entry points -----------------------------------------------------

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
    count = int(bad.sum())
    first = _first(bad, g, w)
    r, c, gv, wv = first
    head = [f"{count} of {m * n} elements ({_pct(count, m * n)}) differ from the exact result",
            f"first mismatch at row {r}, col {c}: got {_fmt(gv, int(g.view(np.uint32)[r, c]))}, want {_fmt(wv)}"]
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
    elif (rounded := _rounded_inputs(g, w, written, a64, b64)) is not None:
        category = PRECISION_TOO_LOW
        summary, details = rounded
    else:
        category = WRONG_VALUES
        pattern = _value_pattern(g, w, bad, written, a64, b64)
        if pattern is not None:
            summary, details = pattern
        else:
            summary, details = describe_region(bad, "are wrong", tile)
            if written[bad].all() and np.isfinite(g[bad]).all():
                rel = np.abs(g[bad].astype(np.float64) - w[bad]) / np.maximum(np.abs(w[bad].astype(np.float64)), 1.0)
                details.append(f"largest relative error {float(rel.max()):.3g}")
    note = _nan_note(g, written, w)
    if note:
        details.append(note)
    return Diagnosis(category, summary, head + details, count, first)


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
    summary = (f"{count} of {total} elements ({_pct(count, total)}) differ between two launches on the same inputs: "
               "a value that changes between runs on the same inputs is a race "
               "(a missing __syncthreads, or float atomics)")
    with np.errstate(invalid="ignore"):
        delta = np.abs(f.astype(np.float64) - s.astype(np.float64))
    delta[~changed] = 0.0
    finite = np.isfinite(delta)
    r, c = np.unravel_index(int(np.argmax(np.where(finite, delta, -1.0))), delta.shape)
    details = []
    if finite[changed].any():
        details.append(f"largest change {_fmt(delta[r, c])} at row {r}, col {c}: "
                       f"{_fmt(f[r, c])} in the first run, {_fmt(s[r, c])} in the second")
    fu, su = (unwritten_mask(x) for x in (f, s))
    once = int((fu != su).sum())
    if once:
        details.append(f"{once} elements were written in one run and left unwritten in the other")
    where, more = describe_region(changed, "changed", tile)
    details.append(where)
    r0, c0 = np.unravel_index(int(np.argmax(changed)), changed.shape)
    first_at = (int(r0), int(c0), float(f[r0, c0]), float(s[r0, c0]))
    return Diagnosis(NONDETERMINISTIC, summary, details + more, count, first_at)


# -- guard bands --------------------------------------------------------------

def _bits(x: Any, xp: Any) -> Any:
    x = xp.ascontiguousarray(x).ravel()
    return x.view(_UINT_FOR_SIZE[x.dtype.itemsize])


def guard_diff(before: Any, after: Any, xp: Any = np) -> tuple[int, int | None]:
    """(how many elements changed, flat index of the first) between two snapshots of a buffer."""
    changed = _bits(before, xp) != _bits(after, xp)
    count = int(changed.sum())
    return count, (int(xp.argmax(changed.astype(xp.uint8))) if count else None)


def guard_offsets(before: Any, after: Any, xp: Any = np) -> np.ndarray:
    """Flat indices (numpy) of the elements that changed."""
    return np.flatnonzero(_host(_bits(before, xp) != _bits(after, xp)))


_ITEM_WORD = {4: "float", 2: "16-bit value", 8: "double", 1: "byte"}


def describe_guard_damage(name: str, offsets: Sequence[int], region: str, *, itemsize: int = 4,
                          shape: tuple[int, ...] | None = None, item: str | None = None) -> str:
    """One line for a damaged buffer or guard band.

    ``region``: "after" (offsets counted from the end of ``name``, 0 is the
    first element past it), "before" (0 is the element just before its start)
    or "inside" (flat indices into ``name`` itself, e.g. a modified input;
    ``shape`` turns the first into a row and column).
    """
    offs = [int(o) for o in offsets]
    n = len(offs)
    word = item or _ITEM_WORD.get(itemsize, "element")
    plural = word if n == 1 else (word + "s" if not word.endswith("s") else word)
    if region == "after":
        reach = (max(offs) + 1) * itemsize if offs else 0
        return f"{n} {plural} written past the end of {name} (up to {reach} bytes after it)"
    if region == "before":
        reach = (max(offs) + 1) * itemsize if offs else 0
        return f"{n} {plural} written before the start of {name} (up to {reach} bytes before it)"
    if region == "inside":
        first = min(offs) if offs else None
        where = ""
        if first is not None:
            if shape is not None and len(shape) == 2:
                where = f", first at row {first // shape[1]}, col {first % shape[1]}"
            else:
                where = f", first at index {first}"
        return f"{name} was modified: {n} element{'' if n == 1 else 's'} changed{where}"
    raise ValueError(f"region must be 'before', 'after' or 'inside', got {region!r}")


__all__ = [
    "POISON_BITS", "FILL_BITS", "SENTINELS", "poison", "fill", "unwritten_mask", "Diagnosis", "diagnose", "describe_region", "compare_runs",
    "assert_bit_identical", "guard_diff", "guard_offsets", "describe_guard_damage",
]
