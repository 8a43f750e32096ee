"""One GPU shared by several processes (xdist workers, a gradebook's students): timed
measurements must have the GPU to themselves, other checks may share it.

A readers-writer lock on files keyed by the GPU (``fcntl.flock``, so it works across
unrelated processes and is released when a process dies): a timed check (speed, sweep)
holds it exclusively, any other check holds it shared. Writers go first: a timed check
that waits blocks new shared holders (a turnstile file), so a stream of correctness checks
cannot starve it. The lock files live in ``PYTEST_GEMM_LOCK_DIR`` (default: the system's
temporary directory), named by the GPU this process uses (the first id of
``CUDA_VISIBLE_DEVICES``, else 0): processes that name the same GPU differently (an index
and a UUID) do not exclude each other. ``PYTEST_GEMM_GPU_LOCK=off`` turns it off.

Who holds it: the parent process holds it shared around a correctness check it runs in a
kernel's child; a timed check takes it itself (``checks/speed.py``, ``checks/sweep.py``),
after drawing its inputs on the host, exclusively and only around the roofs, the quiet probe,
the timed calls (with their uploads) and cuBLAS, so that the GPU is serialised for seconds per
kernel, not for the whole check. The lock is reentrant within a process: a request inside one already held
(shared inside exclusive, or the same kind) passes through; asking for exclusive inside
shared is a programming error (two holders in one process would wait for each other).
Time spent waiting for the lock is not the kernel's: ``observe_waits`` tells a kernel's
child process when it starts and stops waiting, so that its parent stops the check's clock
meanwhile (``checks/sandbox.py``).

A check that has run long enough to be presumed hung (``GpuHold.presume_hung``, called by the
parent: ``checks/sandbox.py``) ends its shared hold but keeps a mark on the GPU (a shared lock
on a third file, ``running``) until it ends: a timed check that then holds the lock finds the
mark and steps back out until it is gone, so no timing overlaps a kernel that may be spinning,
while the other shared holders are no longer queued behind a timed check that waits for it
(one hanging student held a whole class for its 20 s timeout). A timed check that finds the GPU
busy with work outside the lock steps aside too (``GpuHold.step_aside``, ``measure/quiet.py``).
A check that is warming up (a JIT compile, an autotuner's search: ``checks/warmup.py``) is
marked on a file of its own (``warming``): it may last minutes, mostly on the CPU. A timed check
waits for those marks ``MARK_PATIENCE_S`` at most, then times anyway behind the quiet probe
(``measure/quiet.py``, which sees an autotuner's benchmark launches); a warm-up that ends while
its check goes on turns back into a hang mark. While patient, a timed check looks at the marks
before it takes the turnstile, holding nothing, and drains the shared holders only once it finds
none: draining while marks stood, then stepping out, queued the other checks behind it again
and again (timed checks drained for 147 s of the H200 GPU suite's 438 s at 805b9ae, most of it
within their patience). Nor does a timed check wait for hang marks for
ever: marks came and went so that one was always there (the H200's GPU suite at 1cab236: one
timed hold in 505 s), so after ``MARK_PATIENCE_S`` it keeps the lock, which lets no new check
start and so no new mark appear, and waits there for the marks there are (each ends at its
check's timeout at the latest).
A confined kernel's child (``checks/sandbox_confine.py``) cannot open the lock's files: they are
not in its sandbox, so that a submission can neither hold the lock from its import nor write
into the files. Its parent, the judging process, takes the lock for it (``checks/lock_broker.py``:
the child's ``gpu_lock`` asks it over their pipe, through the hook ``use_broker``), only while a
check it sent runs, and lets go of it when that check ends in any way. The child's waits, its
reentrancy and its events are as above; the holds are the parent's (its pid in the log).
``PYTEST_GEMM_LOCK_LOG=PATH`` appends one JSON line per hold to PATH (pid, kind: ``x`` alone,
``s`` shared, ``r`` a presumed-hung check's mark, ``w`` a warming-up check's; what; and when it
was asked for, held and released, in seconds since the epoch): ``tools/lock_log.py`` says from
it where a class's GPU time went.
"""
from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Iterator

