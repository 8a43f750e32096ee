"""Load a kernel on the GPU and launch it on CuPy arrays.

CudaKernels are compiled by compiler.py (NVRTC) for the device's architecture
and the cubin is loaded through CuPy; PyKernels are simply called. Needs a GPU.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .compiler import CompileResult, compile_for_arch
from .cubin import load_cubin_function
from ..model.contract import CudaKernel, GemmKernel, PyKernel
from ..model.declaration import EmptyGridError
from .device import GemmDevice


_STREAMS: dict[int, Any] = {}


def describe_returned(value: Any) -> str:
    """What a launcher call returned, in a few words ("a cupy.ndarray of shape (4, 5)")."""
    try:
        shape = getattr(value, "shape", None)
        what = f"a {type(value).__module__.split('.')[0]}.{type(value).__name__}" \
            + (f" of shape {tuple(shape)}" if shape is not None else "")
    except Exception:  # noqa: BLE001 - whatever it returned, the check's own verdict stands
        what = "a value"
    return what[:160]


def _address(x: Any) -> int | None:
    """Where an array's data starts (CuPy, torch, Numba and numpy arrays say so), or None."""
    for name in ("__cuda_array_interface__", "__array_interface__"):
        try:
            return int(getattr(x, name)["data"][0])
        except Exception:  # noqa: BLE001 - not an array of that kind (a CPU tensor raises here)
            continue
    return None


def may_be_product(value: Any, c: Any) -> bool:
    """Whether a launcher's return ``value`` may be the product it should have written into ``c``:
    an array that is not ``c`` itself. ``cupy.matmul(a, b, out=c)`` returns ``c`` (torch's ``out=`` returns
    a tensor on c's memory), and Triton's ``kernel[grid](...)`` its compiled kernel, no array."""
    if value is None or value is c or getattr(value, "shape", None) is None:
        return False
    where = _address(value)
    return where is None or where != _address(c)


def _launcher_stream() -> Any:
    """The stream current while a Python launcher runs (one per device, kept for the process);
    the stream probe (stream_probe.py) swaps in a held one of its own."""
    import cupy  # lazy: CuPy (the plugin loads with no GPU)

    device = cupy.cuda.runtime.getDevice()
    current = cupy.cuda.get_current_stream()
    if current.ptr != 0:  # someone (the stream probe) made a stream current: keep it
        return current
    if device not in _STREAMS:
        _STREAMS[device] = cupy.cuda.Stream()
    return _STREAMS[device]


@dataclass
class KernelAttributes:
    """What the driver reports for a loaded CUDA kernel, plus occupancy."""

    registers: int
    local_bytes: int
    shared_static: int
    max_threads: int
    blocks_per_sm: int
    occupancy: float  # resident warps / max warps per SM


