"""What the plugin's hooks do: load kernels, parametrize, skip, record results.

State lives in ``config.stash``; results travel as JSON in ``user_properties``
so they cross pytest-xdist to the controller.
"""
from __future__ import annotations

import importlib.util
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from .cases import build_cases, parse_shape, skip_reason
from .contract import GemmKernel, GemmSpecError, short_id

RESULT_PROPERTY = "gemm_result"
GRADED_PROPERTY = "gemm_graded"  # a user test with gemm_weight / gemm_visibility markers


@dataclass
class GemmState:
    kernels: list[GemmKernel]
    user_kernels: bool                 # given with --gemm-kernel / gemm_kernels
    arches: list[str] | None           # --gemm-arch: compile-only mode
    bench_shape: tuple[int, int, int]
    min_cublas_fraction: float | None
    isolation: str = "process"
    timeout: float | None = None
    gpu_shared: bool = False           # xdist workers outnumber GPUs: timings are marked
    results: list[dict[str, Any]] = field(default_factory=list)
    sandboxes: dict[Any, Any] = field(default_factory=dict)   # kernel id (or "ladder") -> SandboxClient
    grading: Any = None                                          # gradescope.GradingConfig
    sweep: list[tuple[int, int, int]] | None = None              # --gemm-sweep sizes
    plot: str | None = None                                      # --gemm-plot path
    notes: list[str] = field(default_factory=list)               # lines for the terminal summary
    graded: list[dict[str, Any]] = field(default_factory=list)   # user tests' records
    started: float = field(default_factory=time.monotonic)
    rank_ladder: bool = False          # --gemm-ladder: time the ladder beside the kernels under test
    ladder: list[GemmKernel] | None = None                       # those rungs, once loaded


STATE = pytest.StashKey[GemmState]()


def state(config: pytest.Config) -> GemmState:
    return config.stash[STATE]


def conformance_dir() -> Path:
    spec = importlib.util.find_spec("conformance")
    if spec is None or not spec.submodule_search_locations:
        raise pytest.UsageError("the conformance package is not installed; reinstall pytest-gemm")
    return Path(list(spec.submodule_search_locations)[0])


LADDER_SPEC = "reference_kernels:LADDER"


def _is_xdist_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def _precheck_compile(kernels: list[GemmKernel]) -> None:
    """Compile user CUDA kernels once, offline, so a compile error ends the run
    with NVRTC's log instead of failing every test. Skipped without NVRTC."""
    from .contract import CudaKernel

    try:
        from .compiler import GemmCompileError, GemmToolchainError, compile_for_arch
    except ImportError:  # pragma: no cover
        return
    for k in kernels:
        if not isinstance(k, CudaKernel):
            continue
        try:
            compile_for_arch(k, k.claimed_arches()[0] if k.claimed_arches() else "sm_80", output="ptx")
        except GemmToolchainError:
            return
        except GemmCompileError as exc:
            raise pytest.UsageError(str(exc)) from None


def _grading(config: pytest.Config) -> Any:
    from .gradescope import GradingConfig

    try:
        return GradingConfig.from_ini(config.getini)
    except ValueError as exc:
        raise pytest.UsageError(f"{exc} (in {config.inipath or 'the pytest ini'})") from None


def _gradescope_failure(config: pytest.Config, grading: Any, reason: str) -> None:
    """Under --gemm-gradescope, a run that stops before any check still writes results (score 0, the reason)."""
    path = getattr(config.option, "gemm_gradescope", None)
    if path and not _is_xdist_worker(config):
        from .gradescope import write_failure_results

        write_failure_results(Path(path), reason, grading)


