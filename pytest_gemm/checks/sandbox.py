"""Run an untrusted kernel's checks in a child process.

An illegal address poisons the CUDA context for the rest of a process, a hung
kernel can only be stopped by ending its process, and a kernel may call exit().
So each kernel gets a child process (``python -m pytest_gemm.checks.sandbox_child``) that
loads it by its spec and runs checks on request; the pytest process never
launches a kernel. A fault fails the check that faulted (the child reports it,
then is replaced), a hang is killed after the timeout (``timeout``), a child
that dies is reported with its exit status and its last output (``fault``).
Messages are JSON lines over a pair of pipes, so a kernel's printf cannot
corrupt them; what the child prints goes to a log, and the part printed during
a failed check is added to that failure's details.

Start-up is bounded apart from the checks: importing the kernel (``LOAD_TIMEOUT``) and
preparing it (CUDA initialisation, compiling and loading it: ``PREPARE_TIMEOUT``) each have
their own limit and are reported as such, so a check's timeout measures the check alone.
Each reply carries the check's duration in the child (``last_seconds``); where a start-up's
seconds went (the process, importing the kernel, waiting for the GPU lock, CUDA's context,
compiling, loading) is kept in ``last_start``, a check's lock waits in ``last_lock_wait_s``.
A check that takes the GPU-wide lock itself (a timed one) reports when it waits for it; that wait is
not the check's time nor in its timeout. A confined child cannot open the lock's files: it asks this
process to take the lock for it (``{"lock": ...}`` requests, answered on its request pipe, granted
only while a check runs and let go of when it ends: ``checks/lock_broker.py``). ``run`` takes a
``guard``, held only while the check itself runs (``measure/gpu_lock.py``), and a
``startup_guard`` held while a new child prepares the kernel;
either is presumed hung after ``hold_s`` / ``startup_hold_s`` (``PresumeHung``: the hold ends,
its mark keeps timings off the GPU until the check ends). The child's side, its memory release
between checks and its out-of-memory retry, is ``checks/sandbox_child.py``.

A warm-up the child sees at run time (Triton autotuning, a JIT compile) stops the check's clock
and runs its own budget (``checks/warmup.py``); ``progress`` says it on the terminal.

Test hook: the child runs each check through ``pytest_gemm.checks.dispatch.run_check``, or through
the function named by ``PYTEST_GEMM_DISPATCH="module:function"`` (same signature), read only by the
child; ``tests/test_sandbox.py`` drives the protocol with fake checks that need no GPU.
"""
from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
from typing import Any, Callable, ContextManager

import pytest

from ..measure.gpu_lock import waited_seconds
from ..model import categories as cat
from ..model.categories import GemmCheckFailure
from .hang_presumption import PresumeHung
from ..kernels.hang_stack import STACK_FD_ENV, ask
from .lock_broker import LockBroker
from .sandbox_child import DISPATCH_ENV  # noqa: F401  (the test hook's name, documented above)
from .sandbox_confine import confined_command, confines, reseed_confined
from .warmup import WarmupClock, WarmupTimeout, budget_s

OUTPUT_LIMIT = 1500  # characters of the child's output quoted in a failure
LOAD_TIMEOUT = 120.0     # seconds to start the child and import the kernel's module
PREPARE_TIMEOUT = 180.0  # seconds for CUDA initialisation, compiling and loading the kernel


