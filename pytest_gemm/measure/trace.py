"""The launch trace: every GPU kernel launched during a check, through CUPTI's activity API with
NVIDIA's maintained Python binding (``cupti-python``; docs/launch-trace.md says why).

A ``Tracer`` enables CUPTI's kernel records (``CONCURRENT_KERNEL``: name, grid, block,
registers, shared memory, GPU start and end) for the length of one check, and the driver and
runtime API records of the calls that launch kernels (``not_launching`` switches the others off)
for the length of the check too. Where CUPTI has no per-call switches, or every call's record is
asked for (``PYTEST_GEMM_TRACE_API=all``), the API records are on only while the kernel's
launcher runs: an API record for every call the harness makes (uploads, references, waits) cost
about 1 s a check and 5x the suite's wall time on the H200 at 01dcf62. A launch outside every
call is the harness's own either way. The kernel's launcher is wrapped (``checks/sandbox_child.py``:
``KernelCall``) so that each call's host window is kept (``call_entered`` / ``call_returned``,
CUPTI's own clock); a kernel record belongs to the call in whose window its launch API call
was made (the API record with the same correlation id), whichever thread or stream launched it.
The timed runs (``timing.time_gpu``) mark each call when the harness's wait for it ended
(``call_awaited``). Tracing stays on for every call of a check, the timed ones included, so
the kernel cannot behave one way traced and another untraced.

With no CUPTI (no binding installed, no driver, tracing refused) or with tracing switched off
(``--gemm-trace off``, ``gemm_trace = off``, ``PYTEST_GEMM_TRACE=off``) nothing is traced,
the check records why, and nothing else changes.
"""
from __future__ import annotations

import os
import threading
import time
from typing import Any

from ..judges.launches import CallWindow, Launch
from .trace_records import keep
from dataclasses import replace

TRACE_ENV = "PYTEST_GEMM_TRACE"  # "off" switches the launch trace off (as --gemm-trace off does)
API_ENV = "PYTEST_GEMM_TRACE_API"  # "all": a record of every driver and runtime call in the launcher,
                                   # not of its launching calls only (the default; see not_launching)
_NOT_LAUNCHING: list[tuple[Any, int]] = []  # (its switch, callback id) of every call that launches nothing
OFF_WORDS = ("off", "0", "no", "false")
_BUFFER_BYTES = 8 << 20

_ACTIVE: "Tracer | None" = None
_REGISTERED = False
_LOCK = threading.Lock()


def switched_off(options: dict[str, Any] | None = None) -> str | None:
    """Why tracing is off by choice (option, ini key or environment), or None."""
    choice = str((options or {}).get("trace") or "").strip().lower()
    if choice in OFF_WORDS:
        return "launch trace switched off (--gemm-trace off / gemm_trace = off)"
    if os.environ.get(TRACE_ENV, "").strip().lower() in OFF_WORDS:
        return f"launch trace switched off ({TRACE_ENV}={os.environ[TRACE_ENV]})"
    return None


def _binding() -> tuple[Any, str | None]:
    try:
        # lazy: optional (cupti)
        from cupti import cupti  # NVIDIA's cupti-python
    except Exception as exc:  # noqa: BLE001 - ImportError, or a libcupti that does not load
        return None, (f"no CUPTI: the cupti-python binding could not be imported ({type(exc).__name__}: "
                      f"{str(exc)[:120]}); pip install cupti-python (its major version matching CuPy's CUDA)")
    return cupti, None


def prepare() -> None:
    """CUPTI's start-up (the binding's import, its callbacks, a first enable) in a kernel process's
    start-up, not in its first traced check: it took 10 to 17 s a process there on the H200 at
    `01dcf62` (4 workers), against a check's 20 s timeout. Nothing when tracing is off or impossible."""
    if switched_off() is not None:
        return
    tracer = Tracer()
    if tracer.start():
        tracer.stop()


def active() -> "Tracer | None":
    """The tracer of the check now running in this process, or None."""
    return _ACTIVE


def call_entered() -> None:
    if _ACTIVE is not None:
        _ACTIVE.entered()


def call_returned() -> None:
    if _ACTIVE is not None:
        _ACTIVE.returned()


