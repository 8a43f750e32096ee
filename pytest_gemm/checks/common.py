"""What every GPU check shares: launching through the harness with CUDA errors
turned into categories, the float64 reference on the device, the exact comparison."""
from __future__ import annotations

from typing import Any

import numpy as np

from ..kernels.harness import Harness, LaunchResult, harness_for  # noqa: F401  (re-exported for checks)
from ..model import categories as cat
from ..model.categories import GemmCheckFailure
from ..model.contract import CudaKernel, GemmKernel


def tile_of(kernel: GemmKernel) -> tuple[int, int] | None:
    return tuple(kernel.tile) if isinstance(kernel, CudaKernel) and kernel.tile else None  # type: ignore[return-value]


def run_kernel(h: Harness, problem: Any, **kwargs: Any) -> LaunchResult:
    """Launch, turning CUDA errors into fault / launch_error failures with the shape."""
    shape = "x".join(map(str, (problem.m, problem.n, problem.k)))
    try:
        return h.run(problem, **kwargs)
    except Exception as exc:
        if not cat.is_cuda_error(exc):
            raise
        text = str(exc)
        category = cat.LAUNCH_ERROR if any(s in text for s in (
            "InvalidConfiguration", "INVALID_VALUE", "InvalidValue", "LAUNCH_OUT_OF_RESOURCES",
            "OutOfResources", "TooManyResources")) else cat.FAULT
        raise GemmCheckFailure(category, f"{h.kernel.name!r} at {shape}: {text}",
                               ["an illegal or misaligned address usually means an index past the end "
                                "of A, B or C, or a float4 access on an address that is not 16-byte aligned"
                                if category == cat.FAULT else
                                "the launch itself was refused: check block size, grid and shared memory"]) from None


def to_numpy(x: Any) -> np.ndarray:
    return x.get() if hasattr(x, "get") else np.asarray(x)


CPU_REFERENCE_FLOPS = 2 ** 28  # below this the float64 reference is computed by numpy


def reference_f32(problem: Any, alpha: float = 1.0, beta: float = 0.0, c0: Any = None) -> Any:
    """The float64 reference as a CuPy array. Small problems are computed by numpy:
    cuBLAS loads a DGEMM kernel lazily for each new shape class, which costs seconds."""
    import cupy

    from ..judges.reference import reference

    from ..kernels.harness import keep_secret

    if 2 * problem.m * problem.n * problem.k <= CPU_REFERENCE_FLOPS:
        ref = cupy.asarray(reference(problem.a64, problem.b64, alpha=alpha, beta=beta,
                                     c0=None if c0 is None else np.asarray(c0, dtype=np.float64)))
    else:
        ref = reference(cupy.asarray(problem.a64), cupy.asarray(problem.b64), alpha=alpha, beta=beta,
                        c0=None if c0 is None else cupy.asarray(c0, dtype=cupy.float64), xp=cupy)
    keep_secret(ref)
    return ref


def bits_equal(got: Any, want32: Any) -> bool:
    import cupy

    return bool(cupy.array_equal(got.view(cupy.uint32), want32.view(cupy.uint32)))


def assert_exact(h: Harness, result: LaunchResult, ref64: Any, problem: Any) -> None:
    import cupy

    from ..kernels.harness import keep_secret

    want32 = ref64.astype(cupy.float32)
    keep_secret(want32)
    if bits_equal(result.c, want32):
        return
    from ..judges.diagnose import assert_bit_identical

    assert_bit_identical(to_numpy(result.c), to_numpy(ref64), tile=tile_of(h.kernel),
                         a64=problem.a64, b64=problem.b64)
