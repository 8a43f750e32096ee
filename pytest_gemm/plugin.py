"""The pytest11 entry point: options, markers and hooks. Kept thin on purpose:
the work lives in the modules it imports, and nothing here touches CUDA."""
from __future__ import annotations

import pytest

from pathlib import Path

from .runner import collection, compare, compile_precheck, configure, execution, finish, results
from .runner.fixtures import (  # noqa: F401  (fixtures are found by name on the plugin module)
    gemm_assert_accurate,
    gemm_assert_bit_identical,
    gemm_case,
    gemm_check,
    gemm_device,
    gemm_exact_inputs,
    gemm_random_inputs,
    gemm_record,
    gemm_reference,
    gemm_timer,
)
from .runner import hooks
from .runner.trace_options import add_options

MARKERS = (
    "gemm_gpu: the test needs a usable GPU; skipped with the reason when there is none",
    "gemm_requires_cc(major, minor): the test needs compute capability >= major.minor",
    "gemm_cases(check=None, shapes=None, params=None, when=None): parametrize gemm_case over the kernels under test (no check: every GPU check of the registry)",
    "gemm_offline: a compile-only check that runs without a GPU (kept by --gemm-arch)",
    "gemm_weight(points): points this test is worth in --gemm-gradescope results (partial credit over its parameters)",
    "gemm_visibility(visibility): Gradescope visibility of this test: visible, hidden, after_due_date or after_published",
)


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    pluginmanager.add_hookspecs(hooks)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("gemm", "GPU matrix-multiplication kernels (pytest-gemm)")
    group.addoption("--gemm-kernel", action="append", default=[], metavar="SPEC",
                    help="kernel(s) under test: module:attr or path/to/file.py:attr (repeatable); "
                         "with no test path given, runs the shipped conformance suite")
    group.addoption("--gemm-arch", default=None, metavar="LIST",
                    help="compile-only mode: compile every kernel for these architectures with NVRTC "
                         "(no GPU needed) and report registers/spills/shared memory, e.g. sm_75,sm_80,sm_90a, "
                         "or 'all' (every target the installed NVRTC supports); each kernel and architecture "
                         "is its own test (a Python launcher: each CUDA kernel it declares with builds=); a run that compiled "
                         "nothing fails; without a working NVRTC the run is an error")
    group.addoption("--gemm-require-gpu", action="store_true", default=False,
                    help="fail the run when no GPU check can run (no usable GPU, or every GPU check skipped), "
                         "with the reason; for the GPU jobs of a CI matrix (ini key gemm_require_gpu = true)")
    group.addoption("--gemm-bench-shape", default=None, metavar="MxNxK",
                    help="shape of the timed speed check (default 4096x4096x4096)")
    group.addoption("--gemm-min-cublas-fraction", type=float, default=None, metavar="F",
                    help="fail the speed check of a kernel slower than F x cuBLAS at the same precision")
    group.addoption("--gemm-report", default=None, metavar="PATH", help="write a JSON report of every kernel")
    group.addoption("--gemm-sweep", default=None, metavar="SIZES",
                    help="time every kernel and cuBLAS at its precision at each size (N or MxNxK, comma-separated), "
                         "e.g. 512,1024,2048,4096: one sweep-<kernel> test per kernel, a 'TFLOP/s by size' table, "
                         "and the sweep in --gemm-report")
    group.addoption("--gemm-plot", default=None, metavar="PATH",
                    help="draw the ranking to PATH (e.g. ranking.png): bars of TFLOP/s at the benchmark shape, or "
                         "lines over the --gemm-sweep sizes; needs matplotlib: pip install 'pytest-gemm[plot]'")
    group.addoption("--gemm-timeout", type=float, default=None, metavar="SECONDS",
                    help="kill a check that runs longer than this and report it as a timeout (default: "
                         f"{execution.DEFAULT_TIMEOUT_TEXT} the check's shape needs; start-up and compiling are "
                         "bounded apart; after a kernel's first timeout its later checks get a short budget)")
    group.addoption("--gemm-shapes", choices=("quick", "full"), default=None,
                    help="full (default): every shape of every check; quick: a small representative set per check "
                         "(for kernels that compile or autotune per shape, and fast iteration); ini key gemm_shapes")
    group.addoption("--gemm-isolation", choices=("process", "none"), default="process",
                    help="process (default): each kernel runs in a child process, so a fault, hang or exit() "
                         "costs only its own check; none: run kernels inside the pytest process")
    group.addoption("--gemm-confine", choices=("auto", "bubblewrap", "landlock", "none"), default=None,
                    help="confine every process that runs the kernels' code (docs/security.md): auto (the strongest "
                         "this machine allows), bubblewrap, landlock or none; default none, auto with "
                         "--gemm-gradescope or gemm_require_confinement; the modules are then imported only there")
    group.addoption("--gemm-ladder", action="store_true", default=False,
                    help="with --gemm-kernel: also time the reference ladder's rungs and cuBLAS (at the precisions "
                         "under test) at the bench shape and rank them beside the kernels under test (it takes "
                         "longer: one more timed run per rung and cuBLAS baseline of its precision); alone: run the conformance suite on "
                         "the shipped ladder")
    group.addoption("--gemm-gradescope", default=None, metavar="PATH",
                    help="write Gradescope's results.json (points per check with partial credit, a leaderboard) "
                         "to PATH, e.g. /autograder/results/results.json; weights from the ini keys gemm_weights, "
                         "gemm_visibility, gemm_performance_threshold")
    group.addoption("--gemm-compare", default=None, metavar="OLD.json",
                    help="put each kernel's speed beside a saved run's (a --gemm-report file) and call it same, "
                         "faster, slower or unsure from both runs' per-call times (docs/compare.md); kernels whose "
                         "correctness changed are listed first; needs scipy: pip install 'pytest-gemm[compare]'")
    group.addoption("--gemm-compare-fail", default=None, metavar="PERCENT",
                    help="with --gemm-compare: fail the run when a kernel is surely slower than in the saved run "
                         "by more than PERCENT (e.g. 5%%), or became wrong")
    group.addoption("--gemm-compare-noise", default=None, metavar="PERCENT",
                    help="with --gemm-compare: the noise band, the smallest change between two runs called slower "
                         "or faster (default 1%%, measured on an H200; widen it where fresh processes move more, "
                         "docs/compare.md)")
    group.addoption("--gemm-allow-no-gpu", action="store_true", default=False,
                    help="with --gemm-gradescope on a machine with no usable GPU: write results.json anyway (the "
                         "compile checks only, every GPU check 0); without it such a run exits 1 and writes none, "
                         "so a broken grading machine never scores every student 0")
    parser.addini("gemm_shapes", default="", help="quick or full (default): like --gemm-shapes")
    parser.addini("gemm_compile_arches", default="",
                  help="claimed (default): the compile check runs for every architecture a kernel claims; device: "
                       "on a machine with a GPU only for that GPU's own (a grader's choice: its GPU checks run "
                       "there), and for every claimed one where there is no GPU")
    parser.addini("gemm_require_confinement", default="",
                  help="bubblewrap, landlock or none: refuse to grade (exit status 4, a Gradescope failure) unless "
                       "submitted code runs under at least this confinement")
    parser.addini("gemm_kernels", type="linelist", default=[],
                  help="kernel specs under test, one per line (like --gemm-kernel)")
    parser.addini("gemm_require_gpu", default="",
                  help="true: like --gemm-require-gpu, fail the run when no GPU check can run")
    parser.addini("gemm_weights", type="linelist", default=[],
                  help="--gemm-gradescope points per check, one 'check = points [visibility]' per line, "
                       "e.g. 'exact = 40' or 'speed = 10 after_published'")
    parser.addini("gemm_visibility", type="linelist", default=[],
                  help="--gemm-gradescope visibility per check, one 'check = visibility' per line; also the keys "
                       "default, results (the whole result) and stdout (hidden unless set)")
    parser.addini("gemm_speed_budget", default="",
                  help="seconds of measured GPU time each timing of the speed check repeats for (default 1; the "
                       "median of fewer repeats below that); a course grading a class on one GPU may lower it, "
                       "since each student's timing holds the GPU alone")
    parser.addini("gemm_speed_stop", default="",
                  help="the speed check's repeats stop, before gemm_speed_budget, once the median is known to "
                       "within this (default 0.1%); off: repeat for the whole budget")
    parser.addini("gemm_performance_threshold", default="",
                  help="--gemm-gradescope: the fraction of cuBLAS that earns full speed credit (linear below), e.g. 0.3")

    add_options(parser)  # --gemm-trace, --gemm-own-kernel (the launch trace)


