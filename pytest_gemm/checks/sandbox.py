"""Run an untrusted kernel's checks in a child process.

An illegal address poisons the CUDA context for the rest of a process, a hung
kernel can only be stopped by ending its process, and a kernel may call exit().
So each kernel gets a child process (``python -m pytest_gemm.checks.sandbox``) that
loads it by its spec and runs checks on request; the pytest process never
launches a kernel. A fault fails the check that faulted (the child reports it,
then is replaced), a hang is killed after the timeout (``timeout``), a child
that dies is reported with its exit status and its last output (``fault``).
Messages are JSON lines over a pair of pipes, so a kernel's printf cannot
corrupt them; what the child prints goes to a log, and the part printed during
a failed check is added to that failure's details.

Test hook: the child runs each check through ``pytest_gemm.checks.dispatch.run_check``,
or through the function named by the environment variable
``PYTEST_GEMM_DISPATCH="module:function"`` (same signature), read only by the
child. ``tests/test_sandbox.py`` uses it to drive the protocol with fake checks
that need no GPU (sleep, raise, exit, abort); it is not a user option.
"""
from __future__ import annotations

import importlib
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from typing import Any, Callable

from ..model import categories as cat
from ..model.categories import GemmCheckFailure

DISPATCH_ENV = "PYTEST_GEMM_DISPATCH"  # test hook: "module:function" the child runs checks with
OUTPUT_LIMIT = 1500  # characters of the child's output quoted in a failure


class SandboxClient:
    """The parent's handle on one kernel's child process.

    ``target(spec, index)`` points a running child at another kernel (the trusted reference
    ladder shares one process that way); the child loads it before its next check."""

    def __init__(self, spec: str, index: int, rootdir: str, env: dict[str, str] | None = None):
        self.spec, self.index, self.rootdir = spec, index, rootdir
        self.env = env
        self.proc: subprocess.Popen[bytes] | None = None
        self.loaded: tuple[str, int] | None = None  # what the running child has loaded

    def target(self, spec: str, index: int) -> None:
        self.spec, self.index = spec, index

    def _start(self) -> None:
        to_child_r, to_child_w = os.pipe()
        from_child_r, from_child_w = os.pipe()
        self.log = tempfile.TemporaryFile()
        cmd = [sys.executable, "-m", "pytest_gemm.checks.sandbox", str(to_child_r), str(from_child_w)]
        env = dict(os.environ if self.env is None else self.env)
        env["PYTHONPATH"] = os.pathsep.join([p for p in sys.path if p] + [env.get("PYTHONPATH", "")])
        env["PYTHONUNBUFFERED"] = "1"  # a print just before os._exit() or a crash still reaches the log
        self.proc = subprocess.Popen(cmd, pass_fds=(to_child_r, from_child_w), stdout=self.log,
                                     stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                                     cwd=self.rootdir, start_new_session=True)
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

    def _receive(self, timeout: float) -> dict[str, Any] | None:
        """The next message, or None when the child died; raises TimeoutError."""
        deadline = time.monotonic() + timeout
        while b"\n" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            ready, _, _ = select.select([self.reader_fd], [], [], left)
            if not ready:
                continue
            chunk = os.read(self.reader_fd, 1 << 16)
            if not chunk:
                return None
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return json.loads(line)

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
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            self.proc.wait()
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
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
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

    def _load(self, shape_text: str) -> None:
        """Wait for the child's answer to a load request (sent by _start or a retarget)."""
        try:
            loaded = self._receive(timeout=120.0)
        except TimeoutError:
            self.stop()
            raise GemmCheckFailure(cat.TIMEOUT, "loading the kernel took over 120 s", []) from None
        if loaded is None:
            raise self._death(shape_text, "loading the kernel")
        if loaded["status"] != "ok":
            self.stop()
            _raise(loaded)
        self.loaded = (self.spec, self.index)

    def run(self, check: str, shape: list[int], params: dict[str, Any], options: dict[str, Any],
            timeout: float) -> dict[str, Any]:
        """Run a check in the child; returns the recorded facts or raises what the check raised."""
        shape_text = "x".join(map(str, shape))
        if self.proc is None or self.proc.poll() is not None:
            self._start()
            self._load(shape_text)
        elif self.loaded != (self.spec, self.index):
            try:
                self._send_load()
            except (BrokenPipeError, ConnectionError):
                raise self._death(shape_text, "loading the kernel") from None
            self._load(shape_text)
        since = self._log_size()
        try:
            self._send({"op": "check", "check": check, "shape": shape, "params": params, "options": options})
        except (BrokenPipeError, ConnectionError):  # it died after its last reply
            raise self._death(shape_text, check) from None
        try:
            reply = self._receive(timeout)
        except TimeoutError:
            self.stop()
            details = self._with_output(["an endless loop, a deadlock at a barrier some threads never reach, "
                                         "or a kernel far slower than the timeout allows"], since)
            raise GemmCheckFailure(cat.TIMEOUT, f"{check} at {shape_text} did not finish within {timeout:g} s "
                                   "(--gemm-timeout); the kernel's process was killed", details) from None
        if reply is None:
            raise self._death(shape_text, check)
        if reply["status"] == "fail":
            reply["details"] = self._with_output(list(reply.get("details", [])), since)
        if reply.get("restart"):  # the child's CUDA context is poisoned: start afresh next time
            self.stop()
        return _raise(reply) if reply["status"] != "ok" else reply.get("facts", {})


