"""Does a Python launcher do its work on the current stream?

A launcher must enqueue its work on the CuPy stream that is current when it is
called (with torch: ``torch.cuda.ExternalStream(cupy.cuda.get_current_stream().ptr)``):
only then is it ordered after the caller's uploads and before the caller's reads,
and inside the caller's timed region. The probe makes a non-blocking stream current
and holds it with a GPU-side wait (``stream_probe.cu``) while the launcher runs, so
nothing the launcher puts on that stream can start. If C changes while the stream is
still held, the launcher ran work elsewhere (its own stream, the legacy default
stream, another thread). A launcher that waits for its own work (synchronizes the
current stream or the device) would wait for the hold: a watchdog releases it after
``RELEASE_S`` and the probe then says nothing either way. So does a launcher whose kernels
are loaded for the first time while the stream is held (lazy module loading waits for the
hold): the launch check runs the launcher once before the probe, so its kernels are loaded.
"""
from __future__ import annotations

import ctypes
import threading
import time
from typing import Any, Callable
from .package_kernels import package_function

RELEASE_S = 2.0     # a launcher that waits on the held stream is released after this
WATCH_S = 0.25      # how long C is watched for writes from other streams
_HOLD: dict[str, Any] = {}


def _hold_function(arch: str) -> Any:
    if arch not in _HOLD:
        _HOLD[arch] = package_function(arch, "stream_probe.cu", "gemm_stream_hold", package="pytest_gemm.kernels")
    return _HOLD[arch]


def run_held(arch: str, launch: Callable[[], None], c: Any) -> str | None:
    """Call ``launch`` with a held non-blocking stream current; return a message when C
    changed before the stream was released (work outside the current stream), else None."""
    import cupy  # lazy: CuPy (the plugin loads with no GPU)

    host = cupy.cuda.runtime.hostAlloc(4, 2)  # cudaHostAllocMapped: the GPU reads the flag directly
    flag = ctypes.c_int32.from_address(host)
    flag.value = 0
    try:
        device_ptr = host  # unified addressing: a mapped host allocation has the same address on the GPU
        held = cupy.cuda.Stream(non_blocking=True)
        side = cupy.cuda.Stream(non_blocking=True)
        cupy.cuda.runtime.deviceSynchronize()
        before = c.copy()

        def changed_now() -> bool:
            with side:
                differs = bool((c.view(cupy.uint32) != before.view(cupy.uint32)).any())
            side.synchronize()
            return differs

        # Load the comparison's kernels now: with lazy module loading, loading a module while
        # the hold spins waits for it, and the watch below would see nothing until the release.
        changed_now()
        cupy.cuda.runtime.deviceSynchronize()
        _hold_function(arch)((1,), (1,), (cupy.uint64(device_ptr),), stream=held)
        released = threading.Event()

        def release() -> None:
            flag.value = 1
            released.set()

        watchdog = threading.Timer(RELEASE_S, release)
        watchdog.start()
        try:
            with held:
                launch()
            waited = released.is_set()  # the launcher waited for the held stream: no verdict
            changed = False
            deadline = time.monotonic() + WATCH_S
            while not waited and not changed and time.monotonic() < deadline:
                changed = changed_now()
                if not changed:
                    time.sleep(0.01)
            still_held = not released.is_set()
        finally:
            watchdog.cancel()
            release()
            cupy.cuda.runtime.deviceSynchronize()
    finally:
        cupy.cuda.runtime.freeHost(host)
    if changed and still_held:
        return ("the launcher wrote C on another stream while the current stream was still held: its work is "
                "not ordered on the caller's stream (the harness's uploads, timing and reads)")
    return None