def configure(config: pytest.Config) -> None:
    gpu_shared = False
    if _is_xdist_worker(config):  # before anything in this worker touches CUDA
        from .gpus import pin_worker, visible_gpu_ids

        workers = int(config.workerinput.get("workercount", 1))  # type: ignore[attr-defined]
        gpu_shared = workers > max(1, len(visible_gpu_ids()))  # timings then disturb each other
        pin_worker(config.workerinput["workerid"])  # type: ignore[attr-defined]
    opt = config.option
    specs = list(getattr(opt, "gemm_kernel", None) or []) or list(config.getini("gemm_kernels"))
    try:
        arches = None
        if getattr(opt, "gemm_arch", None):
            from .compiler import parse_arch_list

            arches = parse_arch_list(opt.gemm_arch)
        bench = parse_shape(opt.gemm_bench_shape) if getattr(opt, "gemm_bench_shape", None) else (4096, 4096, 4096)
        sweep = None
        if getattr(opt, "gemm_sweep", None):
            from .sweep import parse_sweep

            sweep = parse_sweep(opt.gemm_sweep)
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from None
    grading = _grading(config)
    fraction = getattr(opt, "gemm_min_cublas_fraction", None)
    if fraction is not None and not 0 < fraction <= 10:
        raise pytest.UsageError(f"--gemm-min-cublas-fraction {fraction}: expected a fraction such as 0.5 (of cuBLAS)")
    plot = getattr(opt, "gemm_plot", None)
    if plot and not _is_xdist_worker(config):  # checked now, not after the whole run
        from .plot import PlotUnavailableError, require_matplotlib

        try:
            require_matplotlib()
        except PlotUnavailableError as exc:
            raise pytest.UsageError(str(exc)) from None
    if specs:
        from .loader import load_specs

        try:
            kernels = load_specs(specs, Path(config.invocation_params.dir))
        except GemmSpecError as exc:
            _gradescope_failure(config, grading, str(exc))
            raise pytest.UsageError(str(exc)) from None
        if not _is_xdist_worker(config):
            try:
                _precheck_compile(kernels)
            except pytest.UsageError as exc:
                _gradescope_failure(config, grading, str(exc))
                raise
    else:
        kernels = []
    timeout = getattr(opt, "gemm_timeout", None)
    if timeout is not None and timeout <= 0:
        raise pytest.UsageError(f"--gemm-timeout {timeout}: expected a number of seconds > 0, e.g. 60")
    config.stash[STATE] = GemmState(kernels, bool(specs), arches, bench, fraction, gpu_shared=gpu_shared,
                                    isolation=getattr(opt, "gemm_isolation", "process"), timeout=timeout, grading=grading,
                                    sweep=sweep, plot=plot,
                                    # a grader scores the student's own checks only
                                    rank_ladder=bool(specs) and not getattr(opt, "gemm_gradescope", None)
                                    and bool(getattr(opt, "gemm_ladder", False)))
    config.pluginmanager.register(ResultCollector(config), f"gemm-results-{id(config)}")
    # `pytest --gemm-kernel mod:k` (or --gemm-arch) with no test path runs the shipped suite.
    if (specs or arches) and config.args_source != pytest.Config.ArgsSource.ARGS:
        config.args[:] = [str(conformance_dir())]


def kernels_under_test(config: pytest.Config) -> list[GemmKernel]:
    st = state(config)
    if not st.kernels:  # the ladder is the default target, loaded only when a test asks for it
        from .loader import load_spec

        st.kernels = load_spec(LADDER_SPEC)
    return st.kernels


def ladder_for_ranking(config: pytest.Config) -> list[GemmKernel]:
    """With --gemm-ladder, the ladder rungs and cuBLAS baselines timed beside the kernels under
    test: those of the precisions under test (none when the ladder itself is under test)."""
    st = state(config)
    if not st.rank_ladder:
        return []
    if st.ladder is None:
        from .loader import load_spec

        under_test = kernels_under_test(config)
        precisions = {k.precision for k in under_test}
        specs = {getattr(k, "origin_spec", ("", 0))[0].partition(":")[0] for k in under_test}
        st.ladder = [] if "reference_kernels" in specs else \
            [k for k in load_spec(LADDER_SPEC) if k.precision in precisions]
    return st.ladder


def is_ladder_entry(config: pytest.Config, kernel: GemmKernel) -> bool:
    """True for a rung timed only for the ranking (not a kernel under test)."""
    return any(kernel is k for k in state(config).ladder or ())


