"""Problem shapes: ``(M, N, K)`` triples, their text form and parsing."""
from __future__ import annotations

Shape = tuple[int, int, int]


def shape_str(shape: Shape | list[int]) -> str:
    return "x".join(map(str, shape))


def parse_shape(text: str) -> Shape:
    """``"4096"`` -> (4096, 4096, 4096); ``"1000x64x300"`` -> (1000, 64, 300)."""
    parts = text.lower().replace("*", "x").split("x")
    try:
        dims = [int(p) for p in parts]
    except ValueError:
        raise ValueError(f"shape {text!r}: expected N or MxNxK with positive integers, e.g. 4096 or 1000x64x300") from None
    if len(dims) == 1:
        dims *= 3
    if len(dims) != 3 or min(dims) < 1:
        raise ValueError(f"shape {text!r}: expected N or MxNxK with positive integers, e.g. 4096 or 1000x64x300")
    return dims[0], dims[1], dims[2]
