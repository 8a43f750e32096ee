"""The folders of a run that a kernel's (confined) process shares with the others: it reads the
class's shared measurements, which only the judging processes write (``trusted_measures.py``),
and writes nothing shared. The GPU-wide lock's files and its log are not in its sandbox at all:
its parent takes the lock for it (``checks/lock_broker.py``). ``kernels/confine.py`` binds
exactly these, docs/security.md says what that leaves open."""
from __future__ import annotations

import os

from .run_cache import CACHE_ENV


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
