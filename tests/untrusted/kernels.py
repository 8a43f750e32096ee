"""Untrusted kernels: each faults, hangs, ends its process or cheats in one way.

The sandbox (pytest_gemm/sandbox.py) runs every kernel's checks in a child
process, so each of these must cost only its own tests: a fault fails the check
that faulted and the next check gets a fresh process, a hang is killed after
``--gemm-timeout``, a process that exits is reported with its exit status. The
cheats are correct wherever correctness is checked and are caught by the speed
check (rotated buffers holding fresh data each call, C poisoned before each
timed call, the last output verified, escaped work and impossible rates
flagged) or by the guard bands. ``tests/test_untrusted_kernels.py`` runs them.

CUDA kernels are ``.cu`` files here (copies of ``healthy.cu`` with one change,
marked ``UNTRUSTED:``); the Python launchers import CuPy inside the function
only, so importing this module never touches CUDA. Each kernel is its own
attribute, so one can be run by hand::

    pytest --gemm-kernel tests/untrusted/kernels.py:side_stream -k speed

``UNTRUSTED`` maps each kernel's name to ``(kernel, category, check)``: the
category it must fail with, in the named check (a bare check name: every case
of it that the test runs).

=================== ========================================================= ========= ===================
kernel              what it does                                              check     category
=================== ========================================================= ========= ===================
illegal_address     stores every output 32 TiB past C                         exact     fault
endless_loop        ``while (true)`` around a volatile store after computing  exact     timeout
misaligned_float4   float4 loads of A from row start + 1 float                exact     fault
device_trap         one thread executes ``trap;`` after computing             exact     fault
calls_exit          Python launcher: prints, then ``os._exit(3)``             exact     fault (status 3)
calls_sys_exit      Python launcher: ``sys.exit(3)``                          exact     fault
side_stream         real work on a ``Stream(non_blocking=True)``, never       speed     timing_escape
                    joined back to the caller's stream
too_fast            cuBLAS (cupy.matmul) on a non-blocking side stream: the   speed     timing_escape
                    timed region sees nothing
cached_result       keeps C per (A, B) address and shape; a repeated address  speed     stale_output
                    gets the cached copy back, whatever the data
first_call_only     computes the first 12 calls of each shape, then returns   speed     stale_output
                    at once (passes every correctness check: all of them at
                    one shape launch it at most 11 times, in any process)
memoized            caches C by address and content (sums of A and B): always speed     timing_escape
                    right, but a hit only copies: faster than the FP32 roof
writes_into_harness also stores C's last row in the N floats after C          guards    out_of_bounds_write
modifies_inputs     Python launcher: computes, then zeroes A                  guards    input_modified
=================== ========================================================= ========= ===================

``NEUTRALIZED`` holds ``head_start``: late launches until the launch guard waits its longest,
then the real work started on a side stream during that wait and joined back. Nothing about it
is wrong or escapes; the guard, which takes every SM, gives it no head start, so it must time
like ``healthy``.

``PARTIAL`` holds ``faults_at_m1``: ``healthy`` except that with M == 1 it stores 32 TiB past
C, so every check at M == 1 faults and every other must pass (a kernel that faults at some
shapes only is never cut off and earns every check it passes).

``CORRECT`` holds ``healthy`` (16x16 tiles, any shape), which must pass every
check in the same run as the kernels that fault, hang and exit.

cached_result is also wrong wherever the memory pool hands a freed address to
new data of the same shape in a correctness check (the accuracy checks, which
run two input sets at one shape): the tests run it on one exact case and the
speed check only.
"""
from __future__ import annotations

import os
import sys
from typing import Any

from pytest_gemm import CudaKernel, kernel

TILE = (16, 16)


def _cuda(name: str, **kwargs: Any) -> CudaKernel:
    """A 16x16-tiled kernel from ``<name>.cu``, entry ``mm_<name>``."""
    kwargs.setdefault("tile", TILE)
    return CudaKernel(source=f"{name}.cu", entry=f"mm_{name}", block=(16, 16), name=name, **kwargs)


# -- correct ------------------------------------------------------------------------
healthy = _cuda("healthy")


def _real_work(a: Any, b: Any, c: Any) -> None:
    """``healthy`` on the current stream: the honest part of every Python cheat."""
    from pytest_gemm.kernels.device import require_device
    from pytest_gemm.kernels.launch import load

    m, k = a.shape
    n = b.shape[1]
    if not getattr(healthy, "_gemm_validated", False):
        healthy.validate()
        healthy._gemm_validated = True  # type: ignore[attr-defined]
    load(healthy, require_device())(a, b, c, m, n, k)


