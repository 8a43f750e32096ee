"""Each example of examples/ecosystems/ through the whole conformance suite on the GPU, with the
verdict it must get (tools/ecosystems.py: every one passes but the Triton tutorial kernel on
fp32 inputs, which tl.dot rounds to TF32: precision_too_low). An example whose package is
missing is skipped with the reason. One pytest run with -n 4 for all of them (a few minutes on
an H200: the Triton kernel autotunes, the torch extension is built on first import).

tools/gpu_session.sh ecosystems runs the same examples in three groups and times the Triton one.
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from suite_helpers import load_registered, run_suite

pytestmark = pytest.mark.gemm_gpu

ROOT = Path(__file__).resolve().parent.parent


eco = load_registered(ROOT / "tools" / "ecosystems.py", "gemm_tools_ecosystems")


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    runnable = [ex for ex in eco.EXAMPLES if eco.unavailable(ex) is None]
    if not runnable:
        pytest.skip("no example's packages are installed")
    out = tmp_path_factory.mktemp("ecosystems")
    args = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-n", "4",
            "--gemm-report", str(out / "report.json")]
    for ex in dict.fromkeys(ex.spec for ex in runnable):
        args += ["--gemm-kernel", str(ROOT / ex)]
    return run_suite(args, out, timeout=900)


def _kernel(report: dict[str, Any], name: str) -> dict[str, Any]:
    """The report's entry for the example whose kernel is ``name`` (skipped where it cannot run)."""
    example = next(ex for ex in eco.EXAMPLES if ex.kernel == name)
    reason = eco.unavailable(example)
    if reason is not None:
        pytest.skip(reason)
    kernels = {k["name"]: k for k in report["kernels"]}
    assert name in kernels, f"{name} missing from the report"
    return kernels[name]


@pytest.mark.parametrize("example", eco.EXAMPLES, ids=lambda ex: ex.kernel)
def test_each_example_gets_its_verdict(report: dict[str, Any], example: Any):
    k = _kernel(report, example.kernel)
    said = f"{k['verdict']} / {k['primary_category']}: {k['diagnosis']}; consequences: {k['consequences']}"
    assert (k["verdict"], k["primary_category"]) == (example.verdict, example.category), said


def test_the_triton_tutorial_kernel_says_which_config_won_and_ran_the_quick_shapes(report: dict[str, Any]):
    from pytest_gemm.checks import registry

    k = _kernel(report, "triton_tutorial_fp16")
    assert k["timings"] and "BLOCK_SIZE_M" in (k["timings"][0].get("autotune") or ""), k["timings"]
    assert sum(1 for c in k["checks"] if c["check"] == "exact") == len(registry.QUICK_EXACT)
    assert "autotune(s) per shape" in report["log"]


def test_the_kernelbench_module_reports_the_copy_of_its_result(report: dict[str, Any]):
    k = _kernel(report, "ModelNew")
    assert k["timings"] and "copying it into C" in (k["timings"][0].get("result_copy") or ""), k["timings"]
