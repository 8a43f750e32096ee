"""The files and folders of a run that a kernel's (confined) process shares with the others:
it writes the GPU-wide lock's files and its log besides its own scratch, and reads the class's
shared measurements, which only the judging processes write (``trusted_measures.py``);
``kernels/confine.py`` binds exactly these, docs/security.md says what that leaves open."""
from __future__ import annotations

import os

from .gpu_lock import LOCK_DIR_ENV, LOG_ENV, gpu_key, lock_paths, running_path, warming_path
from .run_cache import CACHE_ENV


def shared_files(env: dict[str, str] | None = None) -> list[str]:
    """The files a kernel process started with ``env`` writes."""
    env = dict(os.environ if env is None else env)
    key, where = gpu_key(env), env.get(LOCK_DIR_ENV) or None
    lock, turnstile = lock_paths(key, where)
    files = [str(lock), str(turnstile), str(running_path(key, where)), str(warming_path(key, where))]
    if env.get(LOG_ENV):
        files.append(env[LOG_ENV])
    return files


def shared_readable(env: dict[str, str] | None = None) -> list[str]:
    """The folders a kernel process started with ``env`` reads and may not write: the run's
    shared measurements, made here (and opened to the sandbox's own user) if missing."""
    env = dict(os.environ if env is None else env)
    folder = env.get(CACHE_ENV)
    if not folder:
        return []
    os.makedirs(folder, exist_ok=True)
    try:
        os.chmod(folder, 0o755)  # a root grader's sandbox user reads it; only this user writes it
    except OSError:
        pass
    return [folder]