def pytest_configure(config: pytest.Config) -> None:
    for line in MARKERS:
        config.addinivalue_line("markers", line)
    configure.configure(config)


def pytest_report_header(config: pytest.Config) -> list[str]:
    return compare.report_header(config)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """``-n auto``: one worker per GPU when there are several, only in a run that uses pytest-gemm
    (a gemm option or ini key); other suites keep xdist's own choice."""
    if not configure.is_active(config):
        return None
    from .kernels.gpus import visible_gpu_ids  # lazy: keeps kernels.gpus out of the plugin's load

    count = len(visible_gpu_ids())
    return count if count > 1 else None


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node) -> None:  # type: ignore[no-untyped-def]
    compile_precheck.configure_node(node)


def pytest_collect_directory(path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    return collection.collect_directory(path, parent)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    collection.generate_tests(metafunc)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    collection.select_items(config, items)
    execution.order_by_kernel(config, items)


def pytest_runtest_setup(item: pytest.Item) -> None:
    collection.check_requirements(item)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):  # type: ignore[no-untyped-def]
    outcome = yield
    results.annotate_report(item, call, outcome.get_result())


def pytest_terminal_summary(terminalreporter, exitstatus, config: pytest.Config) -> None:  # type: ignore[no-untyped-def]
    results.terminal_summary(terminalreporter, config)
    configure.completeness_summary(terminalreporter, config)


@pytest.hookimpl(tryfirst=True)  # before junitxml writes its file: the verdicts are properties in it
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    finish.require_gpu_at_finish(session)
    finish.nothing_compiled_at_finish(session)
    finish.nothing_tested_at_finish(session)
    results.write_outputs(session.config)
    compare.fail_at_finish(session)


def pytest_unconfigure(config: pytest.Config) -> None:
    execution.stop_sandboxes(config)
