"""The verdict rules (docs/verdicts.md), one test per rule, on records as the checks write them."""
from __future__ import annotations

import pytest

from pytest_gemm.outputs.records import CheckRecord, kernel_results, timing_trusted
from pytest_gemm.outputs.verdicts import kernel_verdict


def rec(check, outcome="passed", category=None, shape=(64, 64, 64), message=None, **facts):
    d = {"kernel": "k", "precision": "fp32", "check": check, "shape": list(shape) if shape else None,
         "params": {}, "outcome": outcome, "category": category,
         "message": message or (f"[{category}] {check} says so" if category else None)}
    d.update(facts)
    return CheckRecord.from_dict(d)


def fail(check, category, shape=(64, 64, 64), message=None):
    return rec(check, "failed", category, shape, message)


def test_a_kernel_that_skips_the_first_k_term_has_one_root_cause_wrong_values():
    v = kernel_verdict([rec("launch"), fail("exact", "wrong_values", message="[wrong_values] the K loop skips the first term"),
                        fail("accuracy", "precision_too_low", (256, 256, 16)),
                        fail("accuracy", "precision_too_low", (256, 256, 1024)), fail("speed", "stale_output")])
    assert v.status == "failed" and v.primary_category == "wrong_values"
    assert v.diagnosis == "the K loop skips the first term" and v.primary_check == "exact 64x64x64"
    assert [c.split(":")[0] for c in v.consequences] == ["accuracy", "speed"]
    assert "precision_too_low" not in v.consequences[0]  # not a finding: the exact checks show a logic error


def test_a_race_explains_wrong_values_and_unwritten_elements():
    v = kernel_verdict([fail("exact", "wrong_values"), fail("coverage", "unwritten_output"),
                        fail("deterministic", "nondeterministic", (1000, 1000, 1000))])
    assert v.primary_category == "nondeterministic" and len(v.consequences) == 2


def test_writing_into_an_input_is_the_root_cause_of_everything_it_breaks():
    v = kernel_verdict([fail("exact", "wrong_values"), fail("guards", "input_modified"),
                        fail("deterministic", "nondeterministic"), fail("accuracy", "wrong_values"),
                        fail("speed", "stale_output")])
    assert v.primary_category == "input_modified" and len(v.consequences) == 4


@pytest.mark.parametrize("first, then", [("compile_error", "wrong_values"), ("fault", "unwritten_output"),
                                         ("timeout", "wrong_values"), ("out_of_bounds_write", "wrong_values"),
                                         ("unwritten_output", "wrong_values"), ("wrong_values", "stale_output"),
                                         ("beta_zero_reads_c", "timing_escape")])
def test_the_more_fundamental_failure_is_primary(first, then):
    v = kernel_verdict([fail("exact", then), fail("coverage", first, (1, 1, 1))])
    assert v.primary_category == first


def test_precision_too_low_needs_passing_exact_checks_and_errors_at_two_k():
    lower = [fail("accuracy", "precision_too_low", (256, 256, 256)), fail("accuracy", "precision_too_low", (129, 131, 4096))]
    assert kernel_verdict([rec("exact"), *lower]).primary_category == "precision_too_low"
    one_k = kernel_verdict([rec("exact"), lower[1]])
    assert one_k.primary_category == "wrong_values" and "do not follow a lower precision" in one_k.diagnosis
    exact_fails = kernel_verdict([fail("exact", "wrong_values"), *lower])
    assert exact_fails.primary_category == "wrong_values" and exact_fails.primary_check.startswith("exact")
    # exact outputs that are A@B of rounded inputs are the same finding, not a logic error
    rounded = kernel_verdict([fail("exact", "precision_too_low", (2, 2, 2)), rec("exact", shape=(64, 64, 64)), *lower])
    assert rounded.primary_category == "precision_too_low" and rounded.consequences == []