def _raise(reply: dict[str, Any]) -> Any:
    import pytest

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


# ---- the child -------------------------------------------------------------

def _dispatcher() -> Callable[..., Any]:
    """``dispatch.run_check``, or the function ``PYTEST_GEMM_DISPATCH`` names (a test hook)."""
    target = os.environ.get(DISPATCH_ENV, "")
    if not target:
        from .dispatch import run_check

        return run_check
    module, _, attr = target.partition(":")
    return getattr(importlib.import_module(module), attr or "run_check")


def _die_with_parent() -> None:
    """Ask Linux to kill this child when the pytest process dies (say, killed by a
    CI timeout): it runs in its own session, so nothing else would stop a kernel
    that is still spinning on the GPU."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _child(read_fd: int, write_fd: int) -> None:
    _die_with_parent()
    reader = os.fdopen(read_fd, "r")
    writer = os.fdopen(write_fd, "w", buffering=1)

    def send(message: dict[str, Any]) -> None:
        writer.write(json.dumps(message, default=str) + "\n")
        writer.flush()

    kernel = None
    for line in reader:
        request = json.loads(line)
        facts: dict[str, Any] = {}
        try:
            if request["op"] == "load":
                from ..kernels.loader import load_spec
                from ..measure.integrity import pin

                pin()  # before the kernel's module runs: what it replaces later is seen (measure/integrity.py)

                if request["rootdir"] not in sys.path:
                    sys.path.insert(0, request["rootdir"])
                kernel = load_spec(request["spec"], __import__("pathlib").Path(request["rootdir"]))[request["index"]]
                send({"status": "ok"})
                continue
            run_check = _dispatcher()
            run_check(kernel, request["check"], request["shape"], request["params"], request["options"], facts)
            send({"status": "ok", "facts": facts})
        except GemmCheckFailure as exc:
            send({"status": "fail", "category": exc.category, "summary": exc.summary,
                  "details": exc.details, "facts": facts, "restart": exc.category == cat.FAULT})
        except BaseException as exc:  # noqa: BLE001 - everything must be reported to the parent
            if type(exc).__name__ == "Skipped":
                send({"status": "skip", "reason": str(getattr(exc, "msg", exc))})
                continue
            if type(exc).__name__ == "UsageError":
                send({"status": "usage", "message": str(exc)})
                continue
            if isinstance(exc, SystemExit):  # sys.exit() in a launcher: as if the process had ended
                shape_text = "x".join(map(str, request.get("shape") or []))
                send({"status": "fail", "category": cat.FAULT,
                      "summary": f"{request.get('check', 'load')} at {shape_text}: the kernel called "
                                 f"sys.exit({exc.code!r})",
                      "details": ["a kernel must return, not end the process; later checks run in a "
                                  "fresh process"], "facts": facts, "restart": True})
                return
            cuda = cat.is_cuda_error(exc)
            category = cat.FAULT if cuda else cat.LAUNCH_ERROR
            where = "".join(traceback.format_exception_only(type(exc), exc)).strip()
            send({"status": "fail", "category": category,
                  "summary": f"{request.get('check', 'load')} raised {where}",
                  "details": [] if cuda else traceback.format_exc().splitlines()[-8:],
                  "facts": facts, "restart": cuda})
            if cuda:
                return  # the context is unusable: the parent starts a fresh child


if __name__ == "__main__":
    _child(int(sys.argv[1]), int(sys.argv[2]))