LOCK_DIR_ENV = "PYTEST_GEMM_LOCK_DIR"
LOCK_ENV = "PYTEST_GEMM_GPU_LOCK"
LOG_ENV = "PYTEST_GEMM_LOCK_LOG"


def gpu_key(env: dict[str, str] | None = None) -> str:
    """The GPU this process uses, as a file-name-safe key."""
    env = os.environ if env is None else env
    visible = [g.strip() for g in env.get("CUDA_VISIBLE_DEVICES", "0").split(",") if g.strip()]
    return re.sub(r"[^A-Za-z0-9_.-]", "_", visible[0] if visible else "none")


def lock_paths(key: str | None = None, directory: str | None = None) -> tuple[Path, Path]:
    """(the lock, its turnstile) for a GPU."""
    base = Path(directory or os.environ.get(LOCK_DIR_ENV) or tempfile.gettempdir())
    name = f"pytest-gemm-gpu-{key or gpu_key()}"
    return base / f"{name}.lock", base / f"{name}.turnstile"


def running_path(key: str | None = None, directory: str | None = None) -> Path:
    """The mark of the checks presumed hung that still run on a GPU (see the module's docstring)."""
    lock, _ = lock_paths(key, directory)
    return lock.with_suffix(".running")


def warming_path(key: str | None = None, directory: str | None = None) -> Path:
    """The mark of the checks warming up on a GPU (see the module's docstring)."""
    lock, _ = lock_paths(key, directory)
    return lock.with_suffix(".warming")


RUNNING_PAUSE_S = 1.0  # a timed check that finds a presumed-hung check still running steps out this long
MARK_PATIENCE_S = 10.0  # ... for this long at most, then it keeps the lock (see the module's docstring)
MARK_POLL_S = 0.1  # how often a patient timed check looks at the marks, holding nothing


