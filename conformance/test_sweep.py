"""Sweep: TFLOP/s of each kernel and of cuBLAS at its precision at every ``--gemm-sweep`` size.

One test per kernel (``sweep-<kernel>``), skipped with the reason unless
``--gemm-sweep`` is given. It runs in the kernel's sandbox: the sizes in a
seeded shuffled order, the kernel and cuBLAS back to back at each size, every
timed output verified like the speed check (see ``pytest_gemm/measure/sweep.py``).
The results feed the "TFLOP/s by size" table, the JSON report's ``sweep`` and
``--gemm-plot``.
"""
from __future__ import annotations

import pytest


@pytest.mark.gemm_cases("sweep")
def test_sweep(gemm_case, gemm_check, request):
    from pytest_gemm.measure.sweep import EXAMPLE, sweep_params
    from pytest_gemm.runner.state import requested_sweep

    shapes = requested_sweep(request.config)
    if not shapes:
        pytest.skip(f"no sweep asked for: give the sizes to time every kernel and cuBLAS at, e.g. {EXAMPLE}")
    gemm_check(sweep_params(shapes))
