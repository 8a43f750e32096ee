"""``pytest_configure``: read the options and ini keys, load the kernels, set up the state.

The plugin is inert for a suite that does not use it: it pins no GPU, runs no
``nvidia-smi`` and leaves ``-n auto`` alone unless a gemm option or ini key is set
(:func:`is_active`) or, for the pinning, a collected test uses a gemm fixture or marker
(``collection.select_items`` with ``collection.uses_gemm``, then :func:`pin_gpu`).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ..grading.config import GradingConfig
from ..model.contract import GemmKernel
from ..model.declaration import GemmSpecError
from ..model.shapes import parse_shape
from .state import STATE, GemmState, is_xdist_worker
import os
from ..model.contract import CudaKernel
from .compare import configure_compare
from .compile_precheck import first_compiling_arch, mark_uncompilable
from .trace_options import export_choice
from .results import ResultCollector
from ..measure.timing import DEFAULT_BUDGET_S, DEFAULT_STOP

#: The ini keys pytest-gemm reads; any of them set makes the plugin active.
INI_KEYS = ("gemm_kernels", "gemm_weights", "gemm_visibility", "gemm_performance_threshold", "gemm_require_gpu",
            "gemm_shapes", "gemm_compile_arches", "gemm_require_confinement", "gemm_speed_budget", "gemm_speed_stop",
            "gemm_trace", "gemm_own_kernel", "gemm_vendor_kernels")
_OPTION_DEFAULTS: dict[str, Any] = {"gemm_isolation": "process"}

REQUIRE_GPU_HINT = ("run on a machine whose GPU and driver work (check nvidia-smi and the CuPy extra matching "
                    "the driver), or leave --gemm-require-gpu out on a job without a GPU")


def conformance_dir() -> Path:
    """The shipped conformance suite: the installed package's own folder (never found by
    importing ``conformance``, which a user's folder of that name would shadow)."""
    # lazy: keeps kernels.autotune, kernels.confine, kernels.declared, kernels.loader out of the plugin's load
    from ..kernels.loader import shipped_dir

    try:
        return shipped_dir("conformance")
    except GemmSpecError as exc:
        raise pytest.UsageError(str(exc)) from None


def _option_set(dest: str, value: Any) -> bool:
    return value != _OPTION_DEFAULTS[dest] if dest in _OPTION_DEFAULTS else value not in (None, False, [], "")


def is_active(config: pytest.Config) -> bool:
    """A gemm option (``--gemm-*``) or ini key (``gemm_*``) is set."""
    if any(_option_set(dest, value) for dest, value in vars(config.option).items() if dest.startswith("gemm_")):
        return True
    return any(config.getini(key) not in ("", [], None, False) for key in INI_KEYS)


def pin_gpu(config: pytest.Config) -> None:
    """Give this xdist worker its own GPU, before anything in it touches CUDA (once)."""
    st = config.stash.get(STATE, None)
    if not is_xdist_worker(config) or (st is not None and st.pinned):
        return
    from ..kernels.gpus import pin_worker, visible_gpu_ids  # lazy: keeps kernels.gpus out of the plugin's load

    workers = int(config.workerinput.get("workercount", 1))  # type: ignore[attr-defined]
    gpu_shared = workers > max(1, len(visible_gpu_ids()))  # timings then disturb each other
    pin_worker(config.workerinput["workerid"])  # type: ignore[attr-defined]
    if st is not None:
        st.pinned, st.gpu_shared = True, gpu_shared


def _grading(config: pytest.Config) -> Any:
    try:
        return GradingConfig.from_ini(config.getini)
    except ValueError as exc:
        raise pytest.UsageError(f"{exc} (in {config.inipath or 'the pytest ini'})") from None


def _gradescope_failure(config: pytest.Config, grading: Any, reason: str) -> None:
    """Under --gemm-gradescope, a run that stops before any check still writes results (score 0, the reason)."""
    path = getattr(config.option, "gemm_gradescope", None)
    if path and not is_xdist_worker(config):
        # lazy: keeps grading, grading.config, grading.gradescope, measure.quiet, outputs, outputs.records, outputs.verdicts out of the plugin's load
        from ..grading.gradescope import write_failure_results

        write_failure_results(Path(path), reason, grading)


def _require_gpu(config: pytest.Config) -> bool:
    if getattr(config.option, "gemm_require_gpu", False):
        return True
    text = str(config.getini("gemm_require_gpu") or "").strip().lower()
    if text in ("", "0", "false", "no", "off"):
        return False
    if text in ("1", "true", "yes", "on"):
        return True
    raise pytest.UsageError(f"gemm_require_gpu = {text!r} (in {config.inipath or 'the pytest ini'}): "
                            "expected true or false")


