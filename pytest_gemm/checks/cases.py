"""Conformance cases: which (kernel, shape, parameters) each check runs on.

Pure logic, decided at collection time without touching the device: a shape
that a kernel's ``multiple_of`` excludes becomes a skipped case with the
reason; it is never run and never failed.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable

from ..model.contract import GemmKernel, short_id
from ..model.shapes import Shape, parse_shape, shape_str  # noqa: F401  (re-exported for the suite)


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

DETERMINISM_SHAPE: Shape = (1000, 1000, 1000)


@dataclass(frozen=True)
class GemmCase:
    """One conformance test's subject: a kernel, a shape, and check parameters."""

    check: str
    kernel: GemmKernel
    shape: Shape
    params: dict[str, Any] = field(default_factory=dict)

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


def build_cases(check: str, kernels: Iterable[GemmKernel], shapes: Iterable[Shape],
                params: Iterable[dict[str, Any]] = ({},), when: str | None = None) -> list[GemmCase]:
    """Cross kernels with shapes and parameter sets; ``when="alpha_beta"`` keeps
    only kernels whose signature takes alpha and beta."""
    cases = []
    for kernel in kernels:
        if when == "alpha_beta" and not kernel.takes_alpha_beta:
            continue
        if when == "deterministic" and not kernel.deterministic:
            continue
        for shape in shapes:
            for p in params:
                cases.append(GemmCase(check, kernel, tuple(shape), dict(p)))  # type: ignore[arg-type]
    return cases
