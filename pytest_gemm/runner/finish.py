"""``pytest_sessionfinish``: a run that could not test what it was asked to fails (exit status 1),
with one line saying why (nothing passes silently; the pure judgements are ``completeness.py``)."""
from __future__ import annotations

from typing import Any

import pytest

from .configure import REQUIRE_GPU_HINT
from .state import STATE, is_xdist_worker
from ..model.contract import CudaKernel


def require_gpu_at_finish(session: pytest.Session) -> None:
    """--gemm-require-gpu: a run in which every GPU check was skipped fails (exit status 1)."""
    config = session.config
    st = config.stash.get(STATE, None)
    if st is None or not st.require_gpu or is_xdist_worker(config):
        return
    # lazy: keeps outputs, outputs.records, outputs.verdicts, runner.completeness out of the plugin's load
    from .completeness import gpu_checks_not_run

    reason = gpu_checks_not_run(st.results)
    if reason is not None:
        _fail_at_finish(session, st, f"--gemm-require-gpu: {reason}; {REQUIRE_GPU_HINT}")


def _fail_at_finish(session: pytest.Session, st: Any, note: str) -> None:
    """The run fails (exit status 1 unless it failed already), with ``note`` in the summary."""
    st.notes.append(note)
    if session.exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def nothing_compiled_at_finish(session: pytest.Session) -> None:
    """A compile-only run (--gemm-arch) in which nothing compiled fails (exit status 1), with why;
    in one that compiled something, each kernel under test none of whose compile checks ran is
    named in the summary (the run is judged by what it compiled)."""
    config = session.config
    st = config.stash.get(STATE, None)
    if st is None or not st.arches or is_xdist_worker(config) or not st.kernels:
        return
    # lazy: keeps outputs, outputs.records, outputs.verdicts, runner.completeness out of the plugin's load
    from .completeness import nothing_compiled

    reason = nothing_compiled(st.results)
    if reason is not None:
        _fail_at_finish(session, st, f"pytest-gemm: {reason}")
        return
    # lazy: keeps outputs, outputs.records, outputs.verdicts, runner.completeness out of the plugin's load
    from .completeness import uncompiled_kernels

    st.notes.extend(uncompiled_kernels(st.results, [str(k.name) for k in st.kernels]))  # named, not failed


def nothing_tested_at_finish(session: pytest.Session) -> None:
    """A kernel under test of which nothing was tested (no GPU, nothing to compile) fails the run
    (exit status 1), one line naming it; a compile-only run is judged by what it compiled."""
    config = session.config
    st = config.stash.get(STATE, None)
    if st is None or st.arches or is_xdist_worker(config) or not st.kernels:
        return
    # lazy: keeps outputs, outputs.records, outputs.verdicts, runner.completeness out of the plugin's load
    from .completeness import untested_kernels

    launchers = {str(k.name) for k in st.kernels if not isinstance(k, CudaKernel)}
    for line in untested_kernels(st.results, launchers):
        _fail_at_finish(session, st, line)