class SandboxClient:
    """The parent's handle on one kernel's child process.

    ``target(spec, index)`` points a running child at another kernel (the trusted reference
    ladder shares one process that way); the child loads it before its next check."""

    def __init__(self, spec: str, index: int, rootdir: str, env: dict[str, str] | None = None):
        self.spec, self.index, self.rootdir = spec, index, rootdir
        self.env = env
        self.proc: subprocess.Popen[bytes] | None = None
        self.loaded: tuple[str, int] | None = None  # what the running child has loaded
        self.last_seconds: float | None = None      # the last check's own duration in the child
        self.peak_pool_bytes = 0                    # the most CuPy's pool held at the end of a check
        self.check_timed_out = False                # the last check (not its start-up) ran out of time
        self.last_start: dict[str, float] | None = None  # the seconds of a start-up the last run() made
        self.last_lock_wait_s = self.last_warmup_s = 0.0  # the last check's waits for the GPU lock, its warm-up
        self.progress: Callable[[str], None] | None = None  # where warm-up progress is said (the runner)
        self.broker = LockBroker(None)  # the GPU lock, taken here for a confined child (checks/lock_broker.py)

    def target(self, spec: str, index: int) -> None:
        self.spec, self.index = spec, index

    def _start(self) -> None:
        to_child_r, to_child_w = os.pipe()
        from_child_r, from_child_w = os.pipe()
        self.log, self.stack = tempfile.TemporaryFile(), tempfile.TemporaryFile()
        cmd = [sys.executable, "-m", "pytest_gemm.checks.sandbox_child", str(to_child_r), str(from_child_w)]
        env = dict(os.environ if self.env is None else self.env)
        env["PYTHONPATH"] = os.pathsep.join([p for p in sys.path if p] + [env.get("PYTHONPATH", "")])
        env["PYTHONUNBUFFERED"] = "1"  # a print just before os._exit() or a crash still reaches the log
        confined_child = confines(self.spec)
        stack = () if confined_child else (self.stack.fileno(),)  # where it was, if it times out (kernels/hang_stack.py)
        env.update({STACK_FD_ENV: str(fd) for fd in stack})
        self._spawned = time.monotonic()
        cmd, confined, env = confined_command(cmd, self.spec, self.rootdir, env)  # none unless asked
        self.broker.end()
        self.broker = LockBroker(env if confined_child else None)
        self.proc = subprocess.Popen(cmd, pass_fds=(to_child_r, from_child_w, *stack), stdout=self.log,
                                     stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                                     cwd=self.rootdir, start_new_session=True, **confined)
        os.close(to_child_r)
        os.close(from_child_w)
        self.writer = os.fdopen(to_child_w, "w", buffering=1)
        self.reader_fd = from_child_r
        self.buffer = b""
        self._send_load()

    def _send_load(self) -> None:
        """Ask the child to load the target kernel (it answers once, read by _load)."""
        self._send({"op": "load", "spec": self.spec, "index": self.index, "rootdir": self.rootdir})

    def _send(self, message: dict[str, Any]) -> None:
        """Raises BrokenPipeError when the child is gone."""
        assert self.proc is not None
        self.writer.write(json.dumps(message) + "\n")
        self.writer.flush()

    def _receive(self, timeout: float | None) -> dict[str, Any] | None:
        """The next message, or None when the child died; raises TimeoutError (never with
        ``timeout=None``). The child's GPU lock requests are served on the way (``self.broker``)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            while b"\n" not in self.buffer:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise TimeoutError
                ready, _, _ = select.select([self.reader_fd], [], [], left)
                if not ready:
                    continue
                chunk = os.read(self.reader_fd, 1 << 16)
                if not chunk:
                    return None
                self.buffer += chunk
            line, self.buffer = self.buffer.split(b"\n", 1)
            message = json.loads(line)
            if not (isinstance(message, dict) and "lock" in message):
                return message
            self.broker.handle(message, self.writer)

    def _check_reply(self, timeout: float, hung: PresumeHung | None = None) -> dict[str, Any] | None:
        """The check's reply; ``timeout`` counts only while the check neither waits for the GPU lock
        (unbounded, as when the parent takes it: every holder is bounded by its own timeout) nor
        warms up (its own budget runs then: ``checks/warmup.py``); the child reports both. ``hung``
        presumes the check hung (``GpuHold.presume_hung``) once its own time reaches it. Raises TimeoutError."""
        left, waiting, warm = timeout, False, WarmupClock(budget_s(), self.progress)
        while True:
            started = time.monotonic()
            wait = None if waiting else warm.wait() if warm.warming else left
            if hung is not None and not waiting and not warm.warming:
                wait = hung.wait(timeout - left, wait)
            try:
                message = self._receive(wait)
            except TimeoutError:
                if warm.warming:
                    warm.spend(time.monotonic() - started)  # raises WarmupTimeout past its budget
                    continue
                left -= time.monotonic() - started
                if left <= 0:
                    raise
                continue  # the hold's time was up, not the check's
            if message is None or "event" not in message:
                return message
            if warm.warming:
                warm.spend(time.monotonic() - started)
            elif not waiting:
                left -= time.monotonic() - started
            refund = warm.event(message)  # a warm-up's seconds before the child could say so: not the check's
            waiting = message["event"] == "lock_wait" if refund is None else waiting
            if hung is not None and (warm.warming or hung.warming):
                # a warm-up lasts minutes: the others must not queue behind the timed checks waiting for it
                # (which wait for a warming mark a while only); once it ends, a hang mark again
                hung.now(warming=warm.warming)
            left = min(timeout, left + (refund or 0.0))

    def output_tail(self, limit: int = OUTPUT_LIMIT, since: int = 0) -> str:
        """The last ``limit`` characters the child printed (after byte offset ``since``)."""
        try:  # pread: the child writes through the same open file, so its offset must not move
            fd = self.log.fileno()
            size = os.fstat(fd).st_size
            start = max(since, size - 4 * limit)  # enough bytes for `limit` characters of UTF-8
            text = os.pread(fd, size - start, start).decode(errors="replace")
        except (OSError, ValueError):
            return ""
        return text[-limit:].strip()

    def _log_size(self) -> int:
        try:
            return os.fstat(self.log.fileno()).st_size
        except (OSError, ValueError):
            return 0

    def _with_output(self, details: list[str], since: int) -> list[str]:
        tail = self.output_tail(since=since)
        if tail:
            details = [*details, "its output during the check: " + tail.replace("\n", "\n    ")]
        return details

    def stop(self) -> None:
        """End the child and everything it started (its own process group)."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            _kill_group(self.proc.pid)
            self.proc.wait()
        self.broker.end()  # what the parent held for it
        self.loaded = None
        for closer in (self.writer.close, lambda: os.close(self.reader_fd)):
            try:
                closer()
            except OSError:
                pass
        self.proc = None

    def _death(self, shape_text: str, what: str) -> GemmCheckFailure:
        assert self.proc is not None
        try:
            code = self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:  # it closed its pipe but lives on: end it
            _kill_group(self.proc.pid)
            code = self.proc.wait()
        if code < 0:
            try:
                how = f"was killed by signal {signal.Signals(-code).name}"
            except ValueError:
                how = f"was killed by signal {-code}"
        else:
            how = f"exited with status {code}"
        tail = self.output_tail()
        self.stop()
        details = ["the kernel's process ended during the check (exit(), abort, a crash or a "
                   "device-side assert); later checks run in a fresh process"]
        if tail:
            details.append("its last output: " + tail.replace("\n", "\n    "))
        return GemmCheckFailure(cat.FAULT, f"{what} at {shape_text}: the process {how}", details)

    @property
    def alive(self) -> bool:
        """A child process is running (idle or inside a check)."""
        return self.proc is not None and self.proc.poll() is None

    def _startup_reply(self, what: str, limit: float, shape_text: str,
                       hung: PresumeHung | None = None) -> dict[str, Any]:
        """Wait for the answer to a load or prepare request; its time limit is its own, not a
        check's (``hung`` presumes the start-up hung when due)."""
        started = time.monotonic()
        try:
            while True:
                used = time.monotonic() - started
                wait = limit - used if hung is None else hung.wait(used, limit - used)
                try:
                    reply = self._receive(timeout=max(0.0, wait))
                    if reply is None or "event" not in reply:  # its own limit runs through a lock wait
                        break
                except TimeoutError:
                    if time.monotonic() - started >= limit:
                        raise
        except TimeoutError:
            tail = self.output_tail()
            self.stop()
            details = ["this is start-up, not the check: it is bounded by its own limit, not --gemm-timeout"]
            if tail:
                details.append("its output: " + tail.replace("\n", "\n    "))
            raise GemmCheckFailure(cat.TIMEOUT, f"{what} did not finish within {limit:g} s", details) from None
        if reply is None:
            raise self._death(shape_text, what)
        if reply["status"] != "ok":
            self.stop()
            _raise(reply)
        return reply

    def _load(self, shape_text: str, guard: Callable[[], ContextManager[Any]], fresh: bool = False,
              hold_s: float | None = None) -> None:
        """Wait for the child's answer to a load request (sent by _start or a retarget), then
        prepare, holding ``guard()`` (it uses the GPU). Where the seconds went is kept in
        ``last_start`` (``fresh``: a new process, whose start and imports are counted too)."""
        loaded = self._startup_reply("loading the kernel (starting its process, importing its module)",
                                     LOAD_TIMEOUT, shape_text)
        start: dict[str, float] = {}
        if fresh:  # from the fork to the child's first line, then its imports up to the load request
            start["process_s"] = round(time.monotonic() - self._spawned - float(loaded.get("seconds") or 0.0), 4)
        start["kernel_import_s"] = round(float(loaded.get("seconds") or 0.0), 4)
        waited = waited_seconds()
        with guard() as hold:
            start["lock_wait_s"] = round(waited_seconds() - waited, 4)
            try:
                self._send({"op": "prepare"})
            except (BrokenPipeError, ConnectionError):
                raise self._death(shape_text, "preparing the kernel") from None
            prepared = self._startup_reply("preparing the kernel (CUDA initialisation, compiling and loading it)",
                                           PREPARE_TIMEOUT, shape_text, PresumeHung.of(hold, hold_s))
        start.update((k, round(float(v), 4)) for k, v in (prepared.get("phases") or {}).items())
        start["prepare_s"] = round(float(prepared.get("seconds") or 0.0), 4)
        self.last_start = start
        self.loaded = (self.spec, self.index)

    def start(self, shape_text: str = "", guard: Callable[[], ContextManager[Any]] | None = None,
              hold_s: float | None = None) -> None:
        """Have a child running with the target kernel loaded and prepared (start-up limits apply;
        ``guard()`` is held while it prepares, for at most ``hold_s`` seconds when given)."""
        guard = guard or contextlib.nullcontext
        if self.proc is None or self.proc.poll() is not None:
            self._start()
            self._load(shape_text, guard, fresh=True, hold_s=hold_s)
        elif self.loaded != (self.spec, self.index):
            try:
                self._send_load()
            except (BrokenPipeError, ConnectionError):
                raise self._death(shape_text, "loading the kernel") from None
            self._load(shape_text, guard, hold_s=hold_s)

    def run(self, check: str, shape: list[int], params: dict[str, Any], options: dict[str, Any],
            timeout: float, guard: Callable[[], ContextManager[Any]] | None = None,
            why: str = "--gemm-timeout",
            startup_guard: Callable[[], ContextManager[Any]] | None = None,
            hold_s: float | None = None, startup_hold_s: float | None = None) -> dict[str, Any]:
        """Run a check in the child; returns the recorded facts or raises what the check raised.
        ``timeout`` bounds the check alone (start-up has its own limits; ``why`` names where the
        limit came from in a timeout's message); ``guard()`` is held while the check runs,
        ``startup_guard()`` while a new child prepares the kernel; a check or start-up still
        running after ``hold_s`` or ``startup_hold_s`` seconds is presumed hung (``GpuHold.presume_hung``)."""
        shape_text = "x".join(map(str, shape))
        self.last_seconds, self.check_timed_out, self.last_start = None, False, None
        self.last_lock_wait_s = self.last_warmup_s = 0.0
        self.start(shape_text, startup_guard, startup_hold_s)
        reseed_confined(self.spec)
        waited = waited_seconds()
        with (guard or contextlib.nullcontext)() as hold, self.broker.during_check():
            self.last_lock_wait_s = waited_seconds() - waited
            return self._run_check(check, shape, shape_text, params, options, timeout, why,
                                   PresumeHung.of(hold, hold_s))

    def _run_check(self, check: str, shape: list[int], shape_text: str, params: dict[str, Any],
                   options: dict[str, Any], timeout: float, why: str, hung: PresumeHung | None = None
                   ) -> dict[str, Any]:
        since = self._log_size()
        try:
            self._send({"op": "check", "check": check, "shape": shape, "params": params, "options": options})
        except (BrokenPipeError, ConnectionError):  # it died after its last reply
            raise self._death(shape_text, check) from None
        try:
            reply = self._check_reply(timeout, hung)
        except WarmupTimeout as exc:
            self.check_timed_out = True
            self.stop()
            raise GemmCheckFailure(cat.TIMEOUT, exc.summary(check, shape_text), self._with_output([], since)) from None
        except TimeoutError:
            self.check_timed_out = True
            at = ask(self.proc.pid, self.stack) if self.proc is not None and not self.broker.confined else ""
            self.stop()
            details = self._with_output(["an endless loop, a deadlock at a barrier some threads never reach, "
                                         "or a kernel far slower than the timeout allows", *([at] if at else [])], since)
            raise GemmCheckFailure(cat.TIMEOUT, f"{check} at {shape_text} did not finish within {timeout:.4g} s "
                                   f"({why}); the kernel's process was killed", details) from None
        if reply is None:
            raise self._death(shape_text, check)
        self.last_seconds, self.last_warmup_s = reply.get("seconds"), float(reply.get("warmup_s") or 0.0)
        self.last_lock_wait_s += float(reply.get("lock_wait_s") or 0.0)
        self.peak_pool_bytes = max(self.peak_pool_bytes, int((reply.get("memory") or {}).get("pool_bytes", 0)))
        if reply["status"] == "fail":
            reply["details"] = self._with_output(list(reply.get("details", [])), since)
        if reply.get("restart"):  # the child's CUDA context is poisoned: start afresh next time
            self.stop()
        return _raise(reply) if reply["status"] != "ok" else reply.get("facts", {})


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def _raise(reply: dict[str, Any]) -> Any:
    status = reply["status"]
    if status == "fail":
        exc = GemmCheckFailure(reply["category"], reply["summary"], reply.get("details", []))
        exc.facts = reply.get("facts", {})  # type: ignore[attr-defined]
        raise exc
    if status == "skip":
        pytest.skip(reply["reason"])
    if status == "usage":
        raise pytest.UsageError(reply["message"])
    raise RuntimeError(reply.get("message", "the sandbox failed"))


if __name__ == "__main__":  # the child used to be started as this module
    from .sandbox_child import child

    child(int(sys.argv[1]), int(sys.argv[2]))