def _parse_options(config: pytest.Config) -> tuple[Any, ...]:
    opt = config.option
    arches = sweep = None
    try:
        if getattr(opt, "gemm_arch", None):
            from ..kernels.compiler import parse_arch_list  # lazy: keeps kernels.compiler out of the plugin's load

            arches = parse_arch_list(opt.gemm_arch)
        text = getattr(opt, "gemm_bench_shape", None)
        try:
            bench = parse_shape(text) if text else (4096, 4096, 4096)
        except ValueError as exc:
            raise ValueError(f"--gemm-bench-shape: {exc}") from None
        if getattr(opt, "gemm_sweep", None):
            from ..measure.sweep import parse_sweep  # lazy: keeps measure.sweep out of the plugin's load

            sweep = parse_sweep(opt.gemm_sweep)
        from ..kernels.cuda_wait import wait_mode  # lazy: keeps kernels.cuda_wait out of the plugin's load

        wait_mode(os.environ)  # read by each kernel's process as it starts: a typo stops the run here
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from None
    fraction = getattr(opt, "gemm_min_cublas_fraction", None)
    if fraction is not None and not 0 < fraction <= 10:
        raise pytest.UsageError(f"--gemm-min-cublas-fraction {fraction}: expected a fraction of cuBLAS in (0, 10], "
                                "e.g. 0.5")
    timeout = getattr(opt, "gemm_timeout", None)
    if timeout is not None and timeout <= 0:
        raise pytest.UsageError(f"--gemm-timeout {timeout}: expected a number of seconds > 0, e.g. 60")
    return arches, bench, sweep, fraction, timeout


def _check_require_gpu(config: pytest.Config, arches: list[str] | None, grading: Any) -> None:
    """--gemm-require-gpu: no usable GPU ends the session now, with the reason (and, under
    --gemm-gradescope, a results.json that says so)."""
    if arches is not None:
        raise pytest.UsageError("--gemm-require-gpu (or gemm_require_gpu) with --gemm-arch: the compile-only mode "
                                "runs no GPU check; use --gemm-arch on the jobs without a GPU and "
                                "--gemm-require-gpu on the GPU jobs")
    if is_xdist_worker(config):
        return
    from ..kernels.device import probe  # lazy: a test replaces probe on its module

    found = probe()
    if isinstance(found, str):
        reason = f"--gemm-require-gpu: {found}; {REQUIRE_GPU_HINT}"
        _gradescope_failure(config, grading, reason)
        pytest.exit(reason, returncode=pytest.ExitCode.TESTS_FAILED)


def _refuse_to_grade_without_gpu(config: pytest.Config) -> None:
    """--gemm-gradescope with no usable GPU: exit 1 and write no results.json (as the gradebook
    refuses), so a broken grading machine never scores every student 0. With the sandbox's
    dispatch test hook set the checks need no GPU (as ``gradebook.no_gpu_problem``)."""

    from ..checks.sandbox_child import DISPATCH_ENV  # lazy: keeps checks.sandbox_child out of the plugin's load

    if is_xdist_worker(config) or os.environ.get(DISPATCH_ENV) or config.option.collectonly:
        return
    from ..kernels.device import probe  # lazy: a test replaces probe on its module

    found = probe()
    if isinstance(found, str):
        pytest.exit(f"--gemm-gradescope: not grading: {found}; every GPU check would be skipped and score 0. "
                    "Fix the grading machine's GPU (nvidia-smi; the CuPy extra matching its driver), or pass "
                    "--gemm-allow-no-gpu to grade the compile checks only", returncode=pytest.ExitCode.TESTS_FAILED)


def _check_toolchain(config: pytest.Config) -> None:
    """Compile-only mode without a working NVRTC would compile nothing: an error, with what to install."""
    if is_xdist_worker(config):
        return
    from ..kernels.compiler import toolchain_problem  # lazy: keeps kernels.compiler out of the plugin's load

    problem = toolchain_problem()
    if problem is not None:
        raise pytest.UsageError(f"--gemm-arch (compile-only mode) cannot compile anything: {problem}")