def test_the_diagnosis_most_records_share_speaks_for_the_kernel():
    one = fail("exact", "wrong_values", (1, 1, 1), "[wrong_values] every element is 0: the K loop never runs")
    rest = [fail("exact", "wrong_values", (s, s, s), f"[wrong_values] the K loop stops one step early ({s - 1} terms)")
            for s in (2, 7, 16)]
    v = kernel_verdict([one, *rest])
    assert v.diagnosis == "the K loop stops one step early (1 terms)" and v.primary_check == "exact 2x2x2"


def test_a_tutorial_epilogue_fails_only_beta_zero_and_is_still_ranked():
    checks = [rec("exact"), rec("alphabeta"), fail("beta_zero", "beta_zero_reads_c"),
              rec("speed", timing={"median_ms": 1.0, "min_ms": 1.0, "spread": 0.0, "tflops": 1.0})]
    v = kernel_verdict(checks)
    assert v.primary_category == "beta_zero_reads_c" and v.consequences == []
    assert kernel_results([]) == {}
    from pytest_gemm.outputs.records import KernelResult

    assert timing_trusted(KernelResult.of("k", "fp32", checks))  # right on finite C: ranked
    assert not timing_trusted(KernelResult.of("k", "fp32", checks + [fail("exact", "wrong_values")]))


def test_declared_reads_c_passes_with_a_note():
    v = kernel_verdict([rec("exact"), rec("beta_zero", blas_beta_zero=False)])
    assert v.status == "passed" and "not BLAS-conformant" in v.notes[0]


def test_compile_only_runs_are_not_passed():
    no_gpu = "no usable GPU: cudaErrorInsufficientDriver"
    v = kernel_verdict([rec("compile", shape=None), rec("exact", "skipped", message=no_gpu)])
    assert v.status == "compiled only"
    assert kernel_verdict([rec("exact", "skipped", message="kernel does not claim")]).status == "skipped"
    assert kernel_verdict([rec("compile", shape=None), rec("exact")]).status == "passed"


def test_a_speed_gate_does_not_untrust_a_timing_but_a_stale_output_does():
    from pytest_gemm.outputs.records import KernelResult

    gate = KernelResult.of("k", "fp32", [rec("exact"), fail("speed", None, message="runs at 0.1 of cuBLAS")])
    stale = KernelResult.of("k", "fp32", [rec("exact"), fail("speed", "stale_output")])
    assert timing_trusted(gate) and not timing_trusted(stale)
    assert gate.verdict.primary_category is None and gate.verdict.diagnosis == "runs at 0.1 of cuBLAS"


def test_a_kernel_reading_c_at_beta_zero_is_ranked_marked_and_on_the_leaderboard():
    from pytest_gemm.grading.gradescope import build_results
    from pytest_gemm.outputs.report import ranking_rows

    timing = {"median_ms": 2.0, "min_ms": 2.0, "spread": 0.0, "tflops": 20.0, "shape": [64, 64, 64]}
    records = [dict(kernel="tut", precision="fp32", check="exact", shape=[8, 8, 8], params={}, outcome="passed"),
               dict(kernel="tut", precision="fp32", check="beta_zero", shape=[8, 8, 8], params={}, outcome="failed",
                    category="beta_zero_reads_c", message="[beta_zero_reads_c] with beta == 0 the kernel read C"),
               dict(kernel="tut", precision="fp32", check="speed", shape=[64, 64, 64], params={}, outcome="passed",
                    timing=timing, fraction_of_cublas=0.5)]
    ranked, unranked = ranking_rows(records)
    assert [r[1] for r in ranked] == ["tut (reads C when beta == 0)"] and unranked == []
    results = build_results(records)
    assert results["leaderboard"][0]["value"] == 20.0
    assert results["extra_data"]["pytest_gemm"]["primary_category"] == "beta_zero_reads_c"


