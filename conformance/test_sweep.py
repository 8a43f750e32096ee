"""Sweep: TFLOP/s of each kernel and of cuBLAS at its precision at every ``--gemm-sweep`` size.

One test per kernel (``sweep-<kernel>``), skipped with the reason unless
``--gemm-sweep`` is given. It runs in the kernel's sandbox: the sizes in a
seeded shuffled order, the kernel and cuBLAS back to back at each size, every
timed output verified like the speed check (see ``pytest_gemm/sweep.py``).
The results feed the "TFLOP/s by size" table, the JSON report's ``sweep`` and
``--gemm-plot``.
"""
from __future__ import annotations

import pytest


@pytest.mark.gemm_cases("sweep", shapes="bench", per_kernel=True)
def test_sweep(gemm_case, gemm_record, request):
    from pytest_gemm.device import require_device
    from pytest_gemm.session import run_in_sandbox, state
    from pytest_gemm.sweep import EXAMPLE, requested_sweep, sweep_params

    shapes = requested_sweep(request.config)
    if not shapes:
        pytest.skip(f"no sweep asked for: give the sizes to time every kernel and cuBLAS at, e.g. {EXAMPLE}")
    device = require_device()
    kernel = gemm_case.kernel
    if not device.supports(tuple(kernel.min_cc)):
        major, minor = kernel.min_cc
        pytest.skip(f"kernel {kernel.name!r} needs compute capability {major}.{minor} (min_cc); "
                    f"this GPU ({device.name}) is {device.compute_capability[0]}.{device.compute_capability[1]}")
    try:
        facts = run_in_sandbox(request.config, kernel, "sweep", gemm_case.shape, sweep_params(shapes))
    except BaseException as exc:
        if getattr(exc, "facts", None):
            gemm_record(exc.facts)  # type: ignore[attr-defined]  # what was measured before the failure
        raise
    if state(request.config).gpu_shared:
        facts["gpu_shared"] = True  # another xdist worker may have used this GPU meanwhile
    gemm_record(facts)