def open_lock_file(path: Path) -> int:
    """A file of the lock's folder (made where missing), open to every user."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        os.fchmod(fd, 0o666)  # other users' graders may share the GPU
    except OSError:
        pass
    return fd


_HELD: dict[Path, bool] = {}  # lock file -> held exclusively, by this process
_WAIT_OBSERVERS: list[Callable[[bool], None]] = []
_WAITED_S = [0.0]  # seconds this process has waited for the lock, in all
_WAIT_ENDED = [0.0]  # when (time.monotonic) this process last stopped waiting for it


_BROKER: list[tuple[Callable[[dict[str, Any]], dict[str, Any]], Callable[[dict[str, Any]], None]]] = []


def use_broker(ask: Callable[[dict[str, Any]], dict[str, Any]], tell: Callable[[dict[str, Any]], None]) -> None:
    """From now on this process's holds are taken by another process (a confined kernel's child:
    its parent, ``checks/lock_broker.py``): ``ask(request)`` sends a request and returns its
    answer (raising when it is refused), ``tell(request)`` sends one that has none. The requests:
    ``{"lock": "acquire", "exclusive", "what"}``, ``{"lock": "step_aside", "pause_s"}`` (its answer's
    ``stepped``: ``GpuHold.step_aside``'s result), ``{"lock": "presume_hung", "warming"}``,
    ``{"lock": "release"}``."""
    _BROKER[:] = [(ask, tell)]


def observe_waits(observer: Callable[[bool], None]) -> None:
    """Call ``observer(True)`` when this process starts waiting for the lock, ``observer(False)``
    once it holds it."""
    _WAIT_OBSERVERS.append(observer)


def waited_seconds() -> float:
    """Seconds this process has spent waiting for the lock so far."""
    return _WAITED_S[0]


def wait_ended() -> float:
    """When (``time.monotonic()``) this process last stopped waiting for the lock (0.0: never)."""
    return _WAIT_ENDED[0]


class GpuHold:
    """One hold of the GPU lock, yielded by ``gpu_lock``. A hold nested in one this process
    already has (or taken with the lock turned off) owns nothing: ``release``, ``presume_hung``
    and ``step_aside`` do nothing there."""

    def __init__(self, exclusive: bool, key: str | None = None, directory: str | None = None,
                 what: str = "", owner: bool = False):
        self.exclusive, self.what, self.owner = exclusive, what, owner
        self.lock_path, self.turnstile_path = lock_paths(key, directory)
        self.running_path = running_path(key, directory)
        self.warming_path = warming_path(key, directory)
        self._fds: tuple[int, int] | None = None
        self._running_fd: int | None = None
        self._mark_kind = "r"  # of the mark held (r: presumed hung, w: warming up)
        self._asked = self._held = self._presumed = 0.0

    @property
    def holding(self) -> bool:
        return self._fds is not None

    def acquire(self) -> None:
        self._asked = time.time()
        patient_until = time.monotonic() + MARK_PATIENCE_S
        with _waiting():
            while True:
                if self.exclusive:  # while patient, wait for the marks before draining: the others go on meanwhile
                    while time.monotonic() < patient_until and self._marked():
                        time.sleep(MARK_POLL_S)
                lock_fd, turnstile_fd = open_lock_file(self.lock_path), open_lock_file(self.turnstile_path)
                try:
                    _lock(self.exclusive, lock_fd, turnstile_fd)
                    if not self.exclusive:
                        break
                    patient = time.monotonic() < patient_until
                    if not _marked_running(self.running_path) and not (patient and _marked_running(self.warming_path)):
                        break
                    if not patient:  # holding the lock, no check starts: wait for the hang marks there are
                        _wait_unmarked(self.running_path)
                        break
                except BaseException:
                    os.close(lock_fd)
                    os.close(turnstile_fd)
                    raise
                os.close(lock_fd)  # a check presumed hung still runs: no timing now, the others go on
                os.close(turnstile_fd)
                time.sleep(RUNNING_PAUSE_S)
        self._held = time.time()
        self._fds = (lock_fd, turnstile_fd)
        _HELD[self.lock_path] = self.exclusive

    def _marked(self) -> bool:
        return _marked_running(self.running_path) or _marked_running(self.warming_path)

    def _let_go(self) -> None:
        if self._fds is None:
            return
        _HELD.pop(self.lock_path, None)
        for fd in self._fds:
            os.close(fd)  # closing releases the lock
        self._fds = None
        _log_hold(self, "x" if self.exclusive else "s", self._held, time.time())

    def release(self) -> None:
        """End the hold now, and a presumed-hung check's mark (the ``with`` block's end then
        releases nothing)."""
        self._let_go()
        if self._running_fd is not None:
            os.close(self._running_fd)
            self._running_fd = None
            _log_hold(self, self._mark_kind, self._presumed, time.time())

    def presume_hung(self, warming: bool = False) -> None:
        """A shared holder's check has run so long that it is presumed hung (or it began to warm
        up, ``warming``): end the hold, so that the other shared holders are not queued behind
        the timed checks waiting for it, but mark the GPU as running it until ``release`` (the
        ``with`` block's end): timed checks wait for the mark, not the others (for a warming
        mark, ``MARK_PATIENCE_S`` at most). Called again with the other kind, the mark changes
        kind (a warm-up that ended, its check still running)."""
        kind = "w" if warming else "r"
        if not self.owner or self.exclusive or (self._fds is None and self._running_fd is None):
            return
        if self._running_fd is not None and kind == self._mark_kind:
            return
        fd = open_lock_file(self.warming_path if warming else self.running_path)
        fcntl.flock(fd, fcntl.LOCK_SH)  # a timed check only tests the mark, for an instant
        old, now = self._running_fd, time.time()
        if old is not None:  # the new mark is taken before the old one goes: never a moment unmarked
            os.close(old)
            _log_hold(self, self._mark_kind, self._presumed, now)
        self._running_fd, self._presumed, self._mark_kind = fd, now, kind
        self._let_go()

    def step_aside(self, pause_s: float) -> bool:
        """Let the others have the GPU for ``pause_s`` seconds, then hold it again as before (the
        pause and the wait count as waits for the lock). False, and no pause, for a hold that
        owns nothing."""
        if self._fds is None or not self.owner:
            return False
        self._let_go()
        with _waiting():
            time.sleep(pause_s)
        self.acquire()
        return True


class BrokeredHold(GpuHold):
    """A hold another process takes for this one (``use_broker``): the same waits and reentrancy,
    no file opened here."""

    def acquire(self) -> None:
        self._asked = time.time()
        with _waiting():
            _BROKER[0][0]({"lock": "acquire", "exclusive": self.exclusive, "what": self.what})
        self._held = time.time()
        self._fds = (-1, -1)  # held by the other process: nothing to close here
        _HELD[self.lock_path] = self.exclusive

    def _let_go(self) -> None:
        if self._fds is not None:
            _HELD.pop(self.lock_path, None)
            self._fds = None

    def release(self) -> None:
        if self._fds is not None or self._running_fd is not None:
            self._let_go()
            self._running_fd = None
            _BROKER[0][1]({"lock": "release"})

    def presume_hung(self, warming: bool = False) -> None:
        if not self.owner or self.exclusive or (self._fds is None and self._running_fd is None):
            return
        _BROKER[0][1]({"lock": "presume_hung", "warming": warming})
        self._running_fd = -1  # the mark is the other process's
        self._let_go()

    def step_aside(self, pause_s: float) -> bool:
        if self._fds is None or not self.owner:
            return False
        with _waiting():
            return bool(_BROKER[0][0]({"lock": "step_aside", "pause_s": pause_s}).get("stepped"))


def _marked_running(path: Path) -> bool:
    """Does some check presumed hung still run (a shared lock on ``path``)?"""
    fd = open_lock_file(path)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # releases the test's own lock too
    return False


def _wait_unmarked(path: Path) -> None:
    """Block until no check holds the mark ``path``. The caller holds the lock, so no new check
    starts; a check already warming up may still turn its mark into this one, and it too ends
    at its check's timeout at the latest."""
    fd = open_lock_file(path)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
    finally:
        os.close(fd)


