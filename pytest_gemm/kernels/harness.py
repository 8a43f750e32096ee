"""Run a kernel once on guarded, poisoned buffers and report what it did.

Every matrix lives in the middle of a larger allocation whose guard bands hold
a byte pattern; C is filled with a sentinel (judges/diagnose.py: FILL_BITS) before the launch. After
the launch we know: C's values, which guard bytes changed (writes outside C),
and whether A or B changed. Needs a GPU (CuPy).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..model.contract import GemmKernel
from .device import GemmDevice
from ..judges.sentinels import fill
from ..judges.inputs import GemmProblem
from .launch import LoadedKernel, load
from ..model import categories as cat
from ..model.categories import GemmCheckFailure
from .compiler import GemmCompileError

GUARD_BYTE = 0xFF  # all-ones: NaN in fp32, fp16 and bf16, so a read past the end shows too
ALIGN = 256  # cudaMalloc alignment: keep every matrix start 256-byte aligned for float4 kernels


def _guard_bytes(rows_hint: int, row_bytes: int) -> int:
    """Room for a kernel that ignores its ragged edge: up to 128 extra rows."""
    size = max(4096, 128 * rows_hint * row_bytes)
    return -(-size // ALIGN) * ALIGN


@dataclass
class GuardDamage:
    before: int        # bytes changed in the guard in front of the buffer
    after: int         # bytes changed behind it
    first_after: int   # offset (bytes past the end) of the first changed byte behind, or -1
    last_after: int
    first_before: int  # bytes before the start of the nearest changed byte in front, or -1


class GuardedMatrix:
    """A device matrix with guard bands; ``.array`` is the (rows, cols) view the kernel sees."""

    def __init__(self, host: np.ndarray, guard: int):
        import cupy  # lazy: CuPy (the plugin loads with no GPU)

        host = np.ascontiguousarray(host)
        self.nbytes = host.nbytes
        self.guard = guard
        self.raw = cupy.full(guard + self.nbytes + guard, GUARD_BYTE, dtype=cupy.uint8)
        body = self.raw[guard:guard + self.nbytes]
        self.array = body.view(host.dtype).reshape(host.shape)
        self.array.set(host)  # cupy: host -> this view, in place
        self.original = self.array.copy()

    def damage(self) -> GuardDamage:
        import cupy  # lazy: CuPy (the plugin loads with no GPU)

        front = self.raw[: self.guard] != GUARD_BYTE
        back = self.raw[self.guard + self.nbytes:] != GUARD_BYTE
        n_front, n_back = int(front.sum()), int(back.sum())
        first_after = last_after = first_before = -1
        if n_back:
            idx = cupy.nonzero(back)[0]
            first_after, last_after = int(idx[0]), int(idx[-1])
        if n_front:
            idx = cupy.nonzero(front)[0]
            first_before = self.guard - int(idx[-1])
        return GuardDamage(n_front, n_back, first_after, last_after, first_before)

    def changed(self) -> tuple[int, tuple[int, ...] | None]:
        """How many elements differ bitwise from the uploaded values, and the first one's index."""
        import cupy  # lazy: CuPy (the plugin loads with no GPU)

        width = {1: cupy.uint8, 2: cupy.uint16, 4: cupy.uint32, 8: cupy.uint64}[self.array.dtype.itemsize]
        diff = self.array.view(width) != self.original.view(width)
        count = int(diff.sum())
        if not count:
            return 0, None
        first = int(cupy.argmax(diff.ravel()))
        return count, tuple(int(i) for i in np.unravel_index(first, self.array.shape))


@dataclass
class LaunchResult:
    c: Any                  # CuPy float32 (M, N): what the kernel left in C
    c_guard: GuardDamage
    a_guard: GuardDamage
    b_guard: GuardDamage
    a_changed: tuple[int, tuple[int, ...] | None]
    b_changed: tuple[int, tuple[int, ...] | None]


class Harness:
    """Launches one kernel on guarded buffers."""

    def __init__(self, kernel: GemmKernel, device: GemmDevice):
        self.kernel = kernel
        self.device = device
        self.loaded: LoadedKernel = load(kernel, device)

    def upload(self, problem: GemmProblem, c_init: np.ndarray | None = None) -> tuple[GuardedMatrix, GuardedMatrix, GuardedMatrix]:
        m, n, k = problem.m, problem.n, problem.k
        a = GuardedMatrix(problem.a, _guard_bytes(1, problem.a.itemsize * k))
        b = GuardedMatrix(problem.b, _guard_bytes(1, problem.b.itemsize * n))
        if c_init is None:
            c_init = fill((m, n))
        c = GuardedMatrix(c_init.astype(np.float32), _guard_bytes(1, 4 * n))
        return a, b, c

    def run(self, problem: GemmProblem, *, alpha: float = 1.0, beta: float = 0.0,
            c_init: np.ndarray | None = None,
            buffers: tuple[GuardedMatrix, GuardedMatrix, GuardedMatrix] | None = None) -> LaunchResult:
        """One launch on fresh guarded buffers; C holds the fill sentinel unless ``c_init`` is given.
        ``buffers`` (from ``upload``): launch on those instead, the problem's values written into
        them first (new inputs at the same addresses, as a caller reusing its buffers does)."""
        import cupy  # lazy: CuPy (the plugin loads with no GPU)

        if buffers is None:
            a, b, c = self.upload(problem, c_init)
        else:
            a, b, c = buffers
            for matrix, host in ((a, problem.a), (b, problem.b),
                                 (c, fill((problem.m, problem.n)) if c_init is None else c_init)):
                matrix.array.set(np.ascontiguousarray(host).astype(matrix.array.dtype, copy=False))
                matrix.original = matrix.array.copy()
        self.loaded(a.array, b.array, c.array, problem.m, problem.n, problem.k, alpha, beta)
        cupy.cuda.runtime.deviceSynchronize()
        return LaunchResult(c.array, c.damage(), a.damage(), b.damage(), a.changed(), b.changed())


_SECRETS: list[Any] = []


def keep_secret(*arrays: Any) -> None:
    """Mark device arrays that hold a right answer (references, cuBLAS outputs): they are
    overwritten by ``scrub_secrets`` at the end of the check, before their memory goes back to
    the pool, so a launcher that allocates without computing cannot find a result there."""
    _SECRETS.extend(a for a in arrays if a is not None and hasattr(a, "view"))


def scrub_secrets() -> None:
    """Overwrite every kept secret (NaN bytes). After a fault the context is gone and so is
    the memory: nothing to scrub, and the check's own failure must not be masked."""
    import cupy  # lazy: CuPy (the plugin loads with no GPU)

    secrets = list(_SECRETS)
    _SECRETS.clear()
    try:
        for array in secrets:
            if array.flags.c_contiguous:
                array.view(cupy.uint8).fill(0xFF)
            else:
                array.fill(float("nan"))
        cupy.cuda.runtime.deviceSynchronize()
    except Exception as exc:  # noqa: BLE001
        if not cat.is_cuda_error(exc):
            raise


_HARNESSES: dict[tuple[int, int], "Harness"] = {}


def harness_for(kernel: GemmKernel, device: GemmDevice) -> Harness:
    """One harness per kernel per process; a compile error fails with compile_error."""

    key = (id(kernel), device.index)
    if key not in _HARNESSES:
        try:
            _HARNESSES[key] = Harness(kernel, device)
        except GemmCompileError as exc:
            raise GemmCheckFailure(cat.COMPILE_ERROR, f"{kernel.name!r} does not compile for {device.arch}",
                                   exc.log.strip().splitlines()) from None
    return _HARNESSES[key]