def test_an_unreadable_clock_is_reported_not_silent():
    from types import SimpleNamespace

    from pytest_gemm.kernels.device import describe

    props = {"name": b"GPU", "major": 9, "minor": 0, "multiProcessorCount": 132, "sharedMemPerBlock": 49152}

    def refuse(attr, index):
        raise RuntimeError("cudaErrorNotSupported")

    runtime = SimpleNamespace(getDeviceProperties=lambda i: props, deviceGetAttribute=refuse)
    import sys

    fake = SimpleNamespace(cuda=SimpleNamespace(runtime=runtime))
    saved = sys.modules.get("cupy")
    sys.modules["cupy"] = fake
    try:
        device = describe(0)
    finally:
        if saved is None:
            del sys.modules["cupy"]
        else:
            sys.modules["cupy"] = saved
    assert device.clock_mhz == 0 and any("SM clock rate could not be read" in w for w in device.warnings)
    from pytest_gemm.outputs.report import summary_lines

    records = [{"kernel": "k", "check": "speed", "outcome": "passed", "device_warnings": list(device.warnings)}]
    text = "\n".join(summary_lines(SimpleNamespace(results=records), None))
    assert "device: the SM clock rate could not be read" in text


def test_the_harness_running_out_of_memory_is_not_the_kernels_failure():
    from pytest_gemm.grading.gradescope import build_results
    from pytest_gemm.outputs.records import KernelResult

    checks = [rec("exact"), fail("speed", "harness_out_of_memory", (4096, 4096, 4096))]
    v = kernel_verdict(checks)
    assert v.status == "incomplete" and v.primary_category is None and "ran out of GPU memory" in v.notes[0]
    assert timing_trusted(KernelResult.of("k", "fp32", checks))
    results = build_results([
        dict(kernel="k", precision="fp32", check="exact", shape=[8, 8, 8], params={}, outcome="passed"),
        dict(kernel="k", precision="fp32", check="speed", shape=[8, 8, 8], params={}, outcome="failed",
             category="harness_out_of_memory", message="[harness_out_of_memory] the harness ran out")])
    speed = next(t for t in results["tests"] if t["name"].startswith("speed"))
    assert "failures (" not in speed["output"] and "harness_out_of_memory" in speed["output"]
    assert results["extra_data"]["pytest_gemm"]["failure_categories"] == []


def test_an_exception_of_pytest_gemm_itself_is_not_the_kernels_failure():
    """harness_error (the sandbox's verdict on an exception raised in pytest-gemm's own code,
    outside the kernel's launch): no root cause, a note that says whose bug; the case earns nothing."""
    from pytest_gemm.grading.gradescope import build_results
    from pytest_gemm.outputs.records import KernelResult

    checks = [rec("exact"), fail("coverage", "harness_error", (17, 33, 65))]
    v = kernel_verdict(checks)
    assert v.status == "incomplete" and v.primary_category is None
    assert "a bug in pytest-gemm" in v.notes[0] and "coverage 17x33x65" in v.notes[0]
    assert not timing_trusted(KernelResult.of("k", "fp32", checks))  # not ranked: the check vouches for nothing
    # with a failure of the kernel's own, that one is the root cause and the note stays
    v = kernel_verdict(checks + [fail("exact", "wrong_values", (8, 8, 8))])
    assert v.status == "failed" and v.primary_category == "wrong_values" and v.consequences == []
    assert any("a bug in pytest-gemm" in n for n in v.notes)
    results = build_results([
        dict(kernel="k", precision="fp32", check="exact", shape=[8, 8, 8], params={}, outcome="passed"),
        dict(kernel="k", precision="fp32", check="coverage", shape=[17, 33, 65], params={}, outcome="failed",
             category="harness_error", message="[harness_error] coverage: pytest-gemm's own code raised")])
    coverage = next(t for t in results["tests"] if t["name"].startswith("coverage"))
    # no verdict on the kernel, but a case that could not run earns nothing (a kernel must not be
    # able to turn its failing cases into uncounted ones by breaking the harness)
    assert coverage["score"] == 0 and "harness_error" in coverage["tags"]
    assert "[harness_error] coverage: pytest-gemm's own code raised" in coverage["output"]
    assert results["extra_data"]["pytest_gemm"]["failure_categories"] == []
    assert results["extra_data"]["pytest_gemm"]["verdict"] == "incomplete"