def generate_tests(metafunc: pytest.Metafunc) -> None:
    if "gemm_case" not in metafunc.fixturenames:
        return
    marker = metafunc.definition.get_closest_marker("gemm_cases")
    if marker is None:
        raise pytest.UsageError(f"{metafunc.definition.nodeid}: uses gemm_case without a @pytest.mark.gemm_cases(...) marker")
    check = marker.args[0] if marker.args else marker.kwargs["check"]
    shapes = marker.kwargs.get("shapes") or (marker.args[1] if len(marker.args) > 1 else None)
    if shapes == "bench":
        shapes = [state(metafunc.config).bench_shape]
    params = marker.kwargs.get("params") or ({},)
    per_kernel = bool(marker.kwargs.get("per_kernel"))  # one test per kernel (the sweep): id <check>-<kernel>
    cases = build_cases(check, kernels_under_test(metafunc.config), shapes, params, marker.kwargs.get("when"))
    if check == "speed":  # ranked with the ladder: its rungs are timed in the same run
        cases += build_cases(check, ladder_for_ranking(metafunc.config), shapes, params)
    values = []
    for case in cases:
        reason = None if per_kernel else skip_reason(case.kernel, case.shape)  # a sweep skips sizes itself
        marks = [pytest.mark.skip(reason=reason)] if reason else []
        test_id = f"{check}-{short_id(str(case.kernel.name))}" if per_kernel else case.id
        if is_ladder_entry(metafunc.config, case.kernel):
            test_id = test_id.replace(f"{check}-", f"{check}-ladder-", 1)
        values.append(pytest.param(case, id=test_id, marks=marks))
    if not values:
        values = [pytest.param(None, id=f"{check}-none", marks=pytest.mark.skip(
            reason=f"no kernel under test has what the {check} check needs"))]
    metafunc.parametrize("gemm_case", values)


def _required_cc(item: pytest.Item) -> tuple[int, int] | None:
    marker = item.get_closest_marker("gemm_requires_cc")
    if marker is None:
        return None
    try:
        major, minor = (int(x) for x in marker.args)
    except (TypeError, ValueError):
        raise pytest.UsageError(f"{item.nodeid}: use @pytest.mark.gemm_requires_cc(major, minor), "
                                f"e.g. gemm_requires_cc(8, 0); got {marker.args!r}") from None
    return major, minor


