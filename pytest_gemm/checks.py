"""The conformance checks themselves: run a kernel, compare, raise GemmCheckFailure.

Each function is one check of DESIGN.md's list; the conformance test modules
only choose cases and call these. Needs a GPU (through the Harness).
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from . import categories as cat
from .cases import Shape, shape_str
from .categories import GemmCheckFailure
from .contract import CudaKernel, GemmKernel
from .device import GemmDevice
from .harness import Harness, LaunchResult

_HARNESSES: dict[tuple[int, int], Harness] = {}


def harness_for(kernel: GemmKernel, device: GemmDevice) -> Harness:
    """One harness per kernel per process; a compile error fails with compile_error."""
    from .compiler import GemmCompileError

    key = (id(kernel), device.index)
    if key not in _HARNESSES:
        try:
            _HARNESSES[key] = Harness(kernel, device)
        except GemmCompileError as exc:
            raise GemmCheckFailure(cat.COMPILE_ERROR, f"{kernel.name!r} does not compile for {device.arch}",
                                   exc.log.strip().splitlines()) from None
    return _HARNESSES[key]


def _tile(kernel: GemmKernel) -> tuple[int, int] | None:
    return tuple(kernel.tile) if isinstance(kernel, CudaKernel) and kernel.tile else None  # type: ignore[return-value]


def _run(h: Harness, problem: Any, **kwargs: Any) -> LaunchResult:
    """Launch, turning CUDA errors into fault / launch_error failures with the shape."""
    shape = shape_str((problem.m, problem.n, problem.k))
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


def _to_numpy(x: Any) -> np.ndarray:
    return x.get() if hasattr(x, "get") else np.asarray(x)


CPU_REFERENCE_FLOPS = 2 ** 28  # below this the float64 reference is computed by numpy


def _reference_f32(problem: Any, alpha: float = 1.0, beta: float = 0.0, c0: Any = None) -> Any:
    """The float64 reference as a CuPy array. Small problems are computed by numpy:
    cuBLAS loads a DGEMM kernel lazily for each new shape class, which costs seconds."""
    import cupy

    from .reference import reference

    if 2 * problem.m * problem.n * problem.k <= CPU_REFERENCE_FLOPS:
        return cupy.asarray(reference(problem.a64, problem.b64, alpha=alpha, beta=beta,
                                      c0=None if c0 is None else np.asarray(c0, dtype=np.float64)))
    return reference(cupy.asarray(problem.a64), cupy.asarray(problem.b64), alpha=alpha, beta=beta,
                     c0=None if c0 is None else cupy.asarray(c0, dtype=cupy.float64), xp=cupy)


def _bits_equal(got: Any, want32: Any) -> bool:
    import cupy

    return bool(cupy.array_equal(got.view(cupy.uint32), want32.view(cupy.uint32)))


def _assert_exact(h: Harness, result: LaunchResult, ref64: Any, problem: Any) -> None:
    import cupy

    want32 = ref64.astype(cupy.float32)
    if _bits_equal(result.c, want32):
        return
    from .diagnose import assert_bit_identical

    assert_bit_identical(_to_numpy(result.c), _to_numpy(ref64), tile=_tile(h.kernel),
                         a64=problem.a64, b64=problem.b64)


def check_exact(h: Harness, shape: Shape, seed: int = 0) -> None:
    """Integer inputs, every product and sum exact: the output must match bit for bit."""
    from .inputs import exact_inputs

    problem = exact_inputs(*shape, precision=h.kernel.precision, seed=seed)
    result = _run(h, problem)
    _assert_exact(h, result, _reference_f32(problem), problem)


def check_coverage(h: Harness, shape: Shape) -> None:
    """C is poisoned before the launch; every element must be overwritten."""
    import cupy

    from .diagnose import diagnose, unwritten_mask
    from .inputs import exact_inputs

    problem = exact_inputs(*shape, precision=h.kernel.precision, seed=1)
    result = _run(h, problem)
    if not bool(unwritten_mask(result.c, xp=cupy).any()):
        return
    d = diagnose(_to_numpy(result.c), _to_numpy(_reference_f32(problem)), tile=_tile(h.kernel))
    raise GemmCheckFailure(cat.UNWRITTEN_OUTPUT, d.summary if d else "some outputs were never written",
                           d.details if d else [])


def check_guards(h: Harness, shape: Shape) -> None:
    """Nothing written outside C, and A and B left exactly as uploaded."""
    from .inputs import exact_inputs

    problem = exact_inputs(*shape, precision=h.kernel.precision, seed=2)
    r = _run(h, problem)
    m, n, k = shape
    for name, g in (("C", r.c_guard), ("A", r.a_guard), ("B", r.b_guard)):
        if g.after or g.before:
            where = []
            if g.after:
                where.append(f"{g.after} bytes changed after the end of {name} "
                             f"(from {g.first_after} to {g.last_after} bytes past it)")
            if g.before:
                where.append(f"{g.before} bytes changed before the start of {name} "
                             f"(up to {g.first_before} bytes before it)")
            hint = ("rows past M were written: guard the store with row < M" if name == "C"
                    else f"the kernel writes through its {name} pointer")
            raise GemmCheckFailure(cat.OUT_OF_BOUNDS_WRITE,
                                   f"writes outside {name} at {m}x{n}x{k}: {'; '.join(where)}", [hint])
    for name, (count, first) in (("A", r.a_changed), ("B", r.b_changed)):
        if count:
            rows, cols = (m, k) if name == "A" else (k, n)
            raise GemmCheckFailure(cat.INPUT_MODIFIED,
                                   f"{name} ({rows}x{cols}) was modified: {count} elements changed, first at "
                                   f"row {first[0]}, col {first[1]}",
                                   [f"a GEMM kernel must only read {name}; declare it const to let the compiler catch this"])


def check_alpha_beta(h: Harness, shape: Shape, alpha: float, beta: float) -> None:
    """C = alpha*A@B + beta*C; with beta == 0, C's old contents (NaN here) must not be read."""
    import cupy

    from .inputs import exact_inputs
    from .reference import abs_product

    problem = exact_inputs(*shape, precision=h.kernel.precision, seed=3, with_c=True)
    c_init = problem.c0 if beta != 0 else None  # beta == 0: C holds NaN poison, which must not leak
    result = _run(h, problem, alpha=alpha, beta=beta, c_init=c_init)
    ref64 = _reference_f32(problem, alpha, beta, problem.c0 if beta != 0 else None)
    if alpha in (0.0, 1.0) and beta in (0.0, 1.0):
        _assert_exact(h, result, ref64, problem)
        return
    from .bounds import check_accuracy

    gauge = abs(alpha) * abs_product(cupy.asarray(problem.a64), cupy.asarray(problem.b64), xp=cupy)
    if beta != 0:
        gauge = gauge + abs(beta) * cupy.abs(cupy.asarray(problem.c0, dtype=cupy.float64))
    report = check_accuracy(result.c, ref64, gauge, shape[2], h.kernel.precision, xp=cupy)
    if report.category is not None:
        raise GemmCheckFailure(cat.WRONG_VALUES if report.category != cat.PRECISION_TOO_LOW else report.category,
                               f"alpha={alpha}, beta={beta} at {shape_str(shape)}: {report.message}",
                               ["C must equal alpha*A@B + beta*C_old; beta == 0 means C_old is not read "
                                "(it may hold NaN)"])


