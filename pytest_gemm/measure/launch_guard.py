"""Keep the host's launch time out of a timed call.

The start event runs on the GPU as soon as the stream reaches it. If the host then spends
longer launching the call than the GPU has queued work in front of it (cuBLAS's host-side
work, Python, a busy or freshly booted machine), the GPU idles inside the timed region and
the call reads slow: seen on an H200 as cuBLAS fp16 at 4096^3 reading 0.224 ms in one process
and 0.178 ms (what Nsight Compute measures) in the next, while our own kernels, cheaper to
launch, held still.

So before the start event a kernel (``launch_guard.cu``) waits ``wait_us`` on the GPU, and an
event after it tells whether it was still running when the call's launch returned. It takes
every thread slot of every SM (``guard_grid``): work a kernel starts early on another stream
cannot run beside the wait and finish before the timed region begins (a longer wait would
otherwise be a head start to hide work in). If it was not, the launch may have been late: the call is timed again with twice
the wait, up to ``MAX_WAIT_US``; beyond that a late call is kept and counted
(``TimingResult.late_launches``), e.g. for a kernel whose wrapper synchronises the device.
``GuardPolicy`` is the pure part.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from ..kernels.device import describe
from ..kernels.package_kernels import package_function
import numpy as np

START_WAIT_US = 200.0   # a cuBLAS call's host side takes tens of microseconds
MAX_WAIT_US = 6400.0    # five doublings; past this, late calls are kept and counted


@dataclass
class GuardPolicy:
    """How long the guard waits, and what a late launch does to it."""

    wait_us: float = START_WAIT_US
    max_wait_us: float = MAX_WAIT_US
    late_kept: int = 0   # late calls kept because the wait could grow no more

    def retime(self, late: bool) -> bool:
        """True when the call just timed must be timed again (after doubling the wait)."""
        if not late:
            return False
        if self.wait_us < self.max_wait_us:
            self.wait_us = min(2.0 * self.wait_us, self.max_wait_us)
            return True
        self.late_kept += 1
        return False


GUARD_THREADS = 256  # threads per block: 1024, 1536 and 2048 threads per SM are multiples of it


def guard_grid(sm_count: int, max_threads_per_sm: int) -> tuple[int, int]:
    """(blocks, threads per block) that fill every thread slot of every SM."""
    per_sm = max(1, -(-max_threads_per_sm // GUARD_THREADS))
    return sm_count * per_sm, GUARD_THREADS


_GUARDS: dict[int, tuple[Any, tuple[int, int]]] = {}


class LaunchGuard:
    """``hold(stream)`` before the start event, ``late()`` after the call was launched."""

    def __init__(self, policy: GuardPolicy | None = None):
        import cupy  # lazy: CuPy (the plugin loads with no GPU)

        self.policy = policy or GuardPolicy()
        self._done = cupy.cuda.Event(disable_timing=True)
        self._function, self._grid = _guard_for_current_device()

    def hold(self, stream: Any) -> None:
        blocks, threads = self._grid
        self._function((blocks,), (threads,), (np.uint64(int(self.policy.wait_us * 1000)),), stream=stream)
        self._done.record(stream)

    def late(self) -> bool:
        """The guard had already finished when this was asked: the GPU may have waited for the launch."""
        return bool(self._done.done)


def _guard_for_current_device() -> tuple[Any, tuple[int, int]]:
    """``gemm_launch_guard`` compiled for the current device and the grid that fills it, made
    once per process and device (every timed run asks)."""
    import cupy  # lazy: CuPy (the plugin loads with no GPU)


    index = cupy.cuda.Device().id
    if index not in _GUARDS:
        device = describe(index)
        function = package_function(device.arch, "launch_guard.cu", "gemm_launch_guard", block=(GUARD_THREADS,))
        _GUARDS[index] = (function, guard_grid(device.sm_count, device.max_threads_per_sm or 2048))
    return _GUARDS[index]