def select_items(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Check marker arguments (a typo is an error even with no GPU); in --gemm-arch
    mode keep only compile-only checks."""
    from .gradescope import visibility_from_marker, weight_from_marker

    for item in items:
        _required_cc(item)
        try:
            weight_from_marker(item)
            visibility_from_marker(item)
        except ValueError as exc:
            raise pytest.UsageError(str(exc)) from None
    if state(config).arches is None:
        return
    keep = [i for i in items if i.get_closest_marker("gemm_offline")]
    drop = [i for i in items if not i.get_closest_marker("gemm_offline")]
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def check_requirements(item: pytest.Item) -> None:
    needed = _required_cc(item)
    if item.get_closest_marker("gemm_gpu") is None and needed is None:
        return
    from .device import probe

    found = probe()
    if isinstance(found, str):
        pytest.skip(found)
    if needed is not None and found.compute_capability < needed:
        pytest.skip(f"needs compute capability {needed[0]}.{needed[1]}; this GPU ({found.name}) is "
                    f"{found.compute_capability[0]}.{found.compute_capability[1]}")


def _category(excinfo: Any) -> str | None:
    if excinfo is None:
        return None
    from .categories import FAULT, GemmCheckFailure, is_cuda_error

    exc = excinfo.value
    if isinstance(exc, GemmCheckFailure):
        return exc.category
    if is_cuda_error(exc):  # in-process mode: CuPy's CUDARuntimeError / CUDADriverError
        return FAULT
    return None


def _outcome_message(call: pytest.CallInfo, report: pytest.TestReport) -> str | None:
    """What a failed or skipped test said, for the records."""
    if report.failed:
        return str(call.excinfo.value) if call.excinfo else report.longreprtext[-2000:]
    if report.skipped and call.excinfo is not None:
        return str(getattr(call.excinfo.value, "msg", call.excinfo.value))
    return None


def annotate_report(item: pytest.Item, call: pytest.CallInfo, report: pytest.TestReport) -> None:
    """Attach the check's result (kernel, check, shape, outcome, category) as JSON."""
    params = item.callspec.params if hasattr(item, "callspec") else {}
    if report.when not in ("setup", "call") or (report.when == "setup" and report.passed):
        return
    if params.get("gemm_case") is not None:
        case = params["gemm_case"]
        if case.check == "sweep" and report.skipped and not state(item.config).sweep:
            return  # no sweep asked for: no record, so no empty "sweep" test in the reports or Gradescope
        kernel, check, shape, extra = case.kernel, case.check, list(case.shape), case.params
    elif params.get("gemm_kernel_arch") is not None:
        kernel, arch = params["gemm_kernel_arch"]
        check, shape, extra = "compile", None, {"arch": arch}
    else:
        _annotate_graded_test(item, call, report)
        return
    record: dict[str, Any] = {
        "kernel": str(kernel.name), "precision": kernel.precision, "check": check,
        "shape": shape, "params": extra, "outcome": report.outcome, "category": _category(call.excinfo),
    }
    if is_ladder_entry(item.config, kernel):
        record["ladder"] = True  # timed for the ranking only; its conformance is the ladder's own run
    message = _outcome_message(call, report)
    if message is not None:
        record["message"] = message
    for name, value in item.user_properties:
        if name == "gemm_extra":
            record.update(json.loads(value))
    report.user_properties.append((RESULT_PROPERTY, json.dumps(record)))


def _annotate_graded_test(item: pytest.Item, call: pytest.CallInfo, report: pytest.TestReport) -> None:
    """A user's own test marked gemm_weight / gemm_visibility: its own Gradescope test."""
    from .gradescope import user_test_record

    record = user_test_record(item, report.outcome, _outcome_message(call, report), _category(call.excinfo))
    if record is not None:
        report.user_properties.append((GRADED_PROPERTY, json.dumps(record)))


class ResultCollector:
    """Gathers every check's JSON record, on the controller too under xdist."""

    def __init__(self, config: pytest.Config):
        self.config = config

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        for name, value in getattr(report, "user_properties", ()):
            if name == RESULT_PROPERTY:
                state(self.config).results.append(json.loads(value))
            elif name == GRADED_PROPERTY:
                state(self.config).graded.append(json.loads(value))


def terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    from .report import summary_lines

    if STATE not in config.stash:
        return
    for line in summary_lines(state(config), config):
        terminalreporter.write_line(line)


def write_outputs(config: pytest.Config) -> None:
    if STATE not in config.stash or _is_xdist_worker(config):
        return
    st = state(config)
    path = getattr(config.option, "gemm_report", None)
    if path:
        from .report import write_json_report

        write_json_report(Path(path), st)
    plot = st.plot
    if plot:
        from .plot import plot_ranking

        try:
            what = plot_ranking(st.results, Path(plot))
            st.notes.append(f"--gemm-plot: {what} drawn to {plot}")
        except Exception as exc:  # a plot must not cost the run its results
            st.notes.append(f"--gemm-plot: could not draw {plot}: {type(exc).__name__}: {exc}")
    gradescope = getattr(config.option, "gemm_gradescope", None)
    if gradescope:
        from .gradescope import write_results

        write_results(Path(gradescope), st.results + st.graded, st.grading,
                      kernels=[str(k.name) for k in st.kernels] if st.user_kernels else None,
                      execution_time=time.monotonic() - st.started)


def check_timeout(st: GemmState, shape: tuple[int, int, int], params: dict[str, Any] | None = None) -> float:
    """--gemm-timeout, or 60 s plus 1 s per TFLOP of one product at this shape (a sweep: sweep.sweep_timeout)."""
    if st.timeout is not None:
        return st.timeout
    if params and params.get("shapes"):
        from .sweep import sweep_timeout

        return sweep_timeout(params["shapes"])
    m, n, k = shape
    return 60.0 + 2.0 * m * n * k / 1e12


def run_in_sandbox(config: pytest.Config, kernel: GemmKernel, check: str, shape: tuple[int, int, int],
                   params: dict[str, Any]) -> dict[str, Any]:
    """Run one check on one kernel, in its child process (or in-process with --gemm-isolation none)."""
    st = state(config)
    options = {"min_cublas_fraction": st.min_cublas_fraction}
    if st.isolation == "none":
        from .dispatch import run_check

        facts: dict[str, Any] = {}
        try:
            run_check(kernel, check, shape, params, options, facts)
        except Exception as exc:
            exc.facts = facts  # type: ignore[attr-defined]
            raise
        return facts
    from .sandbox import SandboxClient

    spec, index = kernel.origin_spec  # type: ignore[union-attr]
    # The ladder timed for the ranking is ours and trusted: its rungs share one process
    # (one CUDA context, one measurement of the roofs) instead of starting one each.
    key = "ladder" if is_ladder_entry(config, kernel) else id(kernel)
    client = st.sandboxes.get(key)
    if client is None:
        client = st.sandboxes[key] = SandboxClient(spec, index, str(config.invocation_params.dir))
    client.target(spec, index)
    return client.run(check, list(shape), params, options, check_timeout(st, shape, params))


def stop_sandboxes(config: pytest.Config) -> None:
    if STATE in config.stash:
        for client in state(config).sandboxes.values():
            client.stop()
