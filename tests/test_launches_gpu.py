"""The launch trace on the GPU (docs/launch-trace.md), with kernels of ours (tests/launches/):

- a launcher that calls ``cupy.matmul``, graded with the course setting ``--gemm-own-kernel``:
  ``vendor_kernel``, naming cuBLAS's kernels;
- a merged launch serving 15 calls: ``timing_escape``, "fewer launches than calls";
- a two-kernel split-K launcher: listed as two kernels (``splitk_partial<16>``, demangled, and
  ``splitk_reduce``), passing, its speed line with kernel time beside event time;
- a CUDA-graph launcher (captured once per buffers, shape and scalars, replayed on every call):
  its graph's kernel, ``graph_gemm``, listed once per call in every traced check (a capture runs
  nothing and is no launch; each replay's kernel carries its ``cudaGraphLaunch``'s correlation id),
  and passing: no "fewer launches than calls";
- the Triton tutorial kernel (examples/ecosystems, its own run): listed by its name,
  ``matmul_kernel``; ``cupy.matmul`` there, without the course setting, passes.

Each needs CUPTI (the cupti-python binding): without it every check says why it was not traced,
and these tests skip with that reason.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import test_ecosystems_gpu as eco_gpu
from gpu_runs import SuiteRun, SuiteRuns

pytestmark = pytest.mark.gemm_gpu

KERNELS = Path(__file__).resolve().parent / "launches" / "kernels.py"
NAMES = ("calls_cupy_matmul", "merged_launch", "split_k", "cupy_graph")
SUITE_RUNS = [SuiteRun("launches", tuple(f"{KERNELS}:{name}" for name in NAMES),
                       select="launch or exact or speed",
                       options=("-n", "2", "--gemm-own-kernel", "--gemm-shapes", "quick",
                                "--gemm-bench-shape", "1024"), timeout=480),
              *(r for r in eco_gpu.SUITE_RUNS if r.name in ("eco-triton", "eco-rest"))]


def _traced(entry: dict[str, Any]) -> dict[str, Any]:
    launches = entry.get("launches") or {}
    if "skipped" in launches:
        pytest.skip(f"launch trace: {launches['skipped']}")
    assert launches.get("kernels") is not None, entry
    return launches


def _check(entry: dict[str, Any], check: str) -> dict[str, Any]:
    found = [c for c in entry["checks"] if c["check"] == check]
    assert found, [c["check"] for c in entry["checks"]]
    return found[0]


def test_cupy_matmul_under_the_course_setting_is_vendor_kernel(suite_runs: SuiteRuns):
    run = suite_runs.result("launches")
    entry = run.entry("calls_cupy_matmul")
    launches = _traced(entry)
    assert (entry["verdict"], entry["primary_category"]) == ("failed", "vendor_kernel"), entry
    assert "launched library kernels, not its own" in entry["diagnosis"]
    assert any(lib in entry["diagnosis"] for lib in ("(cuBLAS)", "(cuBLASLt)", "(CUTLASS)")), entry["diagnosis"]
    print(f"\ncalls_cupy_matmul: {entry['diagnosis']}\n  launches: {launches['summary']}")


def test_one_launch_serving_fifteen_calls_is_timing_escape(suite_runs: SuiteRuns):
    entry = suite_runs.result("launches").entry("merged_launch")
    _traced(entry)
    speed = _check(entry, "speed")
    assert speed["outcome"] == "failed" and speed["category"] == "timing_escape", speed["message"]
    assert "fewer launches than calls" in speed["summary"] and "merged_gemm" in speed["summary"], speed["summary"]
    assert entry["primary_category"] == "timing_escape", entry
    print(f"\nmerged_launch: {speed['summary']}")


def test_split_k_is_listed_as_two_kernels_and_passes(suite_runs: SuiteRuns):
    run = suite_runs.result("launches")
    entry = run.entry("split_k")
    launches = _traced(entry)
    assert launches["summary"] == "2 launches: splitk_partial<16> x1, splitk_reduce x1", launches  # one call
    partial = launches["kernels"][0]
    assert partial["block"] == [16, 16, 1] and partial["registers"] > 0, partial
    assert entry["verdict"] == "passed", entry  # its own kernels: the course setting does not fail it
    speed = _check(entry, "speed")
    assert speed["outcome"] == "passed", speed["message"]  # two launches a call: no timing_escape
    (timing,) = entry["timings"]
    assert 0 < timing["kernel_ms"] <= timing["median_ms"] * 1.01, timing
    assert "split_k speed 1024x1024x1024: event" in run.output and "launcher overhead" in run.output
    assert re.search(r"split_k \(exact \d+x\d+x\d+\): 2 launches: splitk_partial<16> x1, splitk_reduce x1", run.output)


def test_a_cuda_graph_launcher_is_traced_once_per_call_and_passes(suite_runs: SuiteRuns):
    run = suite_runs.result("launches")
    entry = run.entry("cupy_graph")
    _traced(entry)
    traced = [c for c in entry["checks"] if "kernels" in (c.get("launches") or {})]
    said = [(c["check"], c["shape"], c["launches"].get("calls"), c["launches"].get("summary")) for c in traced]
    print("\ncupy_graph:\n" + "\n".join(f"  {check} {shape}: {calls} calls, {summary}" for check, shape, calls, summary
                                         in said))
    assert {"launch", "exact", "speed"} <= {c["check"] for c in traced}, said
    for c in traced:  # every call replayed the graph once: one graph_gemm a call, nothing for a capture
        launches = c["launches"]
        assert launches["calls"] > 0 and launches["launches"] == launches["calls"], (c["check"], c["shape"], launches)
        assert [(k["short"], k["count"]) for k in launches["kernels"]] == [("graph_gemm", launches["calls"])], \
            (c["check"], c["shape"], launches)
    assert entry["verdict"] == "passed", (entry["primary_category"], entry["diagnosis"])
    speed = _check(entry, "speed")
    assert speed["outcome"] == "passed", speed["message"]  # no timing_escape: one launch a call
    (timing,) = entry["timings"]
    assert 0 < timing["kernel_ms"] <= timing["median_ms"] * 1.01, timing


def test_a_triton_kernel_is_listed_by_its_name(suite_runs: SuiteRuns):
    entry, _ = eco_gpu._kernel(suite_runs, "triton_tutorial_fp16")
    launches = _traced(entry)
    assert any(k["short"] == "matmul_kernel" for k in launches["kernels"]), launches
    print(f"\ntriton_tutorial_fp16: {launches['summary']}")


def test_cupy_matmul_without_the_course_setting_passes_and_shows_cublas(suite_runs: SuiteRuns):
    from pytest_gemm.judges.launches import vendor_kernels

    entry, _ = eco_gpu._kernel(suite_runs, "cupy_matmul")
    launches = _traced(entry)
    assert entry["verdict"] == "passed", entry  # off by default: someone timing library code still can
    assert vendor_kernels(launches["kernels"]), launches  # and what ran is still named