def _check_testable(config: pytest.Config, grading: Any) -> None:
    """No NVRTC and no usable GPU: nothing can be tested (no compile check, no GPU check), so
    the run ends now with one line naming both causes and the extra to install, as the
    compile-only mode does, instead of one failed compile check per architecture."""
    if is_xdist_worker(config):
        return
    from ..kernels.compiler import toolchain_problem  # lazy: keeps kernels.compiler out of the plugin's load

    problem = toolchain_problem()
    if problem is None:
        return
    from ..kernels.device import probe  # lazy: a test replaces probe on its module

    found = probe()
    if isinstance(found, str):
        reason = f"pytest-gemm: nothing can be tested here: {found.split('; install')[0]}; and {problem}"
        _gradescope_failure(config, grading, reason)
        pytest.exit(reason, returncode=pytest.ExitCode.TESTS_FAILED)


def configure(config: pytest.Config) -> None:
    active = is_active(config)
    opt = config.option
    cli_specs = list(getattr(opt, "gemm_kernel", None) or [])
    ini_specs = [] if cli_specs else list(config.getini("gemm_kernels"))
    specs = cli_specs or ini_specs
    ladder_alone = bool(getattr(opt, "gemm_ladder", False)) and not specs
    arches, bench, sweep, fraction, timeout = _parse_options(config)
    require_gpu = _require_gpu(config)
    grading = _grading(config)
    plot = getattr(opt, "gemm_plot", None)
    if plot and not is_xdist_worker(config):  # checked now, not after the whole run
        # lazy: keeps measure.sweep, outputs, outputs.launch_view, outputs.plot, outputs.process_time, outputs.records, outputs.report, outputs.sweep_table, outputs.verdicts out of the plugin's load
        from ..outputs.plot import PlotUnavailableError, require_matplotlib

        try:
            require_matplotlib()
        except PlotUnavailableError as exc:
            raise pytest.UsageError(str(exc)) from None
    if arches is not None and not require_gpu:
        _check_toolchain(config)

    configure_compare(config)  # --gemm-compare, --gemm-compare-fail: checked now, not after the run

    export_choice(config)  # --gemm-trace off: the kernel processes never start CUPTI
    if specs and getattr(opt, "gemm_isolation", "process") == "none":
        from ..measure.integrity import pin  # lazy: keeps measure.integrity out of the plugin's load

        pin(gpu=True)  # the kernels run here: what their modules replace from now on is seen (tamper detection)
    from .confinement import choose  # lazy: keeps kernels.confine, runner.confinement out of the plugin's load

    confinement = choose(config, lambda reason: _gradescope_failure(config, grading, reason))
    if specs:
        # lazy: keeps kernels.autotune, kernels.confine, kernels.declared, kernels.loader out of the plugin's load
        from ..kernels.loader import load_specs

        try:  # confined: a child imports the submission, this process never does (kernels/declared.py)
            kernels = load_specs(specs, Path(config.invocation_params.dir), in_child=confinement != "none")
        except GemmSpecError as exc:
            _gradescope_failure(config, grading, str(exc))
            raise pytest.UsageError(str(exc)) from None
        if not is_xdist_worker(config) and arches is None:
            try:
                kernels = first_compiling_arch(kernels)
            except pytest.UsageError as exc:
                _gradescope_failure(config, grading, str(exc))
                raise
        elif is_xdist_worker(config):
            kernels = mark_uncompilable(config, kernels)
    else:
        kernels = []
    # neither given: "auto", full but for kernels that autotune per shape (quick for them, said below)
    shapes = getattr(opt, "gemm_shapes", None) or str(config.getini("gemm_shapes") or "").strip() or "auto"
    if shapes not in ("quick", "full", "auto"):
        raise pytest.UsageError(f"gemm_shapes = {shapes!r} (in {config.inipath or 'the pytest ini'}): expected "
                                "quick or full")
    compile_arches = str(config.getini("gemm_compile_arches") or "").strip() or "claimed"
    if compile_arches not in ("claimed", "device"):
        raise pytest.UsageError(f"gemm_compile_arches = {compile_arches!r} (in {config.inipath or 'the pytest ini'}): "
                                "expected claimed (every architecture a kernel claims) or device (this GPU's only)")
    speed_budget, speed_stop = _speed_budget(config), _speed_stop(config)
    config.stash[STATE] = GemmState(kernels, bool(specs), arches, bench, fraction,
                                    isolation=getattr(opt, "gemm_isolation", "process"), timeout=timeout, grading=grading,
                                    sweep=sweep, plot=plot, active=active, require_gpu=require_gpu, shapes=shapes,
                                    compile_arches=compile_arches, speed_budget_s=speed_budget,
                                    # a grader scores the student's own checks only
                                    rank_ladder=bool(specs) and not getattr(opt, "gemm_gradescope", None)
                                    and bool(getattr(opt, "gemm_ladder", False)))
    config.stash[STATE].confinement = confinement
    config.stash[STATE].speed_stop = speed_stop
    config.stash[STATE].grading_run = bool(getattr(opt, "gemm_gradescope", None))
    from .confinement import note  # lazy: keeps kernels.confine, runner.confinement out of the plugin's load

    note(config.stash[STATE], config)
    if shapes == "auto" and not is_xdist_worker(config):
        _note_autotuned(config.stash[STATE])
    if active:  # before anything in this worker touches CUDA
        pin_gpu(config)
    if require_gpu:
        _check_require_gpu(config, arches, grading)
    elif specs and arches is None:
        if getattr(opt, "gemm_gradescope", None) and not getattr(opt, "gemm_allow_no_gpu", False):
            _refuse_to_grade_without_gpu(config)
        _check_testable(config, grading)

    config.pluginmanager.register(ResultCollector(config), f"gemm-results-{id(config)}")
    _choose_paths(config, cli_specs, ini_specs, arches, ladder_alone)