_STREAMS: dict[tuple[str, int], Any] = {}


def _non_blocking_stream(purpose: str) -> Any:
    """One ``Stream(non_blocking=True)`` per purpose and device, made once."""
    import cupy

    key = (purpose, cupy.cuda.Device().id)
    if key not in _STREAMS:
        _STREAMS[key] = cupy.cuda.Stream(non_blocking=True)
    return _STREAMS[key]


def _side_stream() -> Any:
    """A non-blocking stream whose start is ordered after the caller's stream, so the inputs
    are ready, but nothing orders the caller after it."""
    import cupy

    side = _non_blocking_stream("side")
    side.wait_event(cupy.cuda.get_current_stream().record())
    return side


# -- faults and hangs (CUDA) --------------------------------------------------------
illegal_address = _cuda("illegal_address")
endless_loop = _cuda("endless_loop")
misaligned_float4 = _cuda("misaligned_float4")
device_trap = _cuda("device_trap")
writes_into_harness = _cuda("writes_into_harness")
faults_at_m1 = _cuda("faults_at_m1")


# -- the process ends (Python) ---------------------------------------------------------
@kernel(name="calls_exit")
def calls_exit(a: Any, b: Any, c: Any) -> None:
    """Ends the process with status 3, as a C extension calling exit(3) would."""
    print("calls_exit: giving up on this GEMM, ending the process with status 3", flush=True)
    os._exit(3)


@kernel(name="calls_sys_exit")
def calls_sys_exit(a: Any, b: Any, c: Any) -> None:
    """Raises SystemExit(3) from inside the launcher."""
    sys.exit(3)


# -- cheats (Python) --------------------------------------------------------------------
@kernel(name="side_stream")
def side_stream(a: Any, b: Any, c: Any) -> None:
    """Launches the real work on a non-blocking stream and returns without joining it."""
    with _side_stream():
        _real_work(a, b, c)  # UNTRUSTED: the caller's stream never waits for this


@kernel(name="too_fast")
def too_fast(a: Any, b: Any, c: Any) -> None:
    """cuBLAS, on a non-blocking side stream: the timed region sees nothing."""
    import cupy

    with _side_stream():
        cupy.matmul(a, b, out=c)  # UNTRUSTED: not joined back to the caller's stream


_CACHED: dict[tuple[Any, ...], Any] = {}


@kernel(name="cached_result")
def cached_result(a: Any, b: Any, c: Any) -> None:
    """Remembers C per input address: a call with addresses seen before gets the copy back."""
    key = (a.data.ptr, b.data.ptr, a.shape, b.shape)
    if key in _CACHED:
        c[...] = _CACHED[key]  # UNTRUSTED: same address, so "same inputs"
        return
    _real_work(a, b, c)
    _CACHED[key] = c.copy()


_CALLS_PER_SHAPE: dict[tuple[Any, ...], int] = {}
# More than all the correctness checks at one shape launch together (at most 11, at 1000^3: xdist
# may run them all in one kernel process, in any order), fewer than the speed check's 100 timed
# calls: with 8, the determinism check's last launches were left unwritten whenever it followed
# the exact, coverage and guards checks of its shape in one process (a flaky GPU test).
FIRST_CALLS = 12  # above the 11 calls of every correctness check at one shape, at most the speed check's fewest timed calls


@kernel(name="first_call_only")
def first_call_only(a: Any, b: Any, c: Any) -> None:
    """Computes the first FIRST_CALLS calls of each shape, then assumes C already holds the answer."""
    shape = (a.shape, b.shape)
    _CALLS_PER_SHAPE[shape] = _CALLS_PER_SHAPE.get(shape, 0) + 1
    if _CALLS_PER_SHAPE[shape] > FIRST_CALLS:
        return  # UNTRUSTED: "a benchmark loop: the result is already there"
    _real_work(a, b, c)


_MEMO: dict[tuple[Any, ...], Any] = {}


