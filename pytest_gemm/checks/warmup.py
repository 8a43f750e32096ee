"""Warm-up seen at run time: what a launcher does the first time it meets a shape (Triton
compiling and autotuning, Numba's JIT, CuPy's NVRTC compiles, a torch extension build,
``torch.compile``) is found while it happens, in the kernel's own process, by what its main
thread is running, however the launcher reached it (a module global, an import inside the
function, an attribute set at first call, a method, a wrapper from another package).

- Child side (``checks/sandbox_child.py``): while a check runs, ``watching`` samples the main
  thread's Python stack every ``SAMPLE_S`` (``sys._current_frames``) and ``classify`` names
  the warm-up its frames show, by their modules (``PATTERNS``); with no such frame, a compiler
  running as a child process is one too (``compiling_child``, ``COMPILER_PROCESSES``). It sends ``{"event":
  "warmup", "what", "seconds"}`` when one starts and every ``REPORT_S`` while it lasts, and
  ``{"event": "warmup_end"}`` when the stack leaves it; the reply carries ``warmup_s``.
- Parent side (``checks/sandbox.py``): ``WarmupClock`` stops the check's clock while the child
  warms up and runs the warm-up's own budget instead (``budget_s``: ``PYTEST_GEMM_WARMUP_TIMEOUT``,
  600 s by default), and reports progress (``progress``) to the runner, which writes it on the
  terminal. Warm-up time is never charged to the check's timeout nor to the hang streak
  (``checks/hangs.py`` reads the check's own seconds, which exclude it).

The launch trace's reading of a check's records (``measure/trace.py``'s ``flush``, ``launch_trace``'s
``trace_facts``) is counted the same way: the harness's own work, as long as the launches the
kernel made, not the kernel's time (said on the terminal only past ``PROGRESS_S``).

A main thread blocked in a CUDA call with no such frame (an endless kernel) is no warm-up:
its check times out within its normal budget. Pure but for the thread: ``classify`` is tested
on frames of stand-in modules named like Triton's (``tests/test_warmup.py``).
"""
from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from typing import Any, Callable, Iterator, Sequence

from ..measure.gpu_lock import wait_ended

SAMPLE_S = 0.25         # how often the child looks at its main thread's stack
REPORT_S = 2.0          # how often the child says it is still warming up
PROGRESS_S = 10.0       # how often the parent writes "still warming up" on the terminal
BUDGET_ENV = "PYTEST_GEMM_WARMUP_TIMEOUT"
TRACE_READING = "reading the launch trace"  # the harness's own work: said on the terminal only once it is long
DEFAULT_BUDGET_S = 600.0  # one check's warm-up: 16 Triton configs compiled cold take minutes

# (module prefix, function names or None for any, what it is doing)
PATTERNS: tuple[tuple[str, frozenset[str] | None, str], ...] = (
    ("triton.runtime.autotuner", None, "Triton autotuning"),
    ("triton.testing", frozenset({"do_bench", "do_bench_cudagraph"}), "Triton benchmarking a config"),
    ("triton.compiler", None, "Triton compiling"),
    ("triton.backends", None, "Triton compiling"),
    ("triton.runtime.build", None, "Triton building its launcher"),
    ("triton.runtime.cache", None, "Triton reading its cache"),
    ("numba.core.compiler", None, "Numba JIT compiling"),
    ("numba.core.dispatcher", frozenset({"compile", "_compile_for_args"}), "Numba JIT compiling"),
    ("numba.cuda.compiler", None, "Numba JIT compiling"),
    ("numba.cuda.dispatcher", frozenset({"compile", "_compile_for_args", "compile_device"}), "Numba JIT compiling"),
    ("numba_cuda", frozenset({"compile", "_compile_for_args", "compile_device"}), "Numba JIT compiling"),
    ("cupy.cuda.compiler", None, "CuPy compiling (NVRTC)"),
    ("cuda.core", frozenset({"compile"}), "compiling with NVRTC (cuda.core)"),
    ("pycuda.compiler", None, "PyCUDA compiling"),
    ("torch.utils.cpp_extension", None, "building a torch extension"),
    ("torch._inductor", None, "torch.compile compiling"),
    ("torch._dynamo", None, "torch.compile tracing"),
    # a first call's imports: `import torch, triton` inside the launcher, the usual way to keep
    # them out of the module's import, took 20 s of a 20 s budget in a fresh process on a busy
    # H200 (b9cffe2), and torch's first CUDA call initialises its state for the process
    ("importlib._bootstrap", frozenset({"_find_and_load"}), "importing modules"),
    ("importlib._bootstrap_external", frozenset({"exec_module"}), "importing modules"),  # a module loaded from its path
    ("torch.cuda", frozenset({"_lazy_init"}), "torch initialising CUDA"),
    # the harness's own: the launch trace's records of a first call's search (Triton's tutorial
    # matmul: 20,000 launches at a shape) took 3 to 12 s to read on an idle H100 at c43cd1e, and a
    # check timed out there after its warm-up had ended
    ("pytest_gemm.measure.trace", frozenset({"flush"}), TRACE_READING),
    ("pytest_gemm.checks.launch_trace", frozenset({"trace_facts"}), TRACE_READING),
)

