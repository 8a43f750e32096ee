"""Where a mask of elements lies, in words: whole rows or columns, the ragged edge of a tile,
the same part of every tile, a block of tiles. Pure numpy (judges/diagnose.py uses it)."""
from __future__ import annotations

import numpy as np

_MAX_LISTED = 6  # ranges or tiles spelled out before "..."


def _fmt_ranges(ranges: list[tuple[int, int]]) -> str:
    parts = [f"{a}..{b}" if b > a else f"{a}" for a, b in ranges[:_MAX_LISTED]]
    if len(ranges) > _MAX_LISTED:
        parts.append(f"... ({len(ranges)} ranges)")
    return ", ".join(parts)


def _noun(word: str, ranges: list[tuple[int, int]]) -> str:
    single = len(ranges) == 1 and ranges[0][0] == ranges[0][1]
    return word if single else word + "s"


def pct(count: int, total: int) -> str:
    pct = 100.0 * count / total
    return f"{pct:.2g}%" if pct < 10 else f"{pct:.0f}%"


def runs_of(flags: np.ndarray) -> list[tuple[int, int]]:
    """Contiguous runs of True as inclusive (start, stop) pairs."""
    idx = np.flatnonzero(flags)
    if idx.size == 0:
        return []
    breaks = np.flatnonzero(np.diff(idx) > 1)
    starts = np.concatenate(([idx[0]], idx[breaks + 1]))
    stops = np.concatenate((idx[breaks], [idx[-1]]))
    return [(int(a), int(b)) for a, b in zip(starts, stops)]


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
    rows, cols = runs_of(tiles.any(axis=1)), runs_of(tiles.any(axis=0))
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
        return f"{_noun('row', runs_of(rows_all))} {_fmt_ranges(runs_of(rows_all))}"
    if np.array_equal(part, np.broadcast_to(cols_all[None, :], part.shape)):
        return f"{_noun('column', runs_of(cols_all))} {_fmt_ranges(runs_of(cols_all))}"
    return (f"{int(part.sum())} of {tr * tc} positions (rows {_fmt_ranges(runs_of(part.any(axis=1)))}, "
            f"columns {_fmt_ranges(runs_of(part.any(axis=0)))})")


_SINGULAR = {"are wrong": "is wrong", "were never written": "was never written", "differ": "differs",
             "were left unwritten": "was left unwritten"}


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
    rows, cols = runs_of(mask.any(axis=1)), runs_of(mask.any(axis=0))
    where = f"rows {_fmt_ranges(rows)}, columns {_fmt_ranges(cols)}"
    if tile is not None and not tiles.all():
        hit = int(tiles.sum())
        if np.array_equal(tiles, _tile_grid(mask, tile, fill=True)):
            summary = f"{_tile_phrase(tiles)} {_verb(verb, hit)} (whole {tile[0]}x{tile[1]} tiles)"
        else:
            summary = f"{count} elements {verb}, all in {_tile_phrase(tiles)}"
        return summary, [f"elements in {where}"]
    return f"{count} of {m * n} elements ({pct(count, m * n)}) {verb}, in {where}", []


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
            ranges = runs_of(flags)
            simple = simple and len(ranges) == 1
            parts.append(_line_phrase(axis, ranges, size))
            reason = _ragged_reason(axis, ranges, size, tile)
            if reason:
                reasons.append(reason)
    single = len(parts) == 1 and int(mask.any(axis=0).sum() if use_cols else mask.any(axis=1).sum()) == 1
    summary = " and ".join(parts) + f" {_verb(verb, 1) if single else verb}"  # "row 6 (the last one) was"
    details: list[str] = []
    if reasons:
        summary += ": " + " and ".join(reasons)
        details.append("the partial tiles at the edge must still compute and store their in-range elements: "
                       "bounds-check the loads (use 0 outside the matrix) and the store (row < M && col < N)")
    return summary, details, simple

