"""The speed check's verification on a GPU, in this process: after the timed calls, the last output
is checked, and one more call on A negated in the same buffers must give -(A@B) (measure/timed.py).
cuBLAS computes every call, so it must pass in every precision. bf16 is stored as uint16 bit
patterns, where unary minus is not a negation: before ``model/precision.negate_storage`` the
call ran on garbage, and the H100's ladder run at 23a8dd2 failed cuBLAS's bf16 (and every bf16
rung) as ``stale_output``. Skipped with the reason where there is no usable GPU."""
from __future__ import annotations

import pytest

from pytest_gemm.kernels.device import GemmDevice

pytestmark = pytest.mark.gemm_gpu


@pytest.mark.parametrize("precision", ["fp32", "tf32", "fp16", "bf16"])
def test_cublas_passes_the_speed_checks_verification_in_every_precision(precision: str, gemm_device: GemmDevice):
    from pytest_gemm.kernels.harness import harness_for
    from pytest_gemm.measure.cublas import CUBLAS
    from pytest_gemm.measure.timed import timed_run

    kernel = CUBLAS[precision]
    if not gemm_device.supports(tuple(kernel.min_cc)):
        pytest.skip(f"{kernel.name} needs compute capability {'.'.join(map(str, kernel.min_cc))}; this GPU "
                    f"({gemm_device.name}) is {'.'.join(map(str, gemm_device.compute_capability))}")
    timing, verify = timed_run(harness_for(kernel, gemm_device), (256, 256, 256), budget_s=0.05)
    assert timing.repeats >= 1
    verify()  # raises GemmCheckFailure (stale_output) when either output is wrong
