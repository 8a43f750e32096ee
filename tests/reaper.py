"""Every process a command leaves running, found by a child subreaper rather than by name.

``Reaped(cmd)`` runs ``cmd`` under this file run as a script, a process that has made itself a
child subreaper (``prctl(PR_SET_CHILD_SUBREAPER)``, Linux >= 3.4): a process the command starts
and that outlives its parent is re-parented to the reaper instead of to init, whether or not it
called ``setsid()``, left its process group, or forked twice. One in a PID namespace of its own
(a confinement's) is re-parented to that namespace's first process, itself below the reaper,
whose end kills the rest of the namespace. So once the command has exited, every process it left
behind, a graded submission's kernel process (``checks/sandbox_child.py``) and anything that one
spawned included, is a descendant of the reaper, whatever its command line says: none is missed
because it does not name the submission, and no process of another test is counted. They are
listed, then killed, so a failing test leaves nothing running either.

    with Reaped(cmd, cwd=..., env=..., timeout=600) as run:
        done = run.wait()             # the command's exit status and output (stdout and stderr)
        ...                           # look at what it wrote, as it left it
        left = run.leftovers(5)       # 5 s later: "pid cmdline" of each process still running

Used by tests/test_hostile_submissions.py; tested by tests/test_hostile_checks.py.
"""
from __future__ import annotations

import ctypes
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from typing import Any, Sequence

PR_SET_CHILD_SUBREAPER = 36


def _parents() -> dict[int, int]:
    """Each live (not zombie) process's parent, from /proc."""
    out = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                fields = open(f"/proc/{entry}/stat").read().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            if fields[0] not in ("Z", "X"):
                out[int(entry)] = int(fields[1])
    return out


def descendants(pid: int) -> list[int]:
    """The live processes below ``pid``."""
    children: dict[int, list[int]] = {}
    for child, parent in _parents().items():
        children.setdefault(parent, []).append(child)
    found, todo = [], list(children.get(pid, []))
    while todo:
        found.append(todo.pop())
        todo += children.get(found[-1], [])
    return sorted(found)


def _cmdline(pid: int) -> str:
    try:
        return open(f"/proc/{pid}/cmdline", "rb").read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return "?"


def _reap() -> None:
    """Collect every child that has ended (zombies are not left behind: they run nothing)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _main(cmd: list[str], timeout: float) -> None:
    """The reaper: run ``cmd`` (its output to this process's stderr), say its exit status on
    stdout, wait for a line on stdin, then say what is left below it and kill that."""
    if ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER)")
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=sys.stderr.fileno(), stderr=subprocess.STDOUT)
    try:
        code: int | None = proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        code = None
    print(json.dumps({"returncode": code}), flush=True)
    sys.stdin.readline()
    _reap()
    me = os.getpid()
    print(json.dumps([f"{pid} {_cmdline(pid)}" for pid in descendants(me)]), flush=True)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # a killed parent's children come up to us: again until none
        left = descendants(me)
        if not left:
            break
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.05)
        _reap()


class Reaped:
    """``cmd`` run under a subreaper (see the module's docstring)."""

    def __init__(self, cmd: Sequence[str], *, cwd: Any = None, env: dict[str, str] | None = None,
                 timeout: float = 600):
        self.cmd = list(cmd)
        self.output = tempfile.TemporaryFile()
        self.proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), json.dumps(self.cmd), str(timeout)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.output,
                                     cwd=cwd, env=env, text=True)
        self.done: subprocess.CompletedProcess[str] | None = None

    def wait(self) -> subprocess.CompletedProcess[str]:
        """The command's exit status (None: it ran past ``timeout`` and was killed) and output."""
        if self.done is None:
            line = self.proc.stdout.readline() if self.proc.stdout else ""
            if not line:
                raise RuntimeError(f"the reaper failed: {self._text()}")
            self.done = subprocess.CompletedProcess(self.cmd, json.loads(line)["returncode"], self._text(), "")
        return self.done

    def _text(self) -> str:
        self.output.seek(0)
        return self.output.read().decode(errors="replace")

    def leftovers(self, after_s: float = 0.0) -> list[str]:
        """``after_s`` seconds after the command ended: each process it left running ("pid cmdline"),
        all of which are then killed."""
        self.wait()
        time.sleep(after_s)
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()
        left = json.loads(self.proc.stdout.readline() or "null")
        if left is None:
            raise RuntimeError(f"the reaper failed: {self._text()}")
        self.proc.wait(60)
        return left

    def __enter__(self) -> "Reaped":
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc.poll() is None:  # not asked: kill what is left all the same
            try:
                if self.proc.stdin is not None:
                    self.proc.stdin.close()
                self.proc.wait(60)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
        self.output.close()


if __name__ == "__main__":
    _main(json.loads(sys.argv[1]), float(sys.argv[2]))