Frame = tuple[str, str]  # (module name, function name)

# A compiler the kernel's process runs as a child (a launcher that calls nvcc itself, a torch
# extension's ninja, Triton's ptxas): seen by the process's name in /proc, whatever Python (or
# compiled code, which leaves no frame: cuda.core's NVRTC binding) started it.
COMPILER_PROCESSES = frozenset({"nvcc", "cicc", "ptxas", "nvlink", "fatbinary", "cudafe++", "nvdisasm", "ninja",
                                "make", "cmake", "cc", "c++", "gcc", "g++", "clang", "clang++", "cc1", "cc1plus",
                                "ld", "collect2", "as", "hipcc"})
_CHILD_DEPTH = 4  # ninja -> nvcc -> cicc: how deep a process's children are looked at


def _label(frame: Frame) -> str | None:
    module, function = frame
    for prefix, functions, what in PATTERNS:
        if (module == prefix or module.startswith(prefix + ".")) and (functions is None or function in functions):
            return what
    return None


def classify(frames: Sequence[Frame]) -> str | None:
    """What the stack ``frames`` (outermost first) is warming up with, or None: the outermost
    warm-up frame names it, the innermost one, when it says something else, what it is at
    ("Triton autotuning (Triton compiling)")."""
    labels = [what for what in map(_label, frames) if what is not None]
    if not labels:
        return None
    return labels[0] if labels[-1] == labels[0] else f"{labels[0]} ({labels[-1]})"


def _children(pid: str) -> list[str]:
    found: list[str] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/children") as fh:
                found += fh.read().split()
        except OSError:
            continue
    return found


def compiling_child(pid: int | None = None) -> str | None:
    """``"compiling (nvcc)"`` while a compiler (``COMPILER_PROCESSES``, by its process name) runs
    among this process's children and theirs, else None (and None where /proc has no children
    lists: not Linux)."""
    level = [str(os.getpid() if pid is None else pid)]
    for _ in range(_CHILD_DEPTH):
        level = [child for parent in level for child in _children(parent)]
        for child in level:
            try:
                with open(f"/proc/{child}/comm") as fh:
                    name = fh.read().strip()
            except OSError:
                continue
            if name in COMPILER_PROCESSES:
                return f"compiling ({name})"
        if not level:
            break
    return None


def stack(frame: Any) -> list[Frame]:
    """(module, function) of ``frame`` and its callers, outermost first."""
    frames = []
    while frame is not None:
        frames.append((str(frame.f_globals.get("__name__", "")), frame.f_code.co_name))
        frame = frame.f_back
    return frames[::-1]


class Watch:
    """The child's watcher of its main thread (``watching``): ``total_s`` of warm-up seen."""

    def __init__(self, send: Callable[[dict[str, Any]], None], thread_id: int, sample_s: float = SAMPLE_S):
        self.send, self.thread_id, self.sample_s = send, thread_id, sample_s
        self.total_s, self.what, self.started, self.said, self.seen = 0.0, None, 0.0, 0.0, 0.0
        self.last = time.monotonic()  # the previous sample
        self.stopped = threading.Event()

    def sample(self, now: float) -> None:
        frame = sys._current_frames().get(self.thread_id)
        what = classify(stack(frame)) if frame is not None else None
        del frame
        if what is None:
            what = compiling_child()
        last, self.last = self.last, now
        if what is not None:
            self.seen = now
            if self.what is None:  # since the previous sample: a compile holding the GIL delays this one
                # but not before a wait for the GPU lock ended: that wait is taken off the check's time
                # already (a fake check importing right after its wait read 0.0 s of its 0.3 s, under load)
                self.what, self.started, self.said = what, max(last, wait_ended()), now
                self.send({"event": "warmup", "what": what, "seconds": round(now - self.started, 3)})
            elif now - self.said >= REPORT_S or what != self.what:
                self.what, self.said = what, now
                self.send({"event": "warmup", "what": what, "seconds": round(now - self.started, 2)})
        elif self.what is not None:
            self.end(now)

    def end(self, now: float) -> None:
        if self.what is not None:
            # it lasted until the last sample that saw it, not this one: the check's own work since
            # then is its time (an import ending just after a sample, then the fake check's 0.3 s
            # sleep, read 0.05 s of its 0.3 s when counted to the next sample: CI at 8874373)
            self.total_s += min(now, self.seen) - self.started
            self.what = None
            self.send({"event": "warmup_end"})

    def run(self) -> None:
        while not self.stopped.wait(self.sample_s):
            self.sample(time.monotonic())


