"""Launch results built by hand, as the harness returns them (``kernels/harness.py``), for the
tests that judge a launch with no GPU (tests/test_race_scoring.py, tests/test_inputs_judged.py)."""
from __future__ import annotations

from typing import Any

import numpy as np

from pytest_gemm.kernels.harness import GuardDamage, LaunchResult

UNDAMAGED = GuardDamage(before=0, after=0, first_after=-1, last_after=-1, first_before=-1)
UNCHANGED: tuple[int, Any] = (0, None)  # (elements changed, the first one) of an input left alone


def launch_result(c: np.ndarray, c_guard: GuardDamage = UNDAMAGED, a_changed: tuple[int, Any] = UNCHANGED,
                  b_changed: tuple[int, Any] = UNCHANGED) -> LaunchResult:
    """A launch that wrote ``c``, with C's guard bands as ``c_guard`` says and A's and B's untouched."""
    return LaunchResult(c, c_guard, UNDAMAGED, UNDAMAGED, a_changed, b_changed)
