"""Which confinement submitted code runs under in this run (``kernels/confine.py``).

``--gemm-confine auto|bubblewrap|landlock|none``; without it, ``none`` (a kernel author's own
run keeps today's behaviour) unless the run grades (``--gemm-gradescope``) or the ini requires
one (``gemm_require_confinement``): then ``auto``, the strongest this machine allows. A course's
``gemm_require_confinement = LEVEL`` refuses to grade under anything weaker.
"""
from __future__ import annotations

import os
from typing import Any, Callable

import pytest

from .state import is_xdist_worker
from ..kernels import confine
from ..measure.gpu_lock import LOCK_DIR_ENV, lock_paths


def choose(config: pytest.Config, fail: Callable[[str], None]) -> str:
    """The level for this run, made active for the children this process starts; ``fail(reason)``
    (writes a Gradescope failure) is called before a refusal is raised as a UsageError."""

    asked = getattr(config.option, "gemm_confine", None)
    required = str(config.getini("gemm_require_confinement") or "").strip()
    if required and required not in confine.LEVELS:
        reason = (f"gemm_require_confinement = {required!r} (in {config.inipath or 'the pytest ini'}): "
                  f"expected one of {', '.join(confine.LEVELS)}")
        fail(reason)  # a grading run still writes its results.json saying why
        raise pytest.UsageError(reason)
    if asked is None:
        asked = "auto" if required or getattr(config.option, "gemm_gradescope", None) else "none"
    try:
        level = confine.resolve(asked)
    except ValueError as exc:
        reason = f"--gemm-confine {asked}: {exc}; or --gemm-confine auto for the strongest available"
        fail(reason)
        raise pytest.UsageError(reason) from None
    if required and confine.rank(level) < confine.rank(required):
        why = confine.why_not(required) or f"--gemm-confine {asked} asked for less"
        reason = (f"pytest-gemm: not grading: gemm_require_confinement = {required}, but this run's confinement is "
                  f"{level} ({why})")
        fail(reason)
        raise pytest.UsageError(reason)
    lock_dir = os.path.realpath(lock_paths()[0].parent)
    inside = confine.exposed_lock_dir(lock_dir) if level != "none" else None
    if inside is not None:
        reason = (f"pytest-gemm: not confining: the GPU lock's folder {lock_dir} ({LOCK_DIR_ENV}, else the system's "
                  f"temporary directory) is inside {inside}, which confined kernels can read, so a submission could "
                  f"lock the lock's files; set {LOCK_DIR_ENV} to a folder outside it (the system's temporary "
                  "directory is, by default)")
        fail(reason)
        raise pytest.UsageError(reason)
    confine.use(level)
    if level != "none":
        confine.run_compile_caches()  # made here, before xdist starts its workers: they inherit it
    return level


def note(st: Any, config: pytest.Config) -> None:
    """The terminal's line saying which confinement submitted code ran under."""

    if st.user_kernels and not is_xdist_worker(config) and (st.confinement != "none" or st.grading_run):
        st.notes.append(f"pytest-gemm: submitted code ran confined by {confine.describe(st.confinement)}")