class LoadedKernel:
    """A kernel ready to launch: ``loaded(a, b, c, m, n, k, alpha=1.0, beta=0.0)``."""

    #: What a Python launcher's last call returned that may be its product, described (None until one
    #: does; checks/dispatch.py resets it per check): returning the product instead of writing it
    #: into c is a common first slip, and C then reads as never written.
    returned: str | None = None

    def __init__(self, kernel: GemmKernel, device: GemmDevice):
        self.kernel = kernel
        self.device = device
        self.compiled: CompileResult | None = None
        self._function: Any = None
        if isinstance(kernel, CudaKernel):
            self._load_cuda(kernel)

    def _load_cuda(self, kernel: CudaKernel) -> None:
        self.compiled = compile_for_arch(kernel, self.device.arch)
        self._function = load_cubin_function(self.compiled.code, self.compiled.lowered_name)

    def fresh(self) -> "LoadedKernel":
        """The same kernel with a fresh call history: a CUDA kernel's code loaded again as a new
        module (its ``__device__`` variables start from their initial values); a Python
        launcher's state cannot be reset in this process, so it is returned as it is."""
        if self.compiled is None:
            return self
        again = object.__new__(LoadedKernel)
        again.kernel, again.device, again.compiled = self.kernel, self.device, self.compiled
        again._function = load_cubin_function(self.compiled.code, self.compiled.lowered_name)
        return again

    def prepare(self, m: int, n: int, k: int) -> None:
        """Raise the dynamic shared-memory limit when a launch needs more than 48 KB."""
        if isinstance(self.kernel, CudaKernel):
            smem = self.kernel.dynamic_shared_mem(m, n, k)
            if smem > 48 * 1024 and self._function.max_dynamic_shared_size_bytes < smem:
                self._function.max_dynamic_shared_size_bytes = smem

    def __call__(self, a: Any, b: Any, c: Any, m: int, n: int, k: int,
                 alpha: float = 1.0, beta: float = 0.0) -> None:
        kernel = self.kernel
        if isinstance(kernel, PyKernel):
            # A non-default current stream, as a caller's would be; blocking, so the legacy
            # default stream the timing runs on still waits for it.
            with _launcher_stream():
                value = kernel.fn(a, b, c, alpha, beta) if kernel.takes_alpha_beta else kernel.fn(a, b, c)
            if may_be_product(value, c):
                self.returned = describe_returned(value)
            return
        values = {"A": a, "B": b, "C": c, "M": np.int32(m), "N": np.int32(n), "K": np.int32(k),
                  "alpha": np.float32(alpha), "beta": np.float32(beta)}
        args = tuple(values[t] for t in kernel.tokens)
        self.prepare(m, n, k)
        try:
            grid = kernel.launch_grid(m, n, k, self.device)
        except EmptyGridError:
            return  # CUDA refuses an empty grid; the kernel simply computes nothing here (C stays unwritten)
        self._function(grid, tuple(kernel.block), args,
                       shared_mem=kernel.dynamic_shared_mem(m, n, k))

    def attributes(self, m: int = 4096, n: int = 4096, k: int = 4096) -> KernelAttributes | None:
        """Registers, local and shared memory from the driver; occupancy at this shape."""
        if self._function is None:
            return None
        fn = self._function
        threads = int(np.prod(self.kernel.block))
        smem = self.kernel.dynamic_shared_mem(m, n, k)  # type: ignore[union-attr]
        blocks = blocks_per_sm(self.device, threads, int(fn.num_regs), int(fn.shared_size_bytes) + smem)
        max_warps = max(1, self.device.max_threads_per_sm // 32)
        return KernelAttributes(
            registers=int(fn.num_regs), local_bytes=int(fn.local_size_bytes),
            shared_static=int(fn.shared_size_bytes), max_threads=int(fn.max_threads_per_block),
            blocks_per_sm=blocks, occupancy=min(1.0, blocks * ((threads + 31) // 32) / max_warps),
        )


def blocks_per_sm(device: GemmDevice, threads: int, registers: int, shared_bytes: int) -> int:
    """Resident blocks per SM, limited by threads, registers (allocated per warp in
    units of 256) and shared memory (1 KB reserved per block on sm_80+)."""
    warps = (threads + 31) // 32
    limits = [device.max_threads_per_sm // max(threads, 1), 32]
    if registers:
        per_warp = -(-registers * 32 // 256) * 256
        limits.append(device.registers_per_sm // (per_warp * warps))
    if shared_bytes:
        reserved = 1024 if device.compute_capability >= (8, 0) else 0
        limits.append(device.shared_mem_per_sm // (shared_bytes + reserved))
    return max(0, min(limits))


_LOADED: dict[tuple[int, int], LoadedKernel] = {}


def load(kernel: GemmKernel, device: GemmDevice) -> LoadedKernel:
    """Compile and load once per kernel per process."""
    key = (id(kernel), device.index)
    if key not in _LOADED:
        _LOADED[key] = LoadedKernel(kernel, device)
    return _LOADED[key]