def test_work_off_the_callers_stream_explains_the_rest():
    """own_stream on the H200 (2026-12-01): the launch check caught its stream; exact then saw C
    unwritten, because the launcher's work raced the harness's upload of C. Its root cause is
    wrong_stream (a stream-ordering bug), no longer timing_escape (an accusation of gaming the timer)."""
    v = kernel_verdict([fail("launch", "wrong_stream"), fail("exact", "unwritten_output", (256, 512, 128)),
                        fail("speed", "timing_escape", (1024, 1024, 1024))])
    assert v.primary_category == "wrong_stream" and v.primary_check == "launch 64x64x64"
    assert [c.split(":")[0] for c in v.consequences] == ["exact", "speed"]  # the speed check's escape: a consequence
    # a compile or launch error still comes first; a timing escape in the speed check alone does not
    assert kernel_verdict([fail("launch", "wrong_stream"), fail("exact", "launch_error")]).primary_category == "launch_error"
    assert kernel_verdict([fail("exact", "unwritten_output"), fail("speed", "timing_escape")]).primary_category == "unwritten_output"


@pytest.mark.parametrize("then", ["vendor_kernel", "fault", "timeout", "input_modified", "out_of_bounds_write",
                                  "nondeterministic", "unwritten_output", "wrong_values", "beta_zero_reads_c",
                                  "precision_too_low", "timing_escape", "stale_output"])
def test_wrong_stream_has_the_rank_of_rule_2a(then):
    """Rule 2a: right after compile and launch errors, before everything the unordered work explains."""
    v = kernel_verdict([fail("exact", then, (1, 1, 1)), fail("launch", "wrong_stream")])
    assert v.primary_category == "wrong_stream" and v.primary_check == "launch 64x64x64"
    assert "timing_escape" not in v.diagnosis


def test_wrong_stream_timings_are_not_ranked():
    from pytest_gemm.outputs.verdicts import UNTRUSTED_TIMING, timing_trusted_checks

    timed = rec("speed", timing={"median_ms": 1.0, "min_ms": 1.0, "spread": 0.0, "tflops": 1.0})
    assert timing_trusted_checks([rec("launch"), rec("exact"), timed])
    assert not timing_trusted_checks([fail("launch", "wrong_stream"), rec("exact"), timed])
    assert "wrong_stream" in UNTRUSTED_TIMING and "timing_escape" in UNTRUSTED_TIMING


def test_the_summary_says_compiled_only_when_no_gpu_check_ran():
    from types import SimpleNamespace

    from pytest_gemm.outputs.report import summary_lines

    records = [{"kernel": "k", "check": "compile", "outcome": "passed", "params": {"arch": "sm_80"}},
               {"kernel": "k", "check": "exact", "shape": [8, 8, 8], "outcome": "skipped",
                "message": "no usable GPU: cudaErrorInsufficientDriver"}]
    text = "\n".join(summary_lines(SimpleNamespace(results=records), None))
    assert "k: compiled only (no GPU check ran: only the compile checks)" in text


# -- issue 27: the last wrong root causes -----------------------------------------------------

def _exact_err(shape, sized=True, outcome="failed"):
    return rec("exact", outcome, "wrong_values" if outcome == "failed" else None, shape,
               exact_error={"k": shape[2], "max_ratio": 800.0, "rounding_sized": sized, "pattern": not sized})


DEEP_K_PASSES = [rec("exact", shape=(1024, 1024, 1024)), rec("accuracy", shape=(256, 256, 16)),
                 rec("accuracy", shape=(256, 256, 1024))]
DEEP_K_FAILS = [_exact_err((2048, 2048, 2048)), _exact_err((128, 128, 65536)),
                fail("accuracy", "precision_too_low", (129, 131, 4096)),
                fail("accuracy", "precision_too_low", (129, 131, 4096))]


