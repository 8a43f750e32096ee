"""Speed: event-timed against cuBLAS at the same precision, in the same process."""
from __future__ import annotations

import pytest


@pytest.mark.gemm_cases("speed", shapes="bench")
def test_speed(gemm_case, gemm_check):
    gemm_check()
