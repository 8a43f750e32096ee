"""Each example of examples/ecosystems/ through the whole conformance suite on the GPU, with the
verdict it must get (tools/ecosystems.py: every one passes but the Triton tutorial kernel on
fp32 inputs, which tl.dot rounds to TF32: precision_too_low). An example whose package is
missing is skipped with the reason. One pytest run per group (Triton, Numba, the rest), beside the
other GPU tests' runs (tests/gpu_runs.py; the Triton kernel autotunes, the torch extension is built
on first import).

tools/gpu_session.sh ecosystems runs the same examples in three groups and times the Triton one.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from gpu_runs import SuiteRun, SuiteRuns
from suite_helpers import load_registered

pytestmark = pytest.mark.gemm_gpu

ROOT = Path(__file__).resolve().parent.parent
NUMBA_SITE_ENV = "GEMM_NUMBA_SITE"  # a folder holding a NumPy numba-cuda can use (tools/gpu_session.sh)


eco = load_registered(ROOT / "tools" / "ecosystems.py", "gemm_tools_ecosystems")


def _numpy_too_new() -> str | None:
    """numba-cuda (up to 0.30.4, the newest) registers np.row_stack, which NumPy 2.5 removed:
    without a NumPy < 2.5 (the numba extra's pin, or GEMM_NUMBA_SITE) Numba cannot run here."""
    import numpy

    if os.environ.get(NUMBA_SITE_ENV) or tuple(int(x) for x in numpy.__version__.split(".")[:2]) < (2, 5):
        return None
    return (f"numba-cuda needs NumPy < 2.5 (it registers np.row_stack; this NumPy is {numpy.__version__}): "
            f"pip install 'pytest-gemm[numba]', or point {NUMBA_SITE_ENV} at a folder with NumPy 2.4")


def _unavailable(example: Any) -> str | None:
    return eco.unavailable(example) or (_numpy_too_new() if example.group == "numba" else None)


def _run(group: str, workers: str) -> list[SuiteRun]:
    specs = tuple(dict.fromkeys(str(ROOT / ex.spec) for ex in eco.EXAMPLES
                                if ex.group == group and _unavailable(ex) is None))
    env: tuple[tuple[str, str], ...] = ()
    if group == "numba" and os.environ.get(NUMBA_SITE_ENV):
        env = (("PYTHONPATH", os.pathsep.join(filter(None, [os.environ[NUMBA_SITE_ENV],
                                                            os.environ.get("PYTHONPATH")]))),)
    return [SuiteRun(f"eco-{group}", specs, options=("-n", workers), timeout=480, env=env)] if specs else []


# One pytest process per group (tests/gpu_runs.py), beside the other GPU tests' runs: the Triton
# kernels (they autotune), the Numba one (its own NumPy), and the rest.
SUITE_RUNS = _run("triton", "2") + _run("numba", "1") + _run("rest", "4")


def _kernel(suite_runs: SuiteRuns, name: str) -> tuple[dict[str, Any], str]:
    """The report's entry for the example whose kernel is ``name`` and its run's output
    (skipped where it cannot run)."""
    example = next(ex for ex in eco.EXAMPLES if ex.kernel == name)
    reason = _unavailable(example)
    if reason is not None:
        pytest.skip(reason)
    run = suite_runs.result(f"eco-{example.group}")
    return run.entry(name), run.output


@pytest.mark.parametrize("example", eco.EXAMPLES, ids=lambda ex: ex.kernel)
def test_each_example_gets_its_verdict(suite_runs: SuiteRuns, example: Any):
    k, _ = _kernel(suite_runs, example.kernel)
    said = f"{k['verdict']} / {k['primary_category']}: {k['diagnosis']}; consequences: {k['consequences']}"
    assert (k["verdict"], k["primary_category"]) == (example.verdict, example.category), said


def test_the_triton_tutorial_kernel_says_which_config_won_and_ran_the_quick_shapes(suite_runs: SuiteRuns):
    from pytest_gemm.checks import registry

    k, log = _kernel(suite_runs, "triton_tutorial_fp16")
    assert k["timings"] and "BLOCK_SIZE_M" in (k["timings"][0].get("autotune") or ""), k["timings"]
    assert sum(1 for c in k["checks"] if c["check"] == "exact") == len(registry.QUICK_EXACT)
    assert "autotune(s) per shape" in log


def test_the_kernelbench_module_reports_the_copy_of_its_result(suite_runs: SuiteRuns):
    k, _ = _kernel(suite_runs, "ModelNew")
    assert k["timings"] and "copying it into C" in (k["timings"][0].get("result_copy") or ""), k["timings"]
