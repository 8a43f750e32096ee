"""The check registry is the one place a check is declared: collection, dispatch, Gradescope and
docs/checks.md read it."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from pytest_gemm.checks import registry
from pytest_gemm.grading.config import DEFAULT_WEIGHTS

README = Path(__file__).resolve().parent.parent / "docs" / "checks.md"  # the table of checks


def test_the_readme_table_of_checks_is_the_registry():
    text = README.read_text()
    block = re.search(r"<!-- checks table:.*?-->\n(.*?)\n<!-- end of checks table -->", text, re.S)
    assert block, "docs/checks.md has no generated checks table"
    assert block.group(1).strip() == registry.markdown_table()


def test_gradescope_scores_each_graded_check_under_its_registry_label_and_weight():
    """Gradescope's results.json, built from one passing record per check: one test per graded
    check of the registry, in the registry's order, named by its label, worth its weight; the
    sweep (opt-in) is not scored; full marks are the documented 100 points."""
    from pytest_gemm.grading.gradescope import build_results

    def rec(check: str) -> dict:
        r = {"kernel": "k", "precision": "fp32", "check": check, "shape": [64, 64, 64], "params": {},
             "outcome": "passed", "category": None}
        if check in ("speed", "sweep"):
            r["timing"] = {"median_ms": 1.0, "min_ms": 1.0, "spread": 0.0, "tflops": 1.0, "shape": [64, 64, 64]}
            r["fraction_of_cublas"] = 0.5
        return r

    graded = [c for c in registry.CHECKS if c.name != "sweep"]
    results = build_results([rec(c.name) for c in registry.CHECKS])
    assert results["score"] == sum(c.weight for c in graded)  # the sweep's record earns nothing
    results = build_results([rec(c.name) for c in graded])
    tests = {t["name"].split(" (")[0]: t for t in results["tests"]}
    assert list(tests) == [c.display for c in graded]
    for c in graded:
        assert tests[c.display]["max_score"] == c.weight, c.name
        assert tests[c.display]["score"] == c.weight, c.name
    assert results["score"] == sum(c.weight for c in graded) == 100
    assert DEFAULT_WEIGHTS["exact"] == 40


def test_every_gpu_check_has_a_runner_and_every_name_is_unique():
    names = [c.name for c in registry.CHECKS]
    assert len(names) == len(set(names))
    for check in registry.CHECKS:
        if check.gpu:
            assert callable(check.runner())


def test_an_unknown_check_names_the_valid_ones():
    with pytest.raises(ValueError, match="valid checks: compile, launch, exact"):
        registry.get("exactt")


def test_a_marker_naming_an_unknown_check_stops_collection_with_the_valid_ones(pytester: pytest.Pytester):
    pytester.makepyfile(test_mine="""
import pytest

@pytest.mark.gemm_cases("exactt")
def test_x(gemm_case):
    pass
""")
    result = pytester.runpytest_subprocess("--gemm-kernel", "reference_kernels:tiled16", "test_mine.py")
    assert result.ret == pytest.ExitCode.INTERRUPTED  # a collection error: the file is not run
    assert "unknown check 'exactt'; valid checks: compile, launch" in result.stdout.str() + result.stderr.str()


def test_every_timed_check_takes_the_gpu_alone_and_waits_for_quiet_itself():
    """The runner holds no lock around a timed check (``timed=True`` in the registry): the
    check must take the GPU-wide lock exclusively around its timings and probe for a quiet GPU,
    as checks/speed.py and checks/sweep.py do (CONTRIBUTING.md)."""
    from pytest_gemm.model import categories as cat
    from pytest_gemm.outputs.verdicts import TIMED_CHECKS
    from pytest_gemm.runner.execution import _is_timed

    timed = [c for c in registry.CHECKS if c.timed]
    assert [c.name for c in timed] == list(TIMED_CHECKS) == ["speed", "sweep"]
    assert not _is_timed("launch") and cat.WRONG_STREAM in registry.get("launch").categories  # held shared
    package = Path(registry.__file__).parent
    for check in timed:
        source = (package / f"{check.module}.py").read_text()
        assert "gpu_lock(True" in source and "gpu_quiet(" in source and "step_aside" in source, check.name


def test_importing_every_check_module_touches_no_cuda():
    """The checks import the judges and the harness at their top; CuPy and CUDA's bindings only
    inside the functions that launch (the plugin process and a --collect-only run load no CUDA)."""
    import subprocess
    import sys

    modules = sorted({c.module for c in registry.CHECKS})
    code = ("import importlib, sys\n"
            f"for m in {modules!r}: importlib.import_module('pytest_gemm.checks.' + m)\n"
            "print(sorted(k for k in ('cupy', 'cuda.bindings', 'cupy_backends') if k in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]", f"a check module imports CUDA at its top: {done.stdout}"
