"""The reference ladder on a GPU, in this process (no sandbox).

Two promises of the ladder that the conformance suite does not state directly:

- the cp.async rungs (cpasync2/3/4) differ from ``pipeline-sync`` only in how
  shared memory is filled, so on random inputs, where every rounding shows,
  their outputs are bit-identical to the synchronous twin's (sm_80+);
- every CUDA rung is bit-exact on exact-integer inputs at ragged, square,
  large and skinny shapes.

Kernels are compiled and launched through ``pytest_gemm.kernels.harness.harness_for``
(a Harness: guarded buffers, C poisoned before every launch). Inputs, float64
references and the synchronous twin's outputs are computed once per shape and
precision and reused. Skipped with the reason where there is no usable GPU or
the GPU is below a rung's ``min_cc``.
"""
from __future__ import annotations

from functools import lru_cache
from typing import Any

import numpy as np
import pytest

import reference_kernels
from pytest_gemm.model.contract import CudaKernel
from pytest_gemm.kernels.device import GemmDevice

pytestmark = pytest.mark.gemm_gpu

Shape = tuple[int, int, int]

TWIN_SHAPES: list[Shape] = [
    (1, 1, 1), (17, 33, 65), (127, 255, 63), (64, 64, 16), (129, 131, 17),
    (1000, 1000, 1000), (1024, 1024, 1024), (4096, 4096, 4096), (1, 4096, 4096),
]
EXACT_SHAPES: list[Shape] = [
    (1, 1, 1), (17, 33, 65), (127, 255, 63), (1000, 1000, 1000), (1024, 1024, 1024),
    (4096, 4096, 4096), (1, 4096, 4096),
]
CPASYNC: list[CudaKernel] = [k for k in reference_kernels.CUDA_RUNGS if k.name.startswith("cpasync")]
TWIN_SEED = 11
CPU_REFERENCE_FLOPS = 2 ** 28  # below this the float64 reference is computed by numpy


def _sid(shape: Shape) -> str:
    return "x".join(map(str, shape))


def _skip_below(kernel: CudaKernel, device: GemmDevice, why: str) -> None:
    if not device.supports(tuple(kernel.min_cc)):
        major, minor = kernel.min_cc
        have = ".".join(map(str, device.compute_capability))
        pytest.skip(f"{kernel.name} needs compute capability {major}.{minor} ({why}); "
                    f"this GPU ({device.name}) is {have}")


def _harness(kernel: CudaKernel, device: GemmDevice) -> Any:
    from pytest_gemm.kernels.harness import harness_for

    return harness_for(kernel, device)


def _run(kernel: CudaKernel, device: GemmDevice, problem: Any) -> Any:
    """One launch, under the GPU-wide lock held shared like any correctness check: the suite
    runs of the other GPU tests (tests/gpu_runs.py) time kernels on this GPU meanwhile."""
    from pytest_gemm.measure.gpu_lock import gpu_lock

    with gpu_lock(False):
        return _harness(kernel, device).run(problem)


# -- cached inputs and references ---------------------------------------------

@lru_cache(maxsize=None)
def _random_problem(shape: Shape) -> Any:
    from pytest_gemm.judges.inputs import random_inputs

    return random_inputs(*shape, precision="fp32", distribution="uniform", seed=TWIN_SEED)


@lru_cache(maxsize=None)
def _exact_problem(shape: Shape, precision: str) -> Any:
    from pytest_gemm.judges.inputs import exact_inputs

    return exact_inputs(*shape, precision=precision, seed=0)


@lru_cache(maxsize=None)
def _exact_reference(shape: Shape, precision: str) -> Any:
    """float64 ``A @ B`` of the exact problem, as a CuPy array (numpy computes small ones:
    cuBLAS loads a DGEMM kernel per new shape class, which costs seconds)."""
    import cupy

    from pytest_gemm.judges.reference import reference

    problem = _exact_problem(shape, precision)
    m, n, k = shape
    if 2 * m * n * k <= CPU_REFERENCE_FLOPS:
        return cupy.asarray(reference(problem.a64, problem.b64))
    return reference(cupy.asarray(problem.a64), cupy.asarray(problem.b64), xp=cupy)


