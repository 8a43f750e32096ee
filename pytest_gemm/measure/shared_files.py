"""The files and folders of a run that a kernel's (confined) process writes besides its own
scratch: the GPU-wide lock's files, its log, and the class's shared measurements
(``kernels/confine.py`` binds exactly these; docs/security.md says what that leaves open)."""
from __future__ import annotations

import os

from .gpu_lock import LOCK_DIR_ENV, LOG_ENV, gpu_key, lock_paths, running_path
from .run_cache import CACHE_ENV


def shared_files(env: dict[str, str] | None = None) -> tuple[list[str], list[str]]:
    """(files, folders) for a kernel process started with ``env``."""
    env = dict(os.environ if env is None else env)
    key, where = gpu_key(env), env.get(LOCK_DIR_ENV) or None
    lock, turnstile = lock_paths(key, where)
    files = [str(lock), str(turnstile), str(running_path(key, where))]
    if env.get(LOG_ENV):
        files.append(env[LOG_ENV])
    return files, [env[CACHE_ENV]] if env.get(CACHE_ENV) else []
