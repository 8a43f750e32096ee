"""A GPU for tests that have none: run the whole plugin (collection, sandboxes, timeouts, the
GPU lock, records, reports, the gradebook) on fake checks.

- As a pytest plugin (``-p fakegpu``) it makes ``gemm_check`` find a device (an H200's
  figures) instead of skipping.
- As the sandbox's dispatch test hook (``PYTEST_GEMM_DISPATCH=fakegpu:run_check``) it runs
  fake checks in the kernel's child: what a check does is decided by the kernel's name
  (``FAKE_KERNELS`` below): finish at once, hang, hang only above a size, fault (always, or
  only at M == 1), end the process, run out of memory in the harness or in the launcher, or
  take a while. ``release_memory`` counts its calls.
  With ``FAKEGPU_LOG=path`` every check (and every prepare, as check "prepare") appends one
  line: kernel, check, pid, the releases this process made before it, how many sandbox
  children its parent has alive, start and end times. ``FAKEGPU_PREPARE_S`` makes prepare slow;
  ``FAKEGPU_STREAK`` sets the checks a kernel may fault or hang in before the rest are not run.

``env(tmp_path)`` is the environment a subprocess (pytester, the gradebook) needs for both.
"""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent

FAKE_KERNELS = '''
from pytest_gemm import kernel


def _declare(name):
    @kernel(name=name)
    def fake(a, b, c):
        raise AssertionError("the fake dispatcher never launches a kernel")
    return fake


ok = _declare("ok")
hang = _declare("hang")                    # every check hangs
hang_big = _declare("hang_big")            # hangs when M*N*K > 64**3, finishes below
harness_oom = _declare("harness_oom")      # the harness runs out of memory, every time
harness_oom_once = _declare("harness_oom_once")  # ... only on the first attempt in a process
launcher_oom = _declare("launcher_oom")    # the kernel's own launcher runs out of memory
slow = _declare("slow")                    # every check takes 0.3 s
wrong = _declare("wrong")                  # every check fails with wrong_values
slow2 = _declare("slow2")
crashy = _declare("crashy")                # a CUDA error (a fresh process next time) but in speed
fault = _declare("fault")                  # every check: an illegal address (the process is replaced)
fault_m1 = _declare("fault_m1")            # an illegal address only when M == 1, right elsewhere
fault_small = _declare("fault_small")      # an illegal address when a dimension is below 128, right elsewhere
exits = _declare("exits")                  # every check: the process ends (os._exit(3))
off_stream = _declare("off_stream")        # the launch check finds its work off the caller's stream (wrong_stream)
everything = [ok, hang, hang_big, harness_oom, harness_oom_once, launcher_oom, slow, wrong]
oks = [_declare(f"ok{i}") for i in range(6)]
'''


class OutOfMemoryError(MemoryError):
    """Named and placed like cupy.cuda.memory.OutOfMemoryError."""


OutOfMemoryError.__module__ = "cupy.cuda.memory"


class CUDARuntimeError(RuntimeError):
    """Named like CuPy's: the child treats it as a poisoned CUDA context."""


_RELEASES = [0]
_ATTEMPTS = [0]


def device() -> Any:
    from pytest_gemm.kernels.device import GemmDevice

    return GemmDevice(index=0, name="Fake H200", compute_capability=(9, 0), sm_count=132,
                      shared_mem_per_block=48 * 1024, shared_mem_per_block_optin=227 * 1024,
                      shared_mem_per_sm=228 * 1024, registers_per_sm=65536, registers_per_block=65536,
                      max_threads_per_sm=2048, l2_bytes=60 * 2 ** 20, clock_mhz=1980.0,
                      memory_clock_mhz=3201.0, memory_bus_width=6144, total_memory=141 * 2 ** 30)


def pytest_configure(config: Any) -> None:
    import pytest_gemm.runner.fixtures as fixtures

    fixtures.require_device = device  # type: ignore[assignment]
    streak = os.environ.get("FAKEGPU_STREAK")
    if streak:  # a test that needs a kernel's every check run even if all its first ones fault
        from pytest_gemm.checks import hangs

        hangs.HANG_STREAK = int(streak)


def live_siblings() -> int:
    """Sandbox children of this process's parent that are alive (this one included)."""
    parent, count = os.getppid(), 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[1]) == parent and fields[0] != "Z" and b"sandbox_child" in cmdline:
            count += 1
    return count


def run_check(kernel: Any, check: str, shape: list[int], params: dict[str, Any], options: dict[str, Any],
              facts: dict[str, Any]) -> dict[str, Any]:
    import contextlib

    from pytest_gemm.measure.gpu_lock import gpu_lock

    log = os.environ.get("FAKEGPU_LOG")
    # like checks/speed.py: a timed check takes the GPU lock itself, exclusively, for its timings
    with gpu_lock(True) if check in ("speed", "sweep") else contextlib.nullcontext():
        started = time.time()
        try:
            return _run_check(kernel, check, shape, facts)
        finally:
            _log(log, kernel, check, started)


