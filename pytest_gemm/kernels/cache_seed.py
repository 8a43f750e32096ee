"""A confined kernel's CuPy cache seeded with the harness's own compiled kernels.

The gradebook compiles the CuPy kernels pytest-gemm's checks use once, in a trusted priming run
(``grading/harness_seed.py``), and names that run's cache folder in ``PYTEST_GEMM_CUPY_SEED``.
When ``confine.compile_caches`` makes a kernel's own caches, the seed's files are copied into
its CuPy folder, so the kernel's process finds them instead of compiling them again; before each
of its checks ``checks/sandbox_confine.py`` ``reseed_confined`` copies what the seed gained since
(the priming runs fill it beside the class's first students). Copied, never linked: a submission may change its own copy (its own cache, as before), never the seed
nor another kernel's copy; the seed's folder is bound into no sandbox.
"""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

SEED_ENV = "PYTEST_GEMM_CUPY_SEED"


def still_written(name: str) -> bool:
    """A file CuPy is still writing: it writes each cache file under a temporary name
    (``tempfile``'s "tmp...") and renames it whole (the priming runs fill the seed beside the class)."""
    return name.startswith("tmp")


def seed_cupy_cache(into: Path) -> int:
    """Copy each file of the seed (``PYTEST_GEMM_CUPY_SEED``; none named or gone: nothing) that
    ``into`` lacks; returns how many. Each copy is readable by all (0644): CuPy writes its cache
    files for their owner only, and root's graders run the sandbox as a user of its own, which
    needs only to read them. A failure ends the seeding, never the kernel's start: a file not
    copied is compiled on first use, as without a seed."""
    seed = os.environ.get(SEED_ENV, "")
    if not seed or not os.path.isdir(seed):
        return 0
    copied = 0
    try:
        for entry in os.scandir(seed):
            target = into / entry.name
            if not entry.is_file(follow_symlinks=False) or os.path.lexists(target):
                continue  # already there: copied for an earlier process of this kernel, or its own
            if still_written(entry.name):
                continue
            fd, temp = tempfile.mkstemp(dir=into, prefix=".seed-")
            try:
                with os.fdopen(fd, "wb") as out, open(entry.path, "rb") as source:
                    shutil.copyfileobj(source, out)
                    os.fchmod(out.fileno(), 0o644)  # the file itself: the kernel may be running beside
                os.replace(temp, target)  # whole or not at all, beside a process of this kernel reading it
            except OSError:
                os.unlink(temp)
                raise
            copied += 1
    except OSError:
        pass
    return copied