def test_precision_loss_that_starts_at_a_k_is_precision_too_low_naming_that_k():
    v = kernel_verdict(DEEP_K_PASSES + DEEP_K_FAILS)
    assert v.primary_category == "precision_too_low"
    assert "from K = 2048 on" in v.diagnosis and "up to K = 1024" in v.diagnosis
    assert [c.split(":")[0] for c in v.consequences] == ["exact"]  # the exact failures: the same loss


def test_precision_loss_needs_a_passing_case_below_its_k_and_rounding_sized_exact_errors():
    # nothing passed below the first failing K: no growth with K shown, and one accuracy K only
    assert kernel_verdict(DEEP_K_FAILS).primary_category == "wrong_values"
    # an exact error with a logic pattern (or NaN) is a logic error, whatever accuracy says
    logic = [_exact_err((2048, 2048, 2048), sized=False), *DEEP_K_FAILS[1:]]
    assert kernel_verdict(DEEP_K_PASSES + logic).primary_category == "wrong_values"
    # a failure below the onset: not a loss that starts at a K
    early = DEEP_K_PASSES + DEEP_K_FAILS + [fail("exact", "wrong_values", (17, 33, 65))]
    assert kernel_verdict(early).primary_category == "wrong_values"
    # random-input errors beyond any rounding: wrong values
    beyond = DEEP_K_PASSES + DEEP_K_FAILS[:2] + [fail("accuracy", "wrong_values", (129, 131, 4096))]
    assert kernel_verdict(beyond).primary_category == "wrong_values"


def test_an_accumulator_in_half_precision_at_every_k_is_precision_too_low():
    # bf16/fp16 sums everywhere: accuracy fails at every K, exact errors are rounding-sized
    checks = [fail("accuracy", "precision_too_low", (256, 256, k)) for k in (16, 256, 1024)] + \
             [_exact_err((s, s, s)) for s in (64, 512)]
    assert kernel_verdict(checks).primary_category == "precision_too_low"


def test_outputs_that_follow_the_call_history_are_not_a_race():
    stale = rec("deterministic", "failed", "stale_output", (1000, 1000, 1000),
                "[stale_output] returned an earlier call's result for new inputs", call_history="new inputs")
    v = kernel_verdict([fail("exact", "wrong_values"), fail("coverage", "wrong_values"), stale])
    assert v.primary_category == "stale_output" and "earlier call's result" in v.diagnosis
    assert v.primary_check == "deterministic 1000x1000x1000" and len(v.consequences) == 2  # exact, coverage
    # the same category from a timed check is no history evidence: wrong values come first
    assert kernel_verdict([fail("exact", "wrong_values"), fail("speed", "stale_output")]).primary_category == \
        "wrong_values"


def test_left_unwritten_after_its_first_call_speaks_for_the_kernel():
    history = rec("deterministic", "failed", "unwritten_output", (128, 128, 16384),
                  "[unwritten_output] left C unwritten after its first call", call_history="calls on the same inputs")
    coverage = [fail("coverage", "unwritten_output", (s, s, s), "[unwritten_output] no element of C was written")
                for s in (1, 17, 127)]
    v = kernel_verdict([*coverage, history])
    assert v.primary_category == "unwritten_output" and v.diagnosis == "left C unwritten after its first call"
    # a race stays a race
    race = kernel_verdict([*coverage, fail("deterministic", "nondeterministic")])
    assert race.primary_category == "nondeterministic"
    # and a fault is still more fundamental than state
    assert kernel_verdict([history, fail("exact", "fault")]).primary_category == "fault"


