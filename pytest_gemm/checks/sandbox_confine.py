"""The kernel's child process confined (``kernels/confine.py``): its command, Popen arguments and
environment. It writes no file of the run's: the GPU lock is taken for it by its parent
(``checks/lock_broker.py``), so the lock's files and log are not in its sandbox."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ..kernels import confine
from ..kernels.cache_seed import SEED_ENV, seed_cupy_cache
from ..kernels.sandbox_env import environ_for
from ..kernels.declared import spec_folder
from ..measure.shared_files import shared_readable
from .lock_broker import child_env


def confines(spec: str) -> bool:
    """Whether the kernel ``spec``'s process runs confined: under the run's confinement, unless it
    is the shipped ladder (``gemm:``), which is ours."""
    return confine.active() != "none" and not spec.startswith("gemm:")


def confined_command(cmd: list[str], spec: str, rootdir: str, env: dict[str, str]
                     ) -> tuple[list[str], dict[str, Any], dict[str, str]]:
    """The child's command, Popen arguments and environment under the run's confinement
    (``kernels/confine.py``; unchanged when it runs unconfined)."""
    if not confines(spec):
        return cmd, {}, env
    folder = spec_folder(spec, Path(rootdir))
    seen = child_env(environ_for(env, confine.active()))  # no grader's token or credential (sandbox_env.py)
    return (confine.command(cmd, readable=[folder, *shared_readable(env)], chdir=folder,
                            caches=confine.compile_caches(spec)), confine.popen_kwargs(), seen)


def reseed_confined(spec: str) -> int:
    """Before each check of a confined kernel: the seed's files that came since its caches were
    made, copied into its CuPy cache (``kernels/cache_seed.py``), so that a student of a class's
    first round finds what the priming runs have compiled by then, not only by its start. Returns
    how many files."""
    if not confines(spec) or not os.environ.get(SEED_ENV):
        return 0
    return seed_cupy_cache(Path(confine.compile_caches(spec, seed=False)) / "cupy")
