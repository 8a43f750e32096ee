"""Running one student's pytest under a wall-clock limit, and stopping its whole process
tree (pytest and the kernel sandboxes it started in their own sessions) when it overruns.

On overrun pytest is first interrupted (SIGINT, as Ctrl-C would): it stops at the check it
is in, still writes its Gradescope results for the checks that ran, and ends its sandboxes;
after ``INTERRUPT_GRACE_S`` whatever is left of the tree is stopped and killed.
"""
from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from typing import Any, Sequence

INTERRUPT_GRACE_S = 15.0  # seconds pytest gets, once interrupted, to write what it has


@dataclass
class RunOutcome:
    returncode: int | None       # None when it was killed for running too long
    timed_out: bool
    output: str
    elapsed_s: float


def _children_by_parent() -> dict[int, list[int]]:
    table: dict[int, list[int]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return table
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                stat = fh.read().decode(errors="replace")
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2:].split()
        if len(fields) > 1:
            table.setdefault(int(fields[1]), []).append(int(entry))
    return table


def _started(pids: list[int]) -> dict[int, str]:
    """Each live pid's start time (/proc), which tells it from a later process given the same pid."""
    out = {}
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat", "rb") as fh:
                stat = fh.read().decode(errors="replace")
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2:].split()
        if len(fields) > 19:
            out[pid] = fields[19]
    return out


def _descendants(pid: int) -> list[int]:
    """Every live descendant of ``pid`` (Linux /proc; elsewhere none are found)."""
    table, out, todo = _children_by_parent(), [], [pid]
    while todo:
        for child in table.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def kill_tree(proc: subprocess.Popen[Any]) -> None:
    """Stop then kill ``proc``, its process group, and every descendant, including
    children that started their own session (the plugin's kernel sandboxes).

    Processes are frozen with SIGSTOP first, so none can fork or be orphaned
    between being found and being killed."""
    own_group = os.getpgid(0)
    frozen: set[int] = set()
    for _ in range(20):
        pids = [proc.pid] + _descendants(proc.pid)
        new = [p for p in pids if p not in frozen]
        if not new:
            break
        for p in new:
            _signal(p, signal.SIGSTOP)
        frozen.update(new)
    groups = set()
    for p in frozen:
        try:
            groups.add(os.getpgid(p))
        except (ProcessLookupError, PermissionError):
            pass
    for g in groups - {own_group}:
        try:
            os.killpg(g, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    for p in frozen:
        _signal(p, signal.SIGKILL)
    proc.wait()


def _wait(proc: subprocess.Popen[Any], deadline: float, stop: threading.Event | None) -> int:
    """``proc``'s exit status; TimeoutExpired past ``deadline`` (time.monotonic) or once ``stop`` is set."""
    if stop is None:
        return proc.wait(timeout=max(0.0, deadline - time.monotonic()))
    while not stop.is_set():
        try:
            return proc.wait(timeout=max(0.0, min(0.2, deadline - time.monotonic())))
        except subprocess.TimeoutExpired:
            if time.monotonic() >= deadline:
                raise
    raise subprocess.TimeoutExpired(proc.args, 0)


def run_with_limit(cmd: Sequence[str], *, cwd: Any, timeout: float, env: dict[str, str] | None = None,
                   grace: float = INTERRUPT_GRACE_S, stop: threading.Event | None = None) -> RunOutcome:
    """Run ``cmd`` in its own session; past ``timeout`` seconds, or once ``stop`` is set, interrupt
    it (SIGINT), give it ``grace`` seconds to write its results, then kill its whole tree (the
    outcome says ``timed_out`` either way)."""
    start = time.monotonic()
    with tempfile.TemporaryFile() as log:
        proc = subprocess.Popen(list(cmd), cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
        timed_out = False
        try:
            returncode: int | None = _wait(proc, start + timeout, stop)
        except subprocess.TimeoutExpired:
            timed_out, returncode = True, None
            tree = _started([proc.pid] + _descendants(proc.pid))  # before they can be orphaned
            _signal(proc.pid, signal.SIGINT)  # pytest: stop at this check, write the results, end the sandboxes
            try:
                proc.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                kill_tree(proc)
            for pid, started in tree.items():  # what outlived it in a session of its own
                if pid != proc.pid and _started([pid]).get(pid) == started:
                    _signal(pid, signal.SIGKILL)
        if proc.poll() is not None:  # anything it left behind in its group goes too
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        log.seek(0)
        output = log.read().decode(errors="replace")
    return RunOutcome(returncode, timed_out, output, time.monotonic() - start)