def test_reading_a_and_b_at_alpha_zero_is_a_note_not_a_failure():
    """BLAS documents that C need not be set when beta == 0, and nothing of the kind for A and B
    at alpha == 0 (issue 43): the beta_zero check records the NaN outputs as a fact; the verdict
    passes, ranks the timing and says so in a note."""
    from pytest_gemm.outputs.records import KernelResult

    timing = {"median_ms": 1.0, "min_ms": 1.0, "spread": 0.0, "tflops": 1.0}
    seen = {"nan_outputs": 7, "outputs": 9, "shape": "17x33x65"}
    checks = [rec("exact"), rec("alphabeta"), rec("beta_zero", alpha_zero_reads_ab=seen), rec("speed", timing=timing)]
    v = kernel_verdict(checks)
    assert v.status == "passed" and v.primary_category is None
    assert len(v.notes) == 1 and v.notes[0].startswith("alpha_zero_reads_ab: ") and "17x33x65" in v.notes[0]
    assert timing_trusted(KernelResult.of("k", "fp32", checks))
    # beside a real failure it is still a note, and the failure is the root cause
    v = kernel_verdict([fail("exact", "wrong_values"), rec("beta_zero", alpha_zero_reads_ab=seen)])
    assert v.primary_category == "wrong_values" and v.consequences == [] and v.notes[0].startswith("alpha_zero")
    assert kernel_verdict([rec("exact"), rec("beta_zero")]).notes == []


def test_the_alpha_zero_note_is_on_the_summary_line_and_in_gradescope_and_costs_no_points():
    from pytest_gemm.grading.gradescope import build_results
    from pytest_gemm.outputs.report import verdict_lines

    seen = {"nan_outputs": 7, "outputs": 9, "shape": "17x33x65"}
    records = [rec("exact"), rec("alphabeta"), rec("beta_zero", alpha_zero_reads_ab=seen)]
    lines = verdict_lines(records)
    assert len(lines) == 1 and lines[0].startswith("k: passed (alpha_zero_reads_ab: with alpha == 0 it reads A and B")
    results = build_results([r.to_dict() for r in records])
    clean = build_results([r.to_dict() for r in (rec("exact"), rec("alphabeta"), rec("beta_zero"))])
    assert results["score"] == clean["score"] and results["extra_data"]["pytest_gemm"]["correct"] is True
    assert "note (no points lost): alpha_zero_reads_ab: " in results["output"]


def test_the_docs_name_a_source_for_every_failing_category_and_every_note():
    """docs/verdicts.md, "Where each rule comes from": a row per failing category (every category
    but the harness's own), each with one of the three sources; a row per note; nothing else."""
    import re
    from pathlib import Path

    from pytest_gemm.checks import registry
    from pytest_gemm.model import categories as cat

    text = (Path(__file__).resolve().parent.parent / "docs" / "verdicts.md").read_text()
    section = text.split("## Where each rule comes from", 1)[1].split("\n## ", 1)[0]
    rules, notes = section.split("Notes (no failure", 1)
    rows = dict(re.findall(r"^\| `([a-z_0-9]+)` \| ([^|]+?) \| [^|]*\w[^|]* \|$", rules, re.M))
    failing = set(cat.ALL) - set(cat.HARNESS_FAILURES)
    assert set(rows) == failing, set(rows) ^ failing
    sources = {"BLAS documentation", "CUDA semantics", "the plugin's contract"}
    assert {c: s for c, s in rows.items() if s not in sources} == {}
    reported = {c for check in registry.CHECKS for c in check.categories}
    assert reported <= failing and not reported & set(cat.NOTES)  # no check fails with a note
    assert set(re.findall(r"^\| `([a-z_0-9]+)` \| [^|]*\w[^|]* \|$", notes, re.M)) == set(cat.NOTES)


def test_the_verdict_s_lists_of_checks_are_the_registry_s():
    """Where a failure showed first (registry order), which checks judge values (``judges_values``)
    and which time (``timed``) come from checks/registry.py: verdicts.py types no list of checks."""
    import ast
    from pathlib import Path

    from pytest_gemm.checks import registry
    from pytest_gemm.outputs import verdicts

    names = set(registry.BY_NAME)
    typed = [node.lineno for node in ast.walk(ast.parse(Path(verdicts.__file__).read_text()))
             if isinstance(node, (ast.Tuple, ast.List, ast.Set))
             and sum(isinstance(e, ast.Constant) and e.value in names for e in node.elts) >= 3]
    assert not typed, f"outputs/verdicts.py types a list of checks at line(s) {typed}: derive it from the registry"