def _note_autotuned(st: GemmState) -> None:
    """Say which kernels run the quick shape set because they autotune per shape."""
    from ..kernels.autotune import autotunes  # lazy: keeps kernels.autotune out of the plugin's load

    tuned = [str(k.name) for k in st.kernels if autotunes(k)]
    if tuned:
        st.notes.append(f"{', '.join(map(repr, tuned))} autotune(s) per shape (a Triton autotuner): checked on the "
                        "quick shape set, each shape tuned once and shared by its processes (Triton's autotuning "
                        "cache); --gemm-shapes full checks every shape")


def _choose_paths(config: pytest.Config, cli_specs: list[str], ini_specs: list[str], arches: list[str] | None,
                  ladder_alone: bool) -> None:
    """`pytest --gemm-kernel mod:k` (or --gemm-arch, or --gemm-ladder alone) with no test path runs
    the shipped suite; kernels from the ini key add the suite to the paths pytest would run
    anyway (testpaths, or the current folder), so the project's own tests still run."""
    if config.args_source == pytest.Config.ArgsSource.ARGS:
        return
    if cli_specs or arches is not None or ladder_alone:
        config.args[:] = [str(conformance_dir())]
    elif ini_specs:
        suite = conformance_dir()
        if not any(Path(a).resolve() == suite for a in config.args):
            config.args.append(str(suite))


def completeness_summary(terminalreporter: Any, config: pytest.Config) -> None:
    """Skips counted by reason (unless -rs lists them already), in a run that uses the plugin."""
    st = config.stash.get(STATE, None)
    if st is None or not st.active:
        return
    chars = str(getattr(config.option, "reportchars", "") or "")
    if not any(c in chars for c in "saA"):
        # lazy: keeps outputs, outputs.records, outputs.verdicts, runner.completeness out of the plugin's load
        from .completeness import skips_by_reason

        for line in skips_by_reason(terminalreporter.stats.get("skipped", [])):
            terminalreporter.write_line(line)


def _speed_stop(config: pytest.Config) -> float | None:
    """gemm_speed_stop: the speed check's repeats stop, before their budget, once the median is
    known to within this fraction of it (``timing.median_settled``; default 0.1 %), or never
    (``off``: every repeat the budget allows)."""
    text = str(config.getini("gemm_speed_stop") or "").strip().lower()
    if not text:
        return DEFAULT_STOP
    if text in ("off", "none", "no", "false"):
        return None
    try:
        value = float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        value = float("nan")
    if not 0.0001 <= value <= 0.05:
        raise pytest.UsageError(f"gemm_speed_stop = {text!r} (in {config.inipath or 'the pytest ini'}): expected the "
                                f"precision at which the speed check's repeats stop, from 0.01% to 5% (default "
                                f"{DEFAULT_STOP:.1%}), or off (repeat for the whole gemm_speed_budget)")
    return value


def _speed_budget(config: pytest.Config) -> float:
    """gemm_speed_budget: the measured GPU seconds each timing of the speed check repeats for
    (default 1). A class on one GPU waits for every student's timing in turn, so a course may
    trade repeats for minutes."""
    text = str(config.getini("gemm_speed_budget") or "").strip()
    if not text:
        return DEFAULT_BUDGET_S
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0.05 <= value <= 60:
        raise pytest.UsageError(f"gemm_speed_budget = {text!r} (in {config.inipath or 'the pytest ini'}): expected "
                                "seconds of timed GPU work per timing, from 0.05 to 60 (default 1)")
    return value
