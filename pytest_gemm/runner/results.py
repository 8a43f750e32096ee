"""Each check's result as a JSON record in ``user_properties`` (so it crosses xdist), the
collector on the controller, the terminal summary and the output files."""
from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from .compare import COMPARE
from .state import GRADED_PROPERTY, RESULT_PROPERTY, STATE, is_ladder_entry, is_xdist_worker, state
from ..model.categories import FAULT, GemmCheckFailure, is_cuda_error
from ..grading.config import user_test_record
from _pytest.junitxml import xml_key
from .compare import command_line, compare_at_finish, kernel_folders
from .trace_options import trace_options


def _category(excinfo: Any) -> str | None:
    if excinfo is None:
        return None

    exc = excinfo.value
    if isinstance(exc, GemmCheckFailure):
        return exc.category
    if is_cuda_error(exc):  # in-process mode: CuPy's CUDARuntimeError / CUDADriverError
        return FAULT
    return None


def _outcome_text(call: pytest.CallInfo, report: pytest.TestReport) -> str | None:
    """What a failed or skipped test said, as text (a failure that is not a GemmCheckFailure)."""
    if report.failed:
        return str(call.excinfo.value) if call.excinfo else report.longreprtext[-2000:]
    if report.skipped and call.excinfo is not None:
        return str(getattr(call.excinfo.value, "msg", call.excinfo.value))
    return None


def _summary_and_details(call: pytest.CallInfo, report: pytest.TestReport,
                         category: str | None) -> tuple[str | None, tuple[str, ...]]:
    """A check's finding as it was raised: a GemmCheckFailure's summary and details as they are,
    anything else split from its text."""
    # lazy: keeps outputs, outputs.records, outputs.verdicts out of the plugin's load
    from ..outputs.records import split_message

    exc = call.excinfo.value if call.excinfo is not None else None
    if report.failed and isinstance(exc, GemmCheckFailure):
        return exc.summary, tuple(exc.details)
    return split_message(_outcome_text(call, report), category)


def record_facts(item: pytest.Item, facts: dict[str, Any]) -> None:
    """Add facts (resources, timings...) to the record this test's check will report: kept as
    they are until the record is built, and serialised once, with it."""
    item.stash.setdefault(FACTS, {}).update(facts)


FACTS = pytest.StashKey[dict]()


def annotate_report(item: pytest.Item, call: pytest.CallInfo, report: pytest.TestReport) -> None:
    """Attach the check's typed record (kernel, check, shape, outcome, category, summary,
    details, facts), serialised once: it crosses xdist as this one JSON property."""
    # lazy: keeps outputs, outputs.records, outputs.verdicts out of the plugin's load
    from ..outputs.records import CheckRecord

    params = item.callspec.params if hasattr(item, "callspec") else {}
    if report.failed and report.when == "call" and _category(call.excinfo) and call.excinfo is not None \
            and not item.config.getoption("fulltrace", False):
        if isinstance(call.excinfo.value, GemmCheckFailure):  # the whole message; our code's traceback is noise
            report.longrepr = str(call.excinfo.value)
    if report.when not in ("setup", "call") or (report.when == "setup" and report.passed):
        return
    if params.get("gemm_case") is not None:
        case = params["gemm_case"]
        if case.check == "sweep" and report.skipped and not state(item.config).sweep:
            return  # no sweep asked for: no record, so no empty "sweep" test in the reports or Gradescope
        kernel, check, shape, extra = case.kernel, case.check, list(case.shape), case.params
    elif params.get("gemm_kernel_arch") is not None:
        kernel, arch, *build = params["gemm_kernel_arch"]  # a launcher's: (launcher, arch, the CudaKernel it builds)
        check, shape, extra = "compile", None, ({"arch": arch} if arch else {})
        if build:
            extra["build"] = str(build[0].name)
    else:
        _annotate_graded_test(item, call, report)
        return
    category = _category(call.excinfo)
    summary, details = _summary_and_details(call, report, category)
    requested = getattr(params.get("gemm_case"), "requested", None)
    record = CheckRecord(
        kernel=str(kernel.name), precision=kernel.precision, check=check, shape=shape, params=dict(extra),
        outcome=report.outcome, category=category, summary=summary, details=details,
        # timed for the ranking only; its conformance is the ladder's own run
        ladder=is_ladder_entry(item.config, kernel),
        # run at the nearest shape the kernel claims (its multiple_of)
        requested_shape=list(requested) if requested is not None else None,
        # the test's wall time: slow checks show in the report
        wall_s=round(report.duration, 3) if report.when == "call" else None,
        facts=dict(item.stash.get(FACTS, {})))
    value = json.dumps(record.to_dict(), default=str)
    report.user_properties.append((RESULT_PROPERTY, value))
    # pytest's junitxml writes the properties of the teardown report, which copies the item's:
    # the record goes there too, and the collector reads it from the setup or call report only.
    item.user_properties.append((RESULT_PROPERTY, value))