def test_a_check_that_judges_values_takes_part_in_precision_evidence():
    """judges_values is what the rules read: a wrong value from a check the registry marks so
    blocks the precision_too_low finding; one from a check it does not (guards) does not."""
    accuracy = [fail("accuracy", "precision_too_low", (256, 256, 16)), fail("accuracy", "precision_too_low", (256, 256, 1024))]
    assert kernel_verdict([*accuracy, fail("alphabeta", "wrong_values")]).primary_category == "wrong_values"
    assert kernel_verdict([*accuracy, fail("guards", "wrong_values")]).primary_category == "precision_too_low"


@pytest.mark.parametrize("check", ["exact", "coverage", "guards", "alphabeta", "beta_zero", "deterministic", "accuracy"])
def test_a_kernel_passes_only_on_a_check_that_judges_its_results(check):
    """Compiling, launching and timing prove nothing about C: with only those passed the kernel
    is incomplete; one passed correctness check (the registry's ``correctness``) makes it passed."""
    ran = [rec("compile", shape=None), rec("launch"), rec("speed")]
    v = kernel_verdict(ran)
    assert v.status == "incomplete" and "no correctness check ran (only compile, launch, speed)" in v.notes
    assert kernel_verdict([*ran, rec(check)]).status == "passed"


def test_swapped_alpha_and_beta_is_wrong_values_though_c_keeps_its_old_values_at_alpha_1_beta_0():
    """C = beta*A@B + alpha*C_old (a launcher passing beta for alpha): at alpha == 1, beta == 0, where
    every check but alpha/beta's calls, C keeps what it held, which alone reads as never written. The
    alpha/beta check names the swap (fact ``alpha_beta_swapped``): that is the root cause a reviewer names."""
    from pytest_gemm.judges.epilogue import SWAPPED

    swap = f"[wrong_values] alpha=0.7, beta=1.3 at 64x64x64: {SWAPPED}"
    records = [rec("launch"), fail("exact", "unwritten_output", message="[unwritten_output] every element unwritten"),
               fail("coverage", "unwritten_output", (17, 33, 65)),
               rec("alphabeta", "failed", "wrong_values", message=swap, epilogue=SWAPPED,
                   alpha_beta_swapped=True)]
    v = kernel_verdict(records)
    assert v.primary_category == "wrong_values" and SWAPPED in v.diagnosis, v
    assert v.primary_check.startswith("alphabeta") and [c.split(":")[0] for c in v.consequences] == ["exact", "coverage"]
    # another wrong epilogue explains nothing of the kind: C left unwritten stays the root cause
    other = records[:3] + [rec("alphabeta", "failed", "wrong_values", message="[wrong_values] beta is ignored",
                               epilogue="beta is ignored: C_old is not added (C = alpha*A@B)",
                               alpha_beta_swapped=False)]
    assert kernel_verdict(other).primary_category == "unwritten_output"
    # the determinism check sees C unwritten at every call, the same with a fresh history: not a history the
    # kernel keeps either
    history = records + [rec("deterministic", "failed", "unwritten_output", (1000, 1000, 1000),
                             call_history="the same launch with the CUDA module loaded again")]
    assert kernel_verdict(history).primary_category == "wrong_values"
    # the accuracy check reads C left as it was (a finite fill) as wrong values far beyond rounding; however
    # many such records, the swap is what the diagnosis says (an outside kit's review found the accuracy
    # check's words printed)
    far = "[wrong_values] errors up to 6.25e+13 u|A||B|, far beyond any rounding"
    accuracy = [fail("accuracy", "wrong_values", (256, 256, k), message=far) for k in (256, 256, 1024, 1024)]
    v = kernel_verdict(records + accuracy)
    assert v.primary_category == "wrong_values" and SWAPPED in v.diagnosis and v.primary_check.startswith("alphabeta"), v