@kernel(name="memoized")
def memoized(a: Any, b: Any, c: Any) -> None:
    """Caches C by input address and content fingerprint: never wrong, but a hit is only a copy."""
    import cupy

    key = (a.data.ptr, b.data.ptr, a.shape, b.shape,
           float(a.sum(dtype=cupy.float64)), float(b.sum(dtype=cupy.float64)),
           float((a * a).sum(dtype=cupy.float64)), float((b * b).sum(dtype=cupy.float64)))
    if key in _MEMO:
        c[...] = _MEMO[key]  # UNTRUSTED: the work was done on some earlier call
        return
    _real_work(a, b, c)
    _MEMO[key] = c.copy()


@kernel(name="modifies_inputs")
def modifies_inputs(a: Any, b: Any, c: Any) -> None:
    """Computes, then zeroes A ("done with it")."""
    _real_work(a, b, c)
    a.fill(0)  # UNTRUSTED: A belongs to the caller


_HEAD_START_CALLS: dict[tuple[Any, ...], int] = {}
LATE_CALLS = 8  # enough late launches for the harness's launch guard to reach its longest wait
HEAD_START_POLL_S = 0.003  # under the guard's longest wait (6.4 ms): the work still starts inside it


@kernel(name="head_start")
def head_start(a: Any, b: Any, c: Any) -> None:
    """Launches late on purpose (a device synchronise first) until the harness's launch guard
    waits its longest, then starts the real work on a side stream that does not wait for the
    caller, while the guard's wait is still running, and joins it back: without a guard that
    takes the whole GPU, much of the work would be done before the start event."""
    import time

    import cupy

    shape = (a.shape, b.shape)
    calls = _HEAD_START_CALLS[shape] = _HEAD_START_CALLS.get(shape, 0) + 1
    caller = cupy.cuda.get_current_stream()
    if calls <= LATE_CALLS:
        cupy.cuda.runtime.deviceSynchronize()  # UNTRUSTED: a late launch makes the guard wait longer
        _real_work(a, b, c)
        return
    # What the caller queued before this call: the harness's inputs, then (in a timed call) the
    # launch guard's wait, at its longest (6.4 ms) after the late calls. Wait for it a while: where it
    # ends (no guard: the call once more with A negated after the timed calls), the inputs are in
    # place; where it does not, a guard is still waiting and the work starts now, in its wait. A
    # fixed 0.5 ms sleep raced the harness's negation of A on a GPU shared with the suite's other runs
    # (stale_output, H100 at 1e3052f): a data race of this stand-in, not the head start it stands for.
    queued = caller.record()
    deadline = time.perf_counter() + HEAD_START_POLL_S
    while not queued.done and time.perf_counter() < deadline:
        time.sleep(0.0001)
    side = _non_blocking_stream("head_start")  # not _side_stream(): that one waits for the caller
    with side:
        _real_work(a, b, c)  # UNTRUSTED: starts now, not after the caller's queued work
    caller.wait_event(side.record())  # joined: nothing escapes, the output is right


UNTRUSTED: dict[str, tuple[Any, str, str]] = {
    "illegal_address": (illegal_address, "fault", "exact"),
    "endless_loop": (endless_loop, "timeout", "exact"),
    "misaligned_float4": (misaligned_float4, "fault", "exact"),
    "device_trap": (device_trap, "fault", "exact"),
    "calls_exit": (calls_exit, "fault", "exact"),
    "calls_sys_exit": (calls_sys_exit, "fault", "exact"),
    "side_stream": (side_stream, "timing_escape", "speed"),
    "too_fast": (too_fast, "timing_escape", "speed"),
    "cached_result": (cached_result, "stale_output", "speed"),
    "first_call_only": (first_call_only, "stale_output", "speed"),
    "memoized": (memoized, "timing_escape", "speed"),
    "writes_into_harness": (writes_into_harness, "out_of_bounds_write", "guards"),
    "modifies_inputs": (modifies_inputs, "input_modified", "guards"),
}

CORRECT: dict[str, Any] = {"healthy": healthy}

# Faults at some shapes only: every check at M == 1 faults, every other must pass (it is never
# cut off: a fault costs its own check, not the kernel's others).
PARTIAL: dict[str, Any] = {"faults_at_m1": faults_at_m1}

# Cheats that are not caught but given nothing: they must time like the honest kernel.
NEUTRALIZED: dict[str, Any] = {"head_start": head_start}

ALL: dict[str, Any] = {**{name: k for name, (k, _, _) in UNTRUSTED.items()}, **CORRECT, **NEUTRALIZED, **PARTIAL}

for _name, _kernel in ALL.items():
    assert _kernel.name == _name and globals()[_name] is _kernel, _name
