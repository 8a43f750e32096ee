"""Is a kernel faster or slower than in a saved run? One call from both runs' per-call times.

The statistic (docs/compare.md says why):

1. ``ratio``: the median of the new run's times over the median of the saved run's (1.03: the
   kernel takes 3 % longer now).
2. Its 95 % confidence interval from a bootstrap (``scipy.stats.bootstrap``, percentile
   interval; each run resampled on its own). Neighbouring calls of one run are correlated (they
   share clocks and temperature), so what is resampled is each run's ``BLOCKS`` medians of
   consecutive calls, not single calls. The interval says how well each run pinned its own
   median, nothing more: every call of a run shares its process, so it is too narrow to stand
   alone.
3. The noise band: a fresh process moves a median by about +-0.5 % (measured on the H200:
   cuBLAS against itself read 0.993 to 1.005), so a difference is *sure* only outside
   ``[1 / (1 + a), 1 + a]`` with ``a`` = ``RUN_NOISE`` (1 %). Where the reference that both runs
   timed (cuBLAS at the same precision and shape) itself moved by more between them (``drift``,
   its ratio of medians), the band reaches out to that ratio on that side only: a kernel that
   moved with the machine is not called slower, but one that went the other way is (cuBLAS 5 %
   faster, the kernel 4 % slower: it lost 9 % against the machine).

The call: ``slower`` when the whole interval lies above the band, ``faster`` below it, ``same``
inside it, ``unsure`` when it crosses an edge of the band (or a run's times cannot be trusted).
A gate (``--gemm-compare-fail=5%``) fails a kernel only when its call is ``slower`` and the
ratio is above ``1 + threshold``: a shift inside the noise never fails, however tight the
samples.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence
import numpy as np

RUN_NOISE = 0.01        # a: the smallest between-run change called sure (twice the measured +-0.5 %)
CONFIDENCE = 0.95
RESAMPLES = 2000
MIN_SAMPLES = 3          # fewer per-call times than this in a run: unsure
BLOCKS = 10              # runs of consecutive calls resampled as units (block_medians)
SEED = 20260101          # the bootstrap is seeded: the same two reports always get the same call

SAME, FASTER, SLOWER, UNSURE = "same", "faster", "slower", "unsure"


class StatisticsUnavailable(ImportError):
    """scipy is not installed."""


INSTALL_HINT = "pip install 'pytest-gemm[compare]'"


def require_scipy() -> None:
    try:
        # lazy: optional (scipy)
        import scipy.stats  # noqa: F401
    except ImportError:
        raise StatisticsUnavailable(f"comparing with a saved run needs scipy (its bootstrap); try: {INSTALL_HINT}") \
            from None


@dataclass(frozen=True)
class SpeedCall:
    call: str                       # same | faster | slower | unsure
    ratio: float | None             # new median / old median (> 1: slower)
    low: float | None               # the bootstrap interval of the ratio
    high: float | None
    band: float                     # a: the noise band's half width (RUN_NOISE)
    why: str = ""                   # for unsure: the reason
    drift: float = 1.0              # how far the reference both runs timed moved (its ratio of medians)

    @property
    def top(self) -> float:
        """The band's upper edge: above it a ratio is surely slower."""
        return max(1.0 + self.band, self.drift)

    @property
    def bottom(self) -> float:
        """The band's lower edge: below it a ratio is surely faster."""
        return min(1.0 / (1.0 + self.band), self.drift)

    def fails(self, threshold: float | None) -> bool:
        """Slower, surely, and by more than ``threshold`` (0.05 = 5 %)."""
        return threshold is not None and self.call == SLOWER and self.ratio is not None \
            and self.ratio > 1.0 + threshold


def block_medians(times: Sequence[float], blocks: int = BLOCKS) -> "Any":
    """The medians of ``blocks`` runs of consecutive calls (fewer when there are fewer calls):
    neighbouring calls share clocks and temperature, blocks much less so, so the bootstrap
    resamples blocks, not calls (batch medians; a bootstrap of single calls is too sure)."""
    values = np.asarray(times, dtype=float)
    return np.array([np.median(chunk) for chunk in np.array_split(values, min(blocks, len(values)))])


def ratio_interval(old: Sequence[float], new: Sequence[float]) -> tuple[float, float, float]:
    """(ratio of medians new/old, low, high): the percentile interval of a bootstrap of both
    runs' block medians."""
    from scipy import stats  # lazy: optional (scipy)

    ratio = float(np.median(np.asarray(new, dtype=float)) / np.median(np.asarray(old, dtype=float)))
    a, b = block_medians(old), block_medians(new)
    if np.ptp(a) == 0 and np.ptp(b) == 0:  # nothing to resample: the interval is the ratio itself
        return ratio, ratio, ratio

    def statistic(x: np.ndarray, y: np.ndarray, axis: int) -> np.ndarray:
        return np.median(y, axis=axis) / np.median(x, axis=axis)

    result = stats.bootstrap((a, b), statistic, vectorized=True, paired=False, n_resamples=RESAMPLES,
                             confidence_level=CONFIDENCE, method="percentile", rng=np.random.default_rng(SEED))
    low, high = result.confidence_interval
    return ratio, float(min(low, ratio)), float(max(high, ratio))


def call_speed(old: Sequence[float], new: Sequence[float], band: float = RUN_NOISE,
               drift: float = 1.0) -> SpeedCall:
    """The call for one kernel at one shape from both runs' per-call times (ms, or any unit
    shared by both, e.g. times over each run's cuBLAS median); ``drift``: the reference's ratio of
    medians between the runs (1.0: unknown or unmoved)."""
    if len(old) < MIN_SAMPLES or len(new) < MIN_SAMPLES:
        return SpeedCall(UNSURE, None, None, None, band,
                         f"too few per-call times ({len(old)} saved, {len(new)} now; {MIN_SAMPLES} needed)", drift)
    if min(old) <= 0 or min(new) <= 0:
        return SpeedCall(UNSURE, None, None, None, band, "a per-call time is not positive", drift)
    ratio, low, high = ratio_interval(old, new)
    edges = SpeedCall(UNSURE, None, None, None, band, "", drift)
    top, bottom = edges.top, edges.bottom
    if low > top:
        call = SLOWER
    elif high < bottom:
        call = FASTER
    elif low >= bottom and high <= top:
        call = SAME
    else:
        call = UNSURE
    why = "" if call != UNSURE else (f"the interval {low:.4f}..{high:.4f} crosses the noise band "
                                     f"{bottom:.4f}..{top:.4f}")
    return SpeedCall(call, ratio, low, high, band, why, drift)