@contextlib.contextmanager
def watching(send: Callable[[dict[str, Any]], None], sample_s: float = SAMPLE_S) -> Iterator[Watch]:
    """Watch this (the main) thread while the body runs; the watch's ``total_s`` is the warm-up seen."""
    watch = Watch(send, threading.get_ident(), sample_s)
    thread = threading.Thread(target=watch.run, name="gemm-warmup-watch", daemon=True)
    thread.start()
    try:
        yield watch
    finally:
        watch.stopped.set()
        thread.join()
        watch.end(time.monotonic())  # the check ended while warming up: count it, and say so before the reply


def budget_s(environ: Any = os.environ) -> float:
    """One check's warm-up budget: ``PYTEST_GEMM_WARMUP_TIMEOUT`` seconds (600 by default)."""
    raw = str(environ.get(BUDGET_ENV, "") or "").strip()
    try:
        value = float(raw) if raw else DEFAULT_BUDGET_S
    except ValueError:
        raise ValueError(f"{BUDGET_ENV}={raw!r}: expected a number of seconds, e.g. {BUDGET_ENV}=900") from None
    return value if value > 0 else DEFAULT_BUDGET_S


class WarmupTimeout(TimeoutError):
    """The child was still warming up when the warm-up budget ran out."""

    def __init__(self, what: str, budget: float):
        super().__init__(what)
        self.what, self.budget = what, budget

    def summary(self, check: str, shape_text: str) -> str:
        return (f"{check} at {shape_text} was still warming up ({self.what}) after {self.budget:.4g} s "
                f"({BUDGET_ENV}); the kernel's process was killed")


class WarmupClock:
    """The parent's side: while the child warms up, the check's clock stops and this one runs."""

    def __init__(self, budget: float, progress: Callable[[str], None] | None = None):
        self.budget, self.progress = budget, progress
        self.used, self.what, self.seconds, self.printed = 0.0, None, 0.0, -PROGRESS_S

    @property
    def warming(self) -> bool:
        return self.what is not None

    def wait(self) -> float:
        """How long to wait for the child's next message while it warms up."""
        return max(0.0, min(self.budget - self.used, PROGRESS_S))

    def spend(self, seconds: float) -> None:
        """``seconds`` passed while warming up; raises WarmupTimeout past the budget."""
        self.used += seconds
        self.seconds += seconds
        if self.used >= self.budget:
            raise WarmupTimeout(str(self.what), self.budget)
        self._say()

    def event(self, message: dict[str, Any]) -> float | None:
        """Take a warm-up event: the seconds of warm-up the check's clock counted before the
        child could say so (its first report: the watcher may wait for a compile that holds the
        GIL); None for any other message."""
        refund = 0.0
        if message.get("event") == "warmup":
            if self.what is None:
                self.seconds = refund = float(message.get("seconds") or 0.0)
                self.used += refund
            self.what = str(message.get("what"))
            seen = getattr(self.progress, "seen", None)  # the runner keeps what a kernel was found doing
            if seen is not None:
                seen(self.what)
            self._say()
            return refund
        if message.get("event") == "warmup_end":
            if self.what is not None and self.progress is not None and self.printed >= 0:
                self.progress(f"done warming up ({self.what}) after {self.seconds:.0f} s")
            self.what, self.printed = None, -PROGRESS_S
            return refund
        return None

    def _say(self) -> None:
        first_line_s = PROGRESS_S if self.what == TRACE_READING else 0.0  # the harness's own: said once long
        if self.progress is not None and self.what is not None and self.seconds >= first_line_s \
                and self.seconds - self.printed >= PROGRESS_S:
            self.printed = self.seconds
            self.progress(f"warming up: {self.what}, {self.seconds:.0f} s so far (not counted in the check's "
                          "timeout)")


__all__ = ["PATTERNS", "COMPILER_PROCESSES", "classify", "compiling_child", "stack", "watching", "Watch",
           "WarmupClock", "WarmupTimeout", "budget_s", "BUDGET_ENV", "DEFAULT_BUDGET_S"]