def call_awaited() -> None:
    if _ACTIVE is not None:
        _ACTIVE.awaited()


class Tracer:
    """One check's CUPTI session: ``start`` / ``stop``, then ``launches`` and ``calls``."""

    def __init__(self) -> None:
        self.cupti, self.reason = _binding()
        self.kernels: list[Launch] = []   # every kernel record (measure/trace_records.py reads them)
        self.api: dict[int, int] = {}      # correlation id -> host start of its API call
        self.windows: list[list[int | None]] = []  # [entered, returned, awaited]
        self.overhead_ns = 0               # host time spent in the launcher's wrappers and flushes
        self.read_ns = 0                   # ... and reading the records CUPTI delivered (any thread)
        self.api_records = 0
        self.whole_check = False           # API records on for the whole check (launching calls only)
        self._kinds: list[Any] = []
        self._flushing: int | None = None  # the thread flushing: its deliveries are in overhead_ns already

    # ---- CUPTI ----
    def _requested(self) -> tuple[int, int]:
        return _BUFFER_BYTES, 0

    def _completed(self, activities: Any) -> None:
        c = self.cupti
        kernel_kinds = (c.ActivityKind.CONCURRENT_KERNEL, c.ActivityKind.KERNEL)
        t0 = time.perf_counter_ns()
        with _LOCK:
            keep(c, activities, kernel_kinds, (c.ActivityKind.DRIVER, c.ActivityKind.RUNTIME), self)
            if self._flushing != threading.get_ident():
                self.read_ns += time.perf_counter_ns() - t0

    def start(self) -> bool:
        """Enable the records; False (and ``reason`` set) when CUPTI cannot trace here."""
        global _ACTIVE, _REGISTERED
        if self.cupti is None:
            return False
        c = self.cupti
        try:
            if not _REGISTERED:
                c.activity_register_callbacks(lambda: _ACTIVE._requested() if _ACTIVE else (_BUFFER_BYTES, 0),
                                              lambda acts: _ACTIVE._completed(acts) if _ACTIVE else None)
                _REGISTERED = True
            c.activity_enable(c.ActivityKind.CONCURRENT_KERNEL)
            self._kinds.append(c.ActivityKind.CONCURRENT_KERNEL)
            self.whole_check = self._launching_calls()
        except Exception as exc:  # noqa: BLE001 - cuptiError: no driver, a profiler already attached, ...
            self.reason = f"CUPTI could not trace here ({type(exc).__name__}: {str(exc)[:160]})"
            self._disable()
            return False
        _ACTIVE = self
        return True

    def _launching_calls(self) -> bool:
        """The API records of the calls that launch kernels, on for the whole check (see
        ``not_launching``); False, and nothing on, where every call's record is asked for
        (``PYTEST_GEMM_TRACE_API=all``) or this CUPTI has no per-call switches: ``_api`` then
        turns every call's records on while the kernel's launcher runs only."""
        if os.environ.get(API_ENV, "").strip().lower() == "all":
            return False
        c, t0 = self.cupti, time.perf_counter_ns()
        kinds = (c.ActivityKind.DRIVER, c.ActivityKind.RUNTIME)
        try:
            for kind in kinds:
                c.activity_enable(kind)
                self._kinds.append(kind)
            for enable, cbid in not_launching(c):  # after each enable: set once, they were gone at the next check (H100, c43cd1e)
                enable(cbid, 0)
        except Exception:  # noqa: BLE001 - an older CUPTI or binding
            for kind in kinds:
                if kind in self._kinds:
                    c.activity_disable(kind)
                    self._kinds.remove(kind)
            return False
        finally:
            self.overhead_ns += time.perf_counter_ns() - t0
        return True

    def _api(self, on: bool) -> None:
        """Every driver and runtime call's record, on only while the kernel's launcher runs (where
        the launching calls' records are not on for the whole check)."""
        if not self._kinds or self.whole_check:
            return
        t0 = time.perf_counter_ns()
        for kind in (self.cupti.ActivityKind.DRIVER, self.cupti.ActivityKind.RUNTIME):
            (self.cupti.activity_enable if on else self.cupti.activity_disable)(kind)
        self.overhead_ns += time.perf_counter_ns() - t0

    def _disable(self) -> None:
        for kind in self._kinds:
            try:
                self.cupti.activity_disable(kind)
            except Exception:  # noqa: BLE001
                pass
        self._kinds = []

    def flush(self) -> None:
        """Deliver every record completed so far (forced: buffers not yet full too)."""
        if self._kinds:
            t0 = time.perf_counter_ns()
            self._flushing = threading.get_ident()
            try:
                self.cupti.activity_flush_all(1)
            finally:
                self._flushing = None
                self.overhead_ns += time.perf_counter_ns() - t0

    def stop(self) -> None:
        global _ACTIVE
        try:
            self.flush()
        finally:
            self._disable()
            if _ACTIVE is self:
                _ACTIVE = None

    # ---- the kernel's calls ----
    def now(self) -> int:
        return int(self.cupti.get_timestamp())

    def entered(self) -> None:
        self._api(True)
        self.windows.append([self.now(), None, None])

    def returned(self) -> None:
        if self.windows and self.windows[-1][1] is None:
            self.windows[-1][1] = self.now()
        self._api(False)

    def awaited(self) -> None:
        """The harness's wait for the last call ended: mark it (once; a later wait is not its own)."""
        if self.windows and self.windows[-1][1] is not None and self.windows[-1][2] is None:
            self.windows[-1][2] = self.now()

    def calls(self) -> list[CallWindow]:
        return [CallWindow(i, int(w[0]), int(w[1] if w[1] is not None else w[0]), w[2])  # type: ignore[arg-type]
                for i, w in enumerate(self.windows)]

    def launches(self) -> list[Launch]:
        """Every kernel record, each with the call it was launched in (None: the harness's own)."""
        return attribute(self.kernels, self.api, self.calls())


