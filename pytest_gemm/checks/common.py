"""What every GPU check shares: launching through the harness with CUDA errors
turned into categories, the float64 reference on the device, the exact comparison.
The harness itself (``Harness``, ``LaunchResult``, ``harness_for``, ``keep_secret``) lives in
``kernels/harness.py``: import those names from there."""
from __future__ import annotations

from typing import Any

import numpy as np

from ..judges.diagnose import assert_bit_identical
from ..judges.inputs import device_exact
from ..judges.reference import reference
from ..kernels.harness import Harness, LaunchResult, keep_secret
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


def reject_writes_outside_c(result: LaunchResult, check: str, shape: Any) -> None:
    """Fail a value check whose launch wrote outside C (its guard bands changed), whatever the
    values came out as. Such writes are a race's evidence that does not depend on the race's
    outcome: a store past the end of a row lands in the next row too, where another block
    writes the right value, and which of the two writes is last depends on the order in which
    blocks finish. Judging the values alone would pass or fail the same kernel from run to run;
    the guard band after C is written by nothing else, so this verdict is the same every run."""
    g = result.c_guard
    if not (g.after or g.before):
        return
    where = []
    if g.after:
        where.append(f"{g.after} bytes after the end of C (from {g.first_after} to {g.last_after} bytes past it)")
    if g.before:
        where.append(f"{g.before} bytes before its start (up to {g.first_before} bytes before it)")
    shape_text = "x".join(map(str, shape))
    raise GemmCheckFailure(
        cat.OUT_OF_BOUNDS_WRITE,
        f"{check} at {shape_text}: the launch wrote outside C ({'; '.join(where)}), so its values here are "
        "not judged: such stores also land inside C, in the next rows, where they race with the right values",
        ["guard every store with row < M && col < N; a check whose launch writes outside C fails whatever its "
         "values, so the same kernel gets the same score in every run"])


def reject_modified_inputs(result: LaunchResult, check: str, shape: Any) -> None:
    """Fail a check whose launch changed A or B (BLAS: both are unchanged on exit). Every check that
    launches judges it, not the guards check alone: a kernel may change its inputs only at some
    scalars or inputs (``a *= alpha`` in place changes nothing at alpha == 1, rounding A to TF32 in
    place nothing on exact-integer inputs)."""
    m, n, k = (tuple(shape) + (0, 0, 0))[:3]
    for name, (count, first) in (("A", result.a_changed), ("B", result.b_changed)):
        if count:
            rows, cols = (m, k) if name == "A" else (k, n)
            raise GemmCheckFailure(cat.INPUT_MODIFIED,
                                   f"{check} at {m}x{n}x{k}: {name} ({rows}x{cols}) was modified: {count} elements "
                                   f"changed, first at row {first[0]}, col {first[1]}",
                                   [f"a GEMM kernel must only read {name} (BLAS: it is unchanged on exit); declare it "
                                    "const to let the compiler catch this, and work on a copy where the launcher "
                                    "scales or converts it"])


def reject_launch_damage(result: LaunchResult, check: str, shape: Any) -> None:
    """What a value check rejects before it judges values: writes outside C, then changed inputs."""
    reject_writes_outside_c(result, check, shape)
    reject_modified_inputs(result, check, shape)


def to_numpy(x: Any) -> np.ndarray:
    return x.get() if hasattr(x, "get") else np.asarray(x)


CPU_REFERENCE_FLOPS = 2 ** 28  # below this the float64 reference is computed by numpy


def reference_f32(problem: Any, alpha: float = 1.0, beta: float = 0.0, c0: Any = None) -> Any:
    """The float64 reference as a CuPy array. Small problems are computed by numpy:
    cuBLAS loads a DGEMM kernel lazily for each new shape class, which costs seconds."""
    import cupy  # lazy: CuPy (the plugin loads with no GPU)

    if 2 * problem.m * problem.n * problem.k <= CPU_REFERENCE_FLOPS:
        ref = cupy.asarray(reference(problem.a64, problem.b64, alpha=alpha, beta=beta,
                                     c0=None if c0 is None else np.asarray(c0, dtype=np.float64)))
    else:
        ref = reference(*device_exact(problem, cupy), alpha=alpha, beta=beta,
                        c0=None if c0 is None else cupy.asarray(c0, dtype=cupy.float64), xp=cupy)
    keep_secret(ref)
    return ref


def bits_equal(got: Any, want32: Any) -> bool:
    import cupy  # lazy: CuPy (the plugin loads with no GPU)

    return bool(cupy.array_equal(got.view(cupy.uint32), want32.view(cupy.uint32)))


def assert_exact(h: Harness, result: LaunchResult, ref64: Any, problem: Any) -> None:
    import cupy  # lazy: CuPy (the plugin loads with no GPU)

    want32 = ref64.astype(cupy.float32)
    keep_secret(want32)
    if bits_equal(result.c, want32):
        return
    assert_bit_identical(to_numpy(result.c), to_numpy(ref64), tile=tile_of(h.kernel),
                         a64=problem.a64, b64=problem.b64)