@lru_cache(maxsize=None)
def _sync_bits(shape: Shape, device: GemmDevice) -> Any:
    """``pipeline-sync``'s output on the random problem, as a CuPy uint32 array."""
    import cupy

    from pytest_gemm.judges.sentinels import unwritten_mask

    result = _run(reference_kernels.pipeline_sync, device, _random_problem(shape))
    bits = result.c.view(cupy.uint32).copy()
    unwritten = int(unwritten_mask(result.c, xp=cupy).sum())  # the fill value the harness left
    assert unwritten == 0, f"pipeline-sync left {unwritten} of {bits.size} outputs unwritten at {_sid(shape)}"
    return bits


# -- comparison ---------------------------------------------------------------

def _show(bits: int) -> str:
    value = np.array([bits], dtype=np.uint32).view(np.float32)[0]
    return f"{str(value)} (0x{bits:08x})"


def mismatch_message(got_bits: Any, want_bits: Any, what: str) -> str | None:
    """None when the two uint32 arrays (numpy or CuPy, 2-D) are equal; else how many
    elements differ and the first one (row-major order) with both values."""
    diff = got_bits != want_bits
    count = int(diff.sum())
    if not count:
        return None
    first = int(diff.ravel().argmax())
    cols = int(got_bits.shape[-1])
    row, col = divmod(first, cols)
    got, want = int(got_bits.ravel()[first]), int(want_bits.ravel()[first])
    return (f"{what}: {count} of {int(diff.size)} elements differ; first at row {row}, col {col}: "
            f"got {_show(got)}, expected {_show(want)}")


# -- (a) the cp.async rungs are bit-identical to their synchronous twin ---------------

TWIN_CASES = [pytest.param(kernel, shape, id=f"{kernel.name}-vs-sync-{_sid(shape)}")
              for kernel in CPASYNC for shape in TWIN_SHAPES]


@pytest.mark.parametrize(("kernel", "shape"), TWIN_CASES)
def test_cpasync_bit_identical_to_sync(kernel: CudaKernel, shape: Shape, gemm_device: GemmDevice) -> None:
    import cupy

    _skip_below(kernel, gemm_device, "cp.async is an sm_80 instruction")
    want = _sync_bits(shape, gemm_device)
    result = _run(kernel, gemm_device, _random_problem(shape))
    message = mismatch_message(result.c.view(cupy.uint32), want,
                               f"{kernel.name} vs pipeline-sync at {_sid(shape)} on uniform random inputs")
    assert message is None, message + (
        "; both fill the same shared tiles and run the same compute_tile(), so any difference is a "
        "slice read before its cp.async group landed, a buffer overwritten while still in use, or a "
        "tile filled differently (zero-fill of the edges)")


# -- (b) every CUDA rung is bit-exact on exact-integer inputs -------------------------

EXACT_CASES = [pytest.param(kernel, shape, id=f"{kernel.name}-{_sid(shape)}")
               for kernel in reference_kernels.CUDA_RUNGS for shape in EXACT_SHAPES]


@pytest.mark.parametrize(("kernel", "shape"), EXACT_CASES)
def test_rung_bit_exact(kernel: CudaKernel, shape: Shape, gemm_device: GemmDevice) -> None:
    import cupy

    from pytest_gemm.judges.diagnose import assert_bit_identical

    _skip_below(kernel, gemm_device, "its min_cc")
    problem = _exact_problem(shape, kernel.precision)
    ref64 = _exact_reference(shape, kernel.precision)
    result = _run(kernel, gemm_device, problem)
    want32 = ref64.astype(cupy.float32)
    if bool(cupy.array_equal(result.c.view(cupy.uint32), want32.view(cupy.uint32))):
        return
    # The diagnosis (which rows, columns or tiles; poison left; off by one) says what is wrong.
    assert_bit_identical(cupy.asnumpy(result.c), cupy.asnumpy(ref64), tile=tuple(kernel.tile),
                         a64=problem.a64, b64=problem.b64)
    raise AssertionError(mismatch_message(result.c.view(cupy.uint32), want32.view(cupy.uint32),
                                          f"{kernel.name} at {_sid(shape)}"))

