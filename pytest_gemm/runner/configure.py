"""``pytest_configure``: read the options and ini keys, load the kernels, set up the state."""
from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

from ..model.contract import GemmKernel, GemmSpecError
from ..model.shapes import parse_shape
from .state import STATE, GemmState, is_xdist_worker


def conformance_dir() -> Path:
    spec = importlib.util.find_spec("conformance")
    if spec is None or not spec.submodule_search_locations:
        raise pytest.UsageError("the conformance package is not installed; reinstall pytest-gemm")
    return Path(list(spec.submodule_search_locations)[0])


def _precheck_compile(kernels: list[GemmKernel]) -> None:
    """Compile user CUDA kernels once, offline, so a compile error ends the run
    with NVRTC's log instead of failing every test. Skipped without NVRTC."""
    from ..model.contract import CudaKernel

    try:
        from ..kernels.compiler import GemmCompileError, GemmToolchainError, compile_for_arch
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
    from ..grading.gradescope import GradingConfig

    try:
        return GradingConfig.from_ini(config.getini)
    except ValueError as exc:
        raise pytest.UsageError(f"{exc} (in {config.inipath or 'the pytest ini'})") from None


def _gradescope_failure(config: pytest.Config, grading: Any, reason: str) -> None:
    """Under --gemm-gradescope, a run that stops before any check still writes results (score 0, the reason)."""
    path = getattr(config.option, "gemm_gradescope", None)
    if path and not is_xdist_worker(config):
        from ..grading.gradescope import write_failure_results

        write_failure_results(Path(path), reason, grading)


def configure(config: pytest.Config) -> None:
    gpu_shared = False
    if is_xdist_worker(config):  # before anything in this worker touches CUDA
        from ..kernels.gpus import pin_worker, visible_gpu_ids

        workers = int(config.workerinput.get("workercount", 1))  # type: ignore[attr-defined]
        gpu_shared = workers > max(1, len(visible_gpu_ids()))  # timings then disturb each other
        pin_worker(config.workerinput["workerid"])  # type: ignore[attr-defined]
    opt = config.option
    specs = list(getattr(opt, "gemm_kernel", None) or []) or list(config.getini("gemm_kernels"))
    try:
        arches = None
        if getattr(opt, "gemm_arch", None):
            from ..kernels.compiler import parse_arch_list

            arches = parse_arch_list(opt.gemm_arch)
        bench = parse_shape(opt.gemm_bench_shape) if getattr(opt, "gemm_bench_shape", None) else (4096, 4096, 4096)
        sweep = None
        if getattr(opt, "gemm_sweep", None):
            from ..measure.sweep import parse_sweep

            sweep = parse_sweep(opt.gemm_sweep)
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from None
    grading = _grading(config)
    fraction = getattr(opt, "gemm_min_cublas_fraction", None)
    if fraction is not None and not 0 < fraction <= 10:
        raise pytest.UsageError(f"--gemm-min-cublas-fraction {fraction}: expected a fraction such as 0.5 (of cuBLAS)")
    plot = getattr(opt, "gemm_plot", None)
    if plot and not is_xdist_worker(config):  # checked now, not after the whole run
        from ..outputs.plot import PlotUnavailableError, require_matplotlib

        try:
            require_matplotlib()
        except PlotUnavailableError as exc:
            raise pytest.UsageError(str(exc)) from None
    if specs:
        from ..kernels.loader import load_specs

        try:
            kernels = load_specs(specs, Path(config.invocation_params.dir))
        except GemmSpecError as exc:
            _gradescope_failure(config, grading, str(exc))
            raise pytest.UsageError(str(exc)) from None
        if not is_xdist_worker(config):
            try:
                _precheck_compile(kernels)
            except pytest.UsageError as exc:
                _gradescope_failure(config, grading, str(exc))
                raise
    else:
        kernels = []
    shapes = getattr(opt, "gemm_shapes", None) or str(config.getini("gemm_shapes") or "").strip() or "full"
    if shapes not in ("quick", "full"):
        raise pytest.UsageError(f"gemm_shapes = {shapes!r} (in {config.inipath or 'the pytest ini'}): expected "
                                "quick or full")
    timeout = getattr(opt, "gemm_timeout", None)
    if timeout is not None and timeout <= 0:
        raise pytest.UsageError(f"--gemm-timeout {timeout}: expected a number of seconds > 0, e.g. 60")
    config.stash[STATE] = GemmState(kernels, bool(specs), arches, bench, fraction, gpu_shared=gpu_shared,
                                    isolation=getattr(opt, "gemm_isolation", "process"), timeout=timeout, grading=grading,
                                    sweep=sweep, plot=plot, shapes=shapes,
                                    # a grader scores the student's own checks only
                                    rank_ladder=bool(specs) and not getattr(opt, "gemm_gradescope", None)
                                    and bool(getattr(opt, "gemm_ladder", False)))
    from .results import ResultCollector

    config.pluginmanager.register(ResultCollector(config), f"gemm-results-{id(config)}")
    # `pytest --gemm-kernel mod:k` (or --gemm-arch) with no test path runs the shipped suite.
    if (specs or arches) and config.args_source != pytest.Config.ArgsSource.ARGS:
        config.args[:] = [str(conformance_dir())]

