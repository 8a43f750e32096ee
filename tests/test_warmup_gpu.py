"""Warm-up found at run time, on the GPU (issue 43): Triton's tutorial matmul with its
autotuner, reached in ways no reading of the launcher's code finds (tests/warmup/launchers.py),
with default options. Its tuning is seen in the kernel's process while it happens
(checks/warmup.py), gets its own budget and is never a ``timeout``; a launcher that never
returns still is, within the check's normal budget.

Two runs beside the other GPU tests' (tests/gpu_runs.py): ``warmup-inside`` (kernel imported
inside the launcher: fp16 passes, fp32 as published is ``precision_too_low``); ``warmup-ways`` the
other ways (fp16, quick shapes, no speed check, to keep the GPU suite within its time) and the
launcher that never returns. The module-global way is examples/ecosystems/triton_matmul.py
(tests/test_ecosystems_gpu.py).

fp32 with ``ieee`` runs alone only (below): ``tl.dot`` without tensor cores makes ptxas work on
the tutorial's 16 configs (128x256 and 256x128 tiles of fp32 FMAs among them) again at every new
Triton specialisation: beside the suite's other runs its checks took up to 197 s each on the H200
at 805b9ae, and the run did not end within its 480 s on the H200 at abd2fc4 nor on an H100 at
657a2fa (three warm-ups of 186 to 219 s at its end). That is a compiler's cost, not the suite's
logic, so the one command for every GPU test leaves it to the alone run and says so.

The issue's time bound (the imported-inside run <= 180 s, cold Triton caches) is for that run
alone: ``GEMM_WARMUP_ALONE=1`` (``bash tools/gpu_session.sh warmup``) runs it alone with a
Triton cache no run has used. In the GPU suite it shares the GPU and the CPUs with every other
run and Triton's cache with the other Triton runs, so its wall time there says nothing of the
bound, and that test skips saying so.
"""
from __future__ import annotations

import importlib.util
import os
import tempfile
import uuid
from pathlib import Path
from typing import Any

import pytest
from gpu_runs import SuiteRun, SuiteRuns

pytestmark = pytest.mark.gemm_gpu

LAUNCHERS = Path(__file__).resolve().parent / "warmup" / "launchers.py"
INSIDE = {"imported_inside_fp16": ("passed", None), "imported_inside_fp32": ("failed", "precision_too_low"),
          "imported_inside_fp32_ieee": ("passed", None)}
WAYS = {"attribute_at_first_call": ("passed", None), "method_of_class": ("passed", None),
        "wrapper_from_another_package": ("passed", None), "never_returns": ("failed", "timeout")}
TARGET_S = 180.0  # the issue's bound on the imported-inside run, cold caches, default options
MISSING = [name for name in ("triton", "torch") if importlib.util.find_spec(name) is None]


def _cold() -> tuple[tuple[str, str], ...]:
    """A Triton cache folder no run has used (Triton creates it): every config compiles."""
    return (("TRITON_CACHE_DIR", str(Path(tempfile.gettempdir()) / f"gemm-warmup-triton-{uuid.uuid4().hex}")),)


ALONE = os.environ.get("GEMM_WARMUP_ALONE", "").strip().lower() in ("1", "yes", "true", "on")
ALONE_ONLY = {"imported_inside_fp32_ieee"}  # see above: beside the suite's other runs its compiles outlast 480 s
INSIDE_HERE = [name for name in INSIDE if ALONE or name not in ALONE_ONLY]
SUITE_RUNS = [] if MISSING else [
    SuiteRun("warmup-inside", tuple(f"{LAUNCHERS}:{name}" for name in INSIDE_HERE), options=("-n", str(len(INSIDE_HERE))),
             timeout=480, env=_cold() if ALONE else ()),
    *([] if ALONE else [SuiteRun("warmup-ways", tuple(f"{LAUNCHERS}:{name}" for name in WAYS), select="not speed",
                                 options=("-n", "2", "--gemm-shapes", "quick"), timeout=480)]),
]


def _entry(suite_runs: SuiteRuns, run: str, name: str) -> tuple[dict[str, Any], Any]:
    if MISSING:
        pytest.skip(f"needs {' and '.join(MISSING)} (Triton's tutorial kernel launches through torch)")
    finished = suite_runs.result(run)
    assert finished.report is not None, finished.output[-8000:]
    return finished.entry(name), finished


@pytest.mark.parametrize("name", [*INSIDE, *WAYS])
def test_each_way_gets_its_verdict_and_no_warm_up_is_a_timeout(suite_runs: SuiteRuns, name: str):
    if name not in INSIDE_HERE and name in INSIDE:
        pytest.skip(f"{name} runs in the imported-inside run alone only (bash tools/gpu_session.sh warmup, "
                    "GEMM_WARMUP_ALONE=1): fp32 without tensor cores compiles the tutorial's 16 configs again "
                    "at every Triton specialisation, minutes of ptxas beside the suite's other runs")
    k, finished = _entry(suite_runs, "warmup-inside" if name in INSIDE else "warmup-ways", name)
    status, category = {**INSIDE, **WAYS}[name]
    said = f"{k['verdict']} / {k['primary_category']} ({k['primary_check']}): {k['diagnosis']}; {k['consequences']}"
    assert (k["verdict"], k["primary_category"]) == (status, category), said
    if name != "never_returns":
        assert not any(c["category"] == "timeout" for c in k["checks"]), said


def test_the_imported_inside_run_alone_with_cold_caches_meets_the_issues_time(suite_runs: SuiteRuns):
    if not ALONE:
        pytest.skip(f"the issue's {TARGET_S:g} s is for the imported-inside run alone with cold Triton caches: "
                    "bash tools/gpu_session.sh warmup (GEMM_WARMUP_ALONE=1) measures it; here it shares the GPU, "
                    "the CPUs and a Triton cache with the GPU suite's other runs")
    _, finished = _entry(suite_runs, "warmup-inside", "imported_inside_fp16")
    assert finished.wall_s <= TARGET_S, f"{finished.wall_s:.1f} s (the issue asks <= {TARGET_S:g} s)"


def test_a_launcher_that_never_returns_times_out_within_a_minute(suite_runs: SuiteRuns):
    k, _ = _entry(suite_runs, "warmup-ways", "never_returns")
    first = next(c for c in k["checks"] if c["category"] == "timeout")
    budget = float(first["summary"].split("did not finish within ")[1].split(" s")[0])
    assert budget < 60, first["summary"]
