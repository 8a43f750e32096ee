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
"""
from __future__ import annotations

import contextlib
import os
import re
import tempfile
import time
from pathlib import Path
from typing import Callable, Iterator

LOCK_DIR_ENV = "PYTEST_GEMM_LOCK_DIR"
LOCK_ENV = "PYTEST_GEMM_GPU_LOCK"


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


def _open(path: Path) -> int:
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


def observe_waits(observer: Callable[[bool], None]) -> None:
    """Call ``observer(True)`` when this process starts waiting for the lock, ``observer(False)``
    once it holds it."""
    _WAIT_OBSERVERS.append(observer)


def waited_seconds() -> float:
    """Seconds this process has spent waiting for the lock so far."""
    return _WAITED_S[0]


@contextlib.contextmanager
def gpu_lock(exclusive: bool, key: str | None = None, directory: str | None = None) -> Iterator[None]:
    """Hold the GPU: alone (``exclusive``, a timed check) or beside other shared holders."""
    if os.environ.get(LOCK_ENV, "").lower() in ("off", "0", "no", "false"):
        yield
        return
    held = _HELD.get(lock_paths(key, directory)[0])
    if held is not None:
        if exclusive and not held:
            raise RuntimeError("gpu_lock: exclusive asked for inside a shared hold of the same process; "
                               "release the shared hold first")
        yield
        return
    with _acquired(exclusive, key, directory):
        yield


@contextlib.contextmanager
def _acquired(exclusive: bool, key: str | None, directory: str | None) -> Iterator[None]:
    lock_path, turnstile_path = lock_paths(key, directory)
    lock_fd, turnstile_fd = _open(lock_path), _open(turnstile_path)
    try:
        with _waiting():
            _lock(exclusive, lock_fd, turnstile_fd)
        _HELD[lock_path] = exclusive
        yield
    finally:
        _HELD.pop(lock_path, None)
        os.close(lock_fd)  # closing releases the lock
        os.close(turnstile_fd)


@contextlib.contextmanager
def _waiting() -> Iterator[None]:
    started = time.monotonic()
    for observer in _WAIT_OBSERVERS:
        observer(True)
    try:
        yield
    finally:
        _WAITED_S[0] += time.monotonic() - started
        for observer in _WAIT_OBSERVERS:
            observer(False)


def _lock(exclusive: bool, lock_fd: int, turnstile_fd: int) -> None:
    import fcntl

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
