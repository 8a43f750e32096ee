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
"""
from __future__ import annotations

import contextlib
import os
import re
import tempfile
from pathlib import Path
from typing import Iterator

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


@contextlib.contextmanager
def gpu_lock(exclusive: bool, key: str | None = None, directory: str | None = None) -> Iterator[None]:
    """Hold the GPU: alone (``exclusive``, a timed check) or beside other shared holders."""
    if os.environ.get(LOCK_ENV, "").lower() in ("off", "0", "no", "false"):
        yield
        return
    import fcntl

    lock_path, turnstile_path = lock_paths(key, directory)
    lock_fd, turnstile_fd = _open(lock_path), _open(turnstile_path)
    try:
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
        yield
    finally:
        os.close(lock_fd)  # closing releases the lock
        os.close(turnstile_fd)