def launch_api(name: str) -> bool:
    """Is the driver or runtime call named ``name`` (a CUPTI callback id's name) one that launches
    kernels (``cuLaunchKernel``, ``cudaLaunchKernel_v7000``, ``cuGraphLaunch``, cooperative and
    ``Ex`` launches, their per-thread-stream forms)? Pure."""
    return "Launch" in name and "HostFunc" not in name


def not_launching(c: Any) -> list[tuple[Any, int]]:
    """(CUPTI's per-call switch, callback id) of every driver and runtime call that launches no
    kernel, to be switched off: a kernel record is matched to its call through its launch's record
    alone, and an autotuner's search (Triton's tutorial matmul: 20,000 launches at a shape, each
    among 25 other calls: events, pointer queries, the framework's own) brought 500,000 records and
    3 to 12 s of reading in Python to one check (H100, at c43cd1e). Raises where this binding has no
    such switches."""
    if not _NOT_LAUNCHING:
        for cbids, enable in ((c.driver_api_trace_cbid, c.activity_enable_driver_api),
                              (c.runtime_api_trace_cbid, c.activity_enable_runtime_api)):
            _NOT_LAUNCHING.extend((enable, int(member)) for member in cbids
                                  if member.name not in ("INVALID", "SIZE", "FORCE_INT") and not launch_api(member.name))
    return _NOT_LAUNCHING


def attribute(kernels: list[Launch], api: dict[int, int], calls: list[CallWindow]) -> list[Launch]:
    """Each kernel launch with the index of the call in whose host window its launch API call
    started (matched by correlation id); a launch made outside every call keeps ``call=None``.
    A CUDA graph's kernels carry the correlation id of the ``cudaGraphLaunch`` that replayed them
    (all of one replay share it), so a replay belongs to the call that launched the graph, not to
    the one that captured it; a capture (``cudaStreamBeginCapture``) makes API records but runs
    nothing, so it brings no kernel record and is no launch. Correlation id 0 is CUPTI's "none":
    it never matches. Pure."""

    out = []
    for k in kernels:
        t = api.get(k.correlation) if k.correlation else None
        call = None
        if t is not None:
            call = next((c.index for c in calls if c.entered_ns <= t <= c.returned_ns), None)
        out.append(replace(k, call=call))
    return out