def _annotate_graded_test(item: pytest.Item, call: pytest.CallInfo, report: pytest.TestReport) -> None:
    """A user's own test marked gemm_weight / gemm_visibility: its own Gradescope test."""
    record = user_test_record(item, report.outcome, _outcome_text(call, report), _category(call.excinfo))
    if record is not None:
        report.user_properties.append((GRADED_PROPERTY, json.dumps(record)))


class ResultCollector:
    """Gathers every check's JSON record, on the controller too under xdist."""

    def __init__(self, config: pytest.Config):
        self.config = config

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        # lazy: keeps outputs, outputs.records, outputs.verdicts out of the plugin's load
        from ..outputs.records import CheckRecord

        if report.when == "teardown":
            return  # it carries a copy of the record for JUnit (annotate_report)
        for name, value in getattr(report, "user_properties", ()):
            if name == RESULT_PROPERTY:
                state(self.config).results.append(CheckRecord.from_dict(json.loads(value)))
            elif name == GRADED_PROPERTY:
                state(self.config).graded.append(json.loads(value))


def run_results(config: pytest.Config) -> Any:
    """The run's ``RunResults``, built once from the collected records (after the last test)."""
    # lazy: keeps outputs, outputs.records, outputs.verdicts out of the plugin's load
    from ..outputs.records import RunResults

    st = state(config)
    if st.run is None:
        st.run = RunResults.build(st.results)
    return st.run


def terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    # lazy: keeps outputs, outputs.launch_view, outputs.process_time, outputs.records, outputs.report, outputs.verdicts out of the plugin's load
    from ..outputs.report import summary_lines

    if STATE not in config.stash:
        return
    for line in summary_lines(state(config), run_results(config), trace_options(config)["own_kernel"]):
        terminalreporter.write_line(line)


def write_outputs(config: pytest.Config) -> None:
    if STATE not in config.stash or is_xdist_worker(config):
        return
    st = state(config)
    # lazy: keeps outputs, outputs.junit, outputs.launch_view, outputs.meta, outputs.records, outputs.verdicts out of the plugin's load
    from ..outputs.junit import add_verdict_properties
    # lazy: keeps outputs, outputs.launch_view, outputs.process_time, outputs.records, outputs.report, outputs.verdicts out of the plugin's load
    from ..outputs.report import json_report, write_json

    run = run_results(config)
    for result in run.kernels.values():
        config.hook.pytest_gemm_kernel_result(config=config, result=result)
    # lazy: keeps outputs, outputs.junit, outputs.launch_view, outputs.meta, outputs.records, outputs.verdicts out of the plugin's load
    from ..outputs.junit import add_run_property

    path = getattr(config.option, "gemm_report", None)
    named = bool(path) or config.stash.get(COMPARE, None) is not None  # the device: in a written or compared report
    report = json_report(run, with_device=named, command=command_line(config), cwd=str(config.invocation_params.dir),
                         folders=kernel_folders(config),
                         # the CUDA versions also for JUnit's gemm:run; not for a grader's plain run
                         with_versions=named or config.stash.get(xml_key, None) is not None)
    report["confinement"] = st.confinement  # kernels/confine.py: what the kernels' processes ran under
    config.hook.pytest_gemm_report(config=config, report=report)
    add_verdict_properties(config, run)
    add_run_property(config, report["meta"])
    if path:  # written before the comparison: nothing it does can cost the run its report
        write_json(Path(path), report)
    compare_at_finish(config, report)
    plot = st.plot
    if plot:
        # lazy: keeps measure.sweep, outputs, outputs.launch_view, outputs.plot, outputs.process_time, outputs.records, outputs.report, outputs.sweep_table, outputs.verdicts out of the plugin's load
        from ..outputs.plot import plot_ranking

        try:
            what = plot_ranking(run, Path(plot))
            st.notes.append(f"--gemm-plot: {what} drawn to {plot}")
        except Exception as exc:  # a plot must not cost the run its results
            st.notes.append(f"--gemm-plot: could not draw {plot}: {type(exc).__name__}: {exc}")
    gradescope = getattr(config.option, "gemm_gradescope", None)
    if gradescope:
        # lazy: keeps grading, grading.config, grading.gradescope, measure.quiet, outputs, outputs.records, outputs.verdicts out of the plugin's load
        from ..grading.gradescope import write_results

        write_results(Path(gradescope), run, st.grading, graded=st.graded,
                      kernels=[str(k.name) for k in st.kernels] if st.user_kernels else None,
                      execution_time=time.monotonic() - st.started, confinement=st.confinement,
                      own_kernel=trace_options(config)["own_kernel"])
