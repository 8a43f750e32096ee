"""The run's meta block as the runner knows it (command line, kernels' folders), the terminal
header's short form, and ``--gemm-compare`` / ``--gemm-compare-fail``: read and checked at
configure time, compared and gated at the end (``outputs/compare.py``)."""
from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Any

import pytest

from .state import STATE, is_xdist_worker


@dataclass(frozen=True)
class CompareOptions:
    path: str
    old: dict[str, Any]
    threshold: float | None
    noise: float


COMPARE = pytest.StashKey[CompareOptions]()
GATE = pytest.StashKey[str]()


def configure_compare(config: pytest.Config) -> None:
    """Check --gemm-compare, --gemm-compare-fail and --gemm-compare-noise now, not after the whole run."""
    path = getattr(config.option, "gemm_compare", None)
    fail = getattr(config.option, "gemm_compare_fail", None)
    noise_text = getattr(config.option, "gemm_compare_noise", None)
    if not path and not fail and not noise_text:
        return
    # lazy: keeps outputs, outputs.compare, outputs.speed_stats out of the plugin's load
    from ..outputs.compare import parse_fail, parse_noise, read_report
    # lazy: keeps outputs, outputs.speed_stats out of the plugin's load
    from ..outputs.speed_stats import RUN_NOISE, StatisticsUnavailable, require_scipy

    try:
        threshold = parse_fail(fail) if fail is not None else None
        noise = parse_noise(noise_text) if noise_text is not None else RUN_NOISE
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from None
    if not path:
        given = f"--gemm-compare-fail={fail}" if fail else f"--gemm-compare-noise={noise_text}"
        raise pytest.UsageError(f"{given} needs the saved run to compare with: add "
                                "--gemm-compare OLD.json (a report written by --gemm-report)")
    if is_xdist_worker(config):
        return
    try:
        require_scipy()
        old = read_report(path)
    except (StatisticsUnavailable, ValueError) as exc:
        raise pytest.UsageError(f"--gemm-compare {path}: {exc}" if isinstance(exc, StatisticsUnavailable)
                                else str(exc)) from None
    config.stash[COMPARE] = CompareOptions(str(path), old, threshold, noise)


def command_line(config: pytest.Config) -> str:
    return shlex.join(["pytest", *map(str, config.invocation_params.args)])


def kernel_folders(config: pytest.Config) -> list[str]:
    """The folders of the kernels under test; the ladder's when none was given."""
    # lazy: keeps outputs, outputs.meta, outputs.records, outputs.verdicts out of the plugin's load
    from ..outputs.meta import kernel_folders as folders

    st = config.stash.get(STATE, None)
    found = folders(st.kernels) if st is not None and st.user_kernels else []
    if not found:
        # lazy: keeps kernels.autotune, kernels.confine, kernels.declared, kernels.loader out of the plugin's load
        from ..kernels.loader import shipped_dir

        try:
            found = [str(shipped_dir("reference_kernels"))]
        except Exception:  # noqa: BLE001 - the report says null, never fails the run
            found = []
    return found


def report_header(config: pytest.Config) -> list[str]:
    """The short form of what this run is (only in a run that uses the plugin)."""
    st = config.stash.get(STATE, None)
    if st is None or not st.active or is_xdist_worker(config):
        return []
    # lazy: keeps outputs, outputs.meta, outputs.records, outputs.verdicts out of the plugin's load
    from ..outputs.meta import build_meta, gpu_name, short_form

    lines = ["pytest-gemm: " + short_form(build_meta(None, None, kernel_folders(config), gpu_name()))
             .removeprefix("pytest-gemm ")]
    options = config.stash.get(COMPARE, None)
    if options is not None:
        old_meta = options.old.get("meta")
        lines.append(f"pytest-gemm: comparing with {options.path}: "
                     + (short_form(old_meta).removeprefix("pytest-gemm ") if old_meta
                        else "a report older than schema 3 (no meta block: its setup is unknown)"))
    return lines


def compare_at_finish(config: pytest.Config, report: dict[str, Any]) -> None:
    """Compare this run's report with the saved one; the lines go to the summary, a failed gate
    to ``GATE`` (``fail_at_finish`` sets the exit status)."""
    options = config.stash.get(COMPARE, None)
    if options is None:
        return
    # lazy: keeps outputs, outputs.compare, outputs.speed_stats out of the plugin's load
    from ..outputs.compare import compare, render

    st = config.stash[STATE]
    try:
        result = compare(options.old, report, options.threshold, options.path, options.noise)
    except Exception as exc:  # a comparison that cannot be made costs the run neither its report nor its summary
        failure = (f"--gemm-compare {options.path}: the comparison could not be made ({type(exc).__name__}: {exc}); "
                   "the report and the summary are complete without it")
        st.notes += ["", "--gemm-compare:", failure]
        if options.threshold is not None:
            config.stash[GATE] = failure
        return
    st.notes += ["", "--gemm-compare:"] + render(result)
    failure = result.gate_failure()
    if failure:
        config.stash[GATE] = failure


def fail_at_finish(session: pytest.Session) -> None:
    if session.config.stash.get(GATE, None) and session.exitstatus in (pytest.ExitCode.OK,
                                                                      pytest.ExitCode.NO_TESTS_COLLECTED):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
