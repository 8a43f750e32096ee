"""Speed: event-timed against cuBLAS at the same precision, in the same run."""
from __future__ import annotations

import pytest

from pytest_gemm.performance import check_speed
from pytest_gemm.session import state


@pytest.mark.gemm_cases("speed", shapes="bench")
def test_speed(gemm_case, gemm_harness, gemm_record, request):
    check_speed(gemm_harness, gemm_case.shape, gemm_record, state(request.config).min_cublas_fraction)