def _log(log: str | None, kernel: Any, check: str, started: float) -> None:
    if log:
        with open(log, "a") as fh:
            fh.write(f"{kernel.name} {check} {os.getpid()} {_RELEASES[0]} {live_siblings()} "
                     f"{started:.6f} {time.time():.6f}\n")


def _run_check(kernel: Any, check: str, shape: list[int], facts: dict[str, Any]) -> dict[str, Any]:
    from pytest_gemm.checks.sandbox_child import KernelCall
    from pytest_gemm.model.categories import GemmCheckFailure

    name = kernel.name
    facts.update(pid=os.getpid(), releases=_RELEASES[0])
    m, n, k = shape
    if check == "speed":
        facts.update(timing={"shape": shape, "median_ms": 1.0, "min_ms": 1.0, "spread": 0.0, "tflops": 1.0},
                     fraction_of_cublas=0.5)
        if os.environ.get("FAKEGPU_SPEED"):
            facts.update(_fake_times(name, float(os.environ["FAKEGPU_SPEED"]), shape))
    if name == "hang" or (name == "hang_big" and m * n * k > 64 ** 3):
        time.sleep(3600)
    elif name == "harness_oom" or (name == "harness_oom_once" and _ATTEMPTS[0] == 0):
        _ATTEMPTS[0] += 1
        raise OutOfMemoryError("Out of memory allocating 1,073,741,824 bytes (allocated so far: 12 MB)")
    elif name == "launcher_oom":
        def launcher() -> None:
            raise OutOfMemoryError("Out of memory allocating 8,589,934,592 bytes (the launcher's workspace)")
        KernelCall(launcher)()
    elif name == "fault" or (name == "fault_m1" and m == 1) or (name == "fault_small" and min(m, n, k) < 128):
        raise CUDARuntimeError("cudaErrorIllegalAddress: an illegal memory access was encountered")
    elif name == "exits":
        os._exit(3)
    elif name == "crashy" and check != "speed":
        raise CUDARuntimeError("cudaErrorIllegalAddress: an illegal memory access was encountered")
    elif name in ("slow", "slow2", "crashy"):
        time.sleep(0.3)
    elif name == "wrong":
        raise GemmCheckFailure("wrong_values", f"{check} at {shape}: rows 0..3 of C are wrong", [])
    elif name == "off_stream" and check == "launch":  # what checks/launch.py raises, with its words
        from pytest_gemm.checks.launch import STREAM_FIXES, STREAM_HINT

        raise GemmCheckFailure("wrong_stream", f"'off_stream' at {m}x{n}x{k}: the launcher wrote C on another stream "
                               "while the current stream was still held", [STREAM_HINT, *STREAM_FIXES])
    return facts


def _fake_times(name: str, factor: float, shape: list[int]) -> dict[str, Any]:
    """``FAKEGPU_SPEED=factor``: 50 per-call times around ``factor`` ms (0.2 % noise, seeded by
    the kernel's name and ``FAKEGPU_SEED``) and cuBLAS's around 0.5 ms, for --gemm-compare."""
    import random
    import statistics

    rng = random.Random(f"{name}-{os.environ.get('FAKEGPU_SEED', '0')}")
    times = [round(factor * (1 + 0.002 * rng.gauss(0, 1)), 6) for _ in range(50)]
    cublas = [round(0.5 * (1 + 0.002 * rng.gauss(0, 1)), 6) for _ in range(50)]
    median, cublas_median = statistics.median(times), statistics.median(cublas)
    return {"timing": {"shape": shape, "median_ms": median, "min_ms": min(times), "spread": 0.0,
                       "tflops": 1.0, "times_ms": times},
            "cublas": {"median_ms": cublas_median, "times_ms": cublas}, "fraction_of_cublas": cublas_median / median}


def prepare(kernel: Any) -> None:
    started = time.time()
    delay = float(os.environ.get("FAKEGPU_PREPARE_S", "0"))
    if delay:
        time.sleep(delay)
    log = os.environ.get("FAKEGPU_LOG")
    if log:
        with open(log, "a") as fh:
            fh.write(f"{kernel.name} prepare {os.getpid()} {_RELEASES[0]} {live_siblings()} "
                     f"{started:.6f} {time.time():.6f}\n")


def release_memory() -> dict[str, int]:
    _RELEASES[0] += 1
    return {"pool_bytes": 1000 * _RELEASES[0]}


def env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """os.environ plus what a subprocess needs to find this module and use it; the GPU lock
    files go to a folder of their own beside ``tmp_path`` (tests running at once must not share
    them, and a run that confines refuses a lock folder a sandbox can read: ``tmp_path`` may be
    on the PYTHONPATH the sandbox binds)."""
    out = dict(os.environ)
    out.pop("PYTEST_ADDOPTS", None)
    out["PYTHONPATH"] = os.pathsep.join([str(HERE), *[p for p in sys.path if p], out.get("PYTHONPATH", "")])
    out["PYTEST_GEMM_DISPATCH"] = "fakegpu:run_check"
    out["PYTEST_GEMM_LOCK_DIR"] = str(tmp_path.parent / f"{tmp_path.name}-locks")
    out.update(extra)
    return out
