"""The GPU-wide lock taken by the judging process for a confined kernel's child.

A confined child cannot open the lock's files (``measure/gpu_lock.py``): they are not in its
sandbox (``checks/sandbox_confine.py``), so a submission can neither hold the lock from its
import, stalling every other student's checks on the GPU, nor write into the files or the lock
log. A timed check still takes the lock exclusively around its timings: the child's ``gpu_lock``
asks its parent (``checks/sandbox.py``) over the pipes they share, and the parent takes a real
``GpuHold`` for it, logged under the parent's pid.

The requests are JSON lines the child sends among its other messages (``gpu_lock.use_broker``):

- ``{"lock": "acquire", "exclusive": bool, "what": str}``: the parent takes the lock (it blocks
  while it waits, as the child would: each holder is bounded by its own check's timeout) and
  answers ``{"lock": "ok"}``;
- ``{"lock": "step_aside", "pause_s": float}``: ``GpuHold.step_aside`` (``measure/quiet.py``),
  answered ``{"lock": "ok", "stepped": bool}``;
- ``{"lock": "presume_hung", "warming": bool}`` and ``{"lock": "release"}``: no answer.

Either answer may be ``{"lock": "refused", "why": str}``: the parent grants only while a check
it sent runs (a request while the kernel loads or prepares, or after the check's reply, is
refused; the child's ``gpu_lock`` raises it), one hold at a time, and never an exclusive hold
inside the shared one it holds around a correctness check. It ends whatever it holds for the
child when the check ends, however it ends (its reply, a timeout, a crash, the child killed or
stopped). A child that does not read its answers gets none: a request that finds an answer
still unread in the pipe is ignored, so the parent never blocks writing to a child that floods it.

The child's waits are its own as before (``gpu_lock._waiting``): it says when it waits and when
it holds (``lock_wait``, ``lock_held``), and its parent stops the check's clock meanwhile.
"""
from __future__ import annotations

import contextlib
import fcntl
import json
import os
import struct
import termios
from typing import IO, Any, Callable, Iterator

from ..measure.gpu_lock import LOCK_DIR_ENV, LOG_ENV, GpuHold, gpu_key, gpu_lock

BROKER_ENV = "PYTEST_GEMM_LOCK_BROKER"  # set in a confined child's environment: its parent takes the lock
WHAT_LIMIT = 80  # characters of a child's name for its hold kept in the lock log
PAUSE_LIMIT_S = 5.0  # the longest a step aside pauses (measure/quiet.py's: 1.5 s): the parent sleeps it


def child_env(env: dict[str, str]) -> dict[str, str]:
    """A confined child's environment: it asks its parent for the lock, and has no lock log."""
    out = {k: v for k, v in env.items() if k != LOG_ENV}
    out[BROKER_ENV] = "1"
    return out


class LockBroker:
    """The parent's side, for one child (``env``: the child's environment, which names its GPU
    and the lock's folder; None: an unconfined child, which takes the lock itself and is refused)."""

    def __init__(self, env: dict[str, str] | None):
        self.confined = env is not None
        self.key = gpu_key(env) if env is not None else None
        self.directory = (env or {}).get(LOCK_DIR_ENV) or None
        self.checking = False
        self.hold: GpuHold | None = None
        self._stack = contextlib.ExitStack()

    @contextlib.contextmanager
    def during_check(self) -> Iterator[None]:
        """Grant the child's requests while the block (a check) runs; end its hold after it."""
        self.checking = True
        try:
            yield
        finally:
            self.end()

    def end(self) -> None:
        """Refuse from now on, and let go of whatever this child had (its hold, its mark)."""
        self.checking = False
        self.hold = None
        self._stack.close()

    def handle(self, message: dict[str, Any], writer: IO[str]) -> None:
        """Serve one request from the child, answering it on ``writer`` (its request pipe)."""
        if _unread(writer):
            return  # it does not read its answers: nothing it asks is done
        op = message.get("lock")
        answer: dict[str, Any] | None = {"lock": "ok"} if op in ("acquire", "step_aside") else None
        why = self._refusal(message)
        if why is not None:
            answer = {"lock": "refused", "why": why}
        elif op == "acquire":
            what = str(message.get("what") or "")[:WHAT_LIMIT]
            try:
                self.hold = self._stack.enter_context(
                    gpu_lock(bool(message.get("exclusive")), self.key, self.directory, what=what))
            except RuntimeError as exc:  # exclusive inside this process's shared hold
                answer = {"lock": "refused", "why": str(exc)}
        elif op == "step_aside":
            assert self.hold is not None
            answer["stepped"] = self.hold.step_aside(min(max(float(message.get("pause_s") or 0.0), 0.0), PAUSE_LIMIT_S))
        elif op == "presume_hung":
            assert self.hold is not None
            self.hold.presume_hung(warming=bool(message.get("warming")))
        elif op == "release":
            self.hold = None
            self._stack.close()
        if answer is not None:
            with contextlib.suppress(OSError, ValueError):  # the child is gone: its end says so
                writer.write(json.dumps(answer) + "\n")
                writer.flush()

    def _refusal(self, message: dict[str, Any]) -> str | None:
        op = message.get("lock")
        if not self.confined:
            return "this kernel's process takes the GPU lock itself"
        if op not in ("acquire", "step_aside", "presume_hung", "release"):
            return f"unknown request {op!r}"
        if not self.checking:
            return "the GPU lock is granted only while a check runs, not while the kernel loads or after its check"
        if op == "acquire" and self.hold is not None:
            return "this kernel's process holds the GPU lock already; release it first"
        if op in ("step_aside", "presume_hung") and self.hold is None:
            return "this kernel's process holds no GPU lock"
        return None


def _unread(writer: IO[str]) -> int:
    """Bytes in the pipe to the child that it has not read (Linux's FIONREAD on a pipe)."""
    try:
        return struct.unpack("i", fcntl.ioctl(writer.fileno(), termios.FIONREAD, b"\0\0\0\0"))[0]
    except (OSError, ValueError):
        return 0


def asker(send: Callable[[dict[str, Any]], None], reader: IO[str]) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """The child's side: ``ask(request)`` sends it to the parent (``send``) and reads its answer
    from the request pipe (``reader``); a refusal raises, saying why."""

    def ask(request: dict[str, Any]) -> dict[str, Any]:
        send(request)
        line = reader.readline()
        answer = json.loads(line) if line else {"lock": "refused", "why": "the judging process is gone"}
        if not isinstance(answer, dict) or "lock" not in answer:
            raise RuntimeError(f"gpu_lock: the judging process sent {line.strip()[:200]!r}, not an answer "
                               "to the GPU lock request: gpu_lock may be called only from the thread running the check")
        if answer["lock"] != "ok":
            raise RuntimeError(f"gpu_lock: the judging process refused the GPU lock: {answer.get('why')}")
        return answer
    return ask