def check_deterministic(h: Harness, shape: Shape, runs: int = 3) -> None:
    """Random (inexact) inputs so summation order shows: every launch bit-identical."""
    import cupy

    from .diagnose import compare_runs
    from .inputs import random_inputs

    problem = random_inputs(*shape, precision=h.kernel.precision, distribution="uniform", seed=4)
    first = _run(h, problem).c
    for _ in range(runs - 1):
        again = _run(h, problem).c
        if not bool(cupy.array_equal(first.view(cupy.uint32), again.view(cupy.uint32))):
            d = compare_runs(_to_numpy(first), _to_numpy(again))
            raise GemmCheckFailure(cat.NONDETERMINISTIC, d.summary if d else "outputs differ between launches",
                                   d.details if d else [])


def assert_accurate_problem(got: Any, problem: Any, precision: str | None = None,
                            alpha: float = 1.0, beta: float = 0.0) -> Any:
    """Accuracy of ``got`` against the float64 reference of ``problem``, within the
    K- and precision-derived bound (bounds.py); returns the AccuracyReport."""
    from .bounds import check_accuracy
    from .reference import abs_product, reference

    xp = np
    if type(got).__module__.startswith("cupy"):
        import cupy as xp  # type: ignore[no-redef]
    a64, b64 = xp.asarray(problem.a64), xp.asarray(problem.b64)
    c0 = None if problem.c0 is None or beta == 0 else xp.asarray(problem.c0, dtype=xp.float64)
    ref = reference(a64, b64, alpha=alpha, beta=beta, c0=c0, xp=xp)
    gauge = abs(alpha) * abs_product(a64, b64, xp=xp)
    if c0 is not None:
        gauge = gauge + abs(beta) * xp.abs(c0)
    report = check_accuracy(got, ref, gauge, problem.k, precision or problem.precision, xp=xp)
    if report.category is not None:
        raise GemmCheckFailure(report.category, report.message, [])
    return report


def check_accuracy_random(h: Harness, shape: Shape, distribution: str) -> None:
    """Random inputs: error within the bound for the declared precision."""
    from .inputs import random_inputs

    problem = random_inputs(*shape, precision=h.kernel.precision, distribution=distribution, seed=5)
    result = _run(h, problem)
    assert_accurate_problem(result.c, problem)


_LAUNCH_RESOURCE_SHAPE = (64, 64, 64)  # the shape the launch check runs; occupancy is reported there


def check_launch(h: Harness, record: Callable[[dict[str, Any]], None]) -> None:
    """Compiles and launches on this device; records registers, spills, shared memory, occupancy."""
    from .inputs import exact_inputs

    problem = exact_inputs(64, 64, 64, precision=h.kernel.precision)
    _run(h, problem)
    info: dict[str, Any] = {"arch": h.device.arch}
    compiled = h.loaded.compiled
    if compiled is not None:
        res = compiled.resources
        info.update(registers=res.registers, spill_stores=res.spill_stores, spill_loads=res.spill_loads,
                    stack_frame=res.stack_frame)
    attrs = h.loaded.attributes(*_LAUNCH_RESOURCE_SHAPE)
    if attrs is not None:
        info.update(registers=attrs.registers, shared_static=attrs.shared_static, local_bytes=attrs.local_bytes,
                    blocks_per_sm=attrs.blocks_per_sm, occupancy=round(attrs.occupancy, 3),
                    dynamic_shared=h.kernel.dynamic_shared_mem(*_LAUNCH_RESOURCE_SHAPE))  # type: ignore[union-attr]
    record({"resources": info})
