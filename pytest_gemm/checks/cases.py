"""Conformance cases: which (kernel, shape, parameters) each check runs on.

Pure logic, decided at collection time without touching the device. A shape
that a kernel's ``multiple_of`` excludes is replaced by the nearest shape it
claims (each dimension rounded up to its multiple), so no check is silently
dropped; the case keeps the shape it stands in for (``requested``) and the
report says so.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable

from ..model.contract import GemmKernel, short_id
from ..model.shapes import Shape


# Exact correctness: square, non-square, skinny, large K, primes, ragged.
EXACT_SHAPES: tuple[Shape, ...] = (
    (1, 1, 1), (2, 2, 2), (7, 7, 7), (16, 16, 16), (31, 31, 31), (32, 32, 32), (33, 33, 33),
    (64, 64, 64), (127, 127, 127), (128, 128, 128), (129, 129, 129), (256, 256, 256),
    (512, 512, 512), (1000, 1000, 1000), (1024, 1024, 1024), (2048, 2048, 2048), (4096, 4096, 4096),
    (17, 33, 65), (127, 255, 63), (300, 200, 100), (64, 1000, 48), (1000, 64, 300), (256, 512, 128),
    (1, 4096, 4096), (1, 1, 4096), (4096, 1, 4096), (4096, 4096, 1), (500, 700, 1), (1, 128, 1),
    (128, 128, 65536), (97, 101, 103), (331, 337, 347), (997, 1009, 1013), (1023, 1025, 1027),
)

# Coverage and guard bands: ragged shapes where edge bugs show.
EDGE_SHAPES: tuple[Shape, ...] = ((1, 1, 1), (17, 33, 65), (127, 255, 63), (1000, 1000, 1000), (64, 64, 64))

# Accuracy on random inputs: K spans the range where lower precision shows.
ACCURACY_SHAPES: tuple[Shape, ...] = ((256, 256, 16), (256, 256, 256), (256, 256, 1024), (129, 131, 4096))
DISTRIBUTIONS = ("uniform", "heavy")

ALPHAS = (0.0, 1.0, 0.7)
BETAS = (0.0, 1.0, 1.3)
ALPHA_BETA_SHAPE: Shape = (127, 255, 63)

# Determinism: a square shape and a deep-K one, where split-K float atomics contend on few outputs.
DETERMINISM_SHAPES: tuple[Shape, ...] = ((1000, 1000, 1000), (128, 128, 16384))


@dataclass(frozen=True)
class GemmCase:
    """One conformance test's subject: a kernel, a shape, and check parameters."""

    check: str
    kernel: GemmKernel
    shape: Shape
    params: dict[str, Any] = field(default_factory=dict)
    requested: Shape | None = None  # the suite's shape this one stands in for (multiple_of), or None

    @property
    def id(self) -> str:
        m, n, k = self.shape
        extra = "".join(f"-{key}{value}" for key, value in self.params.items())
        return f"{self.check}-{short_id(str(self.kernel.name))}-{m}x{n}x{k}{extra}"


def skip_reason(kernel: GemmKernel, shape: Shape) -> str | None:
    """Why a kernel does not claim a shape (its multiple_of), or None."""
    bad = [f"{dim}={size} is not a multiple of {mult}"
           for dim, size, mult in zip("MNK", shape, kernel.multiple_of) if size % mult]
    if bad:
        return (f"kernel {kernel.name!r} declares multiple_of={tuple(kernel.multiple_of)}: "
                f"{', '.join(bad)}; shapes it does not claim are skipped, not failed")
    return None


def claimed_shape(kernel: GemmKernel, shape: Shape) -> Shape:
    """The nearest shape ``kernel`` claims: each dimension rounded up to its ``multiple_of``."""
    return tuple(-(-size // mult) * mult for size, mult in zip(shape, kernel.multiple_of))  # type: ignore[return-value]


def build_cases(check: str, kernels: Iterable[GemmKernel], shapes: Iterable[Shape],
                params: Iterable[dict[str, Any]] = ({},), when: str | None = None,
                round_to_claimed: bool = True) -> list[GemmCase]:
    """Cross kernels with shapes and parameter sets; ``when="alpha_beta"`` keeps
    only kernels whose signature takes alpha and beta. A shape the kernel does not
    claim becomes the nearest one it does (once per kernel and check)."""
    cases = []
    shapes, params = list(shapes), list(params)
    for kernel in kernels:
        if when == "alpha_beta" and not kernel.takes_alpha_beta:
            continue
        if when == "deterministic" and not kernel.deterministic:
            continue
        seen: set[Shape] = set()
        claimed = [tuple(s) for s in shapes if skip_reason(kernel, tuple(s)) is None]  # type: ignore[arg-type]
        for shape in shapes:
            shape = tuple(shape)  # type: ignore[assignment]
            requested = None
            if round_to_claimed and skip_reason(kernel, shape) is not None:
                shape, requested = claimed_shape(kernel, shape), shape
                if shape in claimed:
                    continue  # the suite already runs this shape for the kernel
            if shape in seen:
                continue
            seen.add(shape)
            for p in params:
                cases.append(GemmCase(check, kernel, shape, dict(p), requested))  # type: ignore[arg-type]
    return cases