def _log_hold(hold: GpuHold, kind: str, held: float, released: float) -> None:
    path = os.environ.get(LOG_ENV)
    if not path:
        return
    asked = hold._asked if kind not in ("r", "w") else held
    line = json.dumps({"pid": os.getpid(), "kind": kind, "what": hold.what, "asked": round(asked, 4),
                       "held": round(held, 4), "released": round(released, 4)}) + "\n"
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
        try:
            os.write(fd, line.encode())  # one write of one short line: appends from processes do not interleave
        finally:
            os.close(fd)
    except OSError:
        pass  # a log that cannot be written costs no check


@contextlib.contextmanager
def gpu_lock(exclusive: bool, key: str | None = None, directory: str | None = None,
             what: str = "") -> Iterator[GpuHold]:
    """Hold the GPU: alone (``exclusive``, a timed check) or beside other shared holders.
    Yields the ``GpuHold`` (``what`` names it in the lock log)."""
    if os.environ.get(LOCK_ENV, "").lower() in ("off", "0", "no", "false"):
        yield GpuHold(exclusive, key, directory, what)
        return
    held = _HELD.get(lock_paths(key, directory)[0])
    if held is not None:
        if exclusive and not held:
            raise RuntimeError("gpu_lock: exclusive asked for inside a shared hold of the same process; "
                               "release the shared hold first")
        yield GpuHold(exclusive, key, directory, what)
        return
    hold = (BrokeredHold if _BROKER else GpuHold)(exclusive, key, directory, what, owner=True)
    hold.acquire()
    try:
        yield hold
    finally:
        hold.release()


@contextlib.contextmanager
def _waiting() -> Iterator[None]:
    started = time.monotonic()
    for observer in _WAIT_OBSERVERS:
        observer(True)
    try:
        yield
    finally:
        _WAIT_ENDED[0] = time.monotonic()
        _WAITED_S[0] += _WAIT_ENDED[0] - started
        for observer in _WAIT_OBSERVERS:
            observer(False)


def _lock(exclusive: bool, lock_fd: int, turnstile_fd: int) -> None:
    if exclusive:
        fcntl.flock(turnstile_fd, fcntl.LOCK_EX)  # new shared holders now wait behind us
        try:
            fcntl.flock(lock_fd, fcntl.LOCK_EX)
        finally:
            fcntl.flock(turnstile_fd, fcntl.LOCK_UN)
    else:
        fcntl.flock(turnstile_fd, fcntl.LOCK_EX)  # pass the turnstile: no writer is waiting
        fcntl.flock(turnstile_fd, fcntl.LOCK_UN)
        fcntl.flock(lock_fd, fcntl.LOCK_SH)
