"""The checkers themselves, tested: every checker of the conformance suite is run
against a kernel broken in exactly the way it is meant to catch (tests/broken/),
and must fail it with the right category and a telling diagnosis; two correct
kernels with unusual summation orders must pass every check.

All kernels run in one pytest subprocess (``--gemm-kernel tests/broken/kernels.py:<name>``
for each, ``-n 4``; tests/gpu_runs.py), each with ``-k`` narrowed to the check and shapes
that matter, and the assertions read the ``--gemm-report`` JSON. Needs a GPU: skipped with
the reason on a machine without one. ``assert_caught`` and ``assert_correct`` are also run
on reports made without a GPU (tests/test_report_schema.py), so that a report key they read
and the report no longer has fails in CI.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from gpu_runs import SuiteRun, SuiteRuns
from suite_helpers import case_key, load_declarations, test_id

pytestmark = pytest.mark.gemm_gpu

KERNELS_PY = Path(__file__).resolve().parent / "broken" / "kernels.py"


KERNELS = load_declarations(KERNELS_PY, "gemm_broken_kernels")
BROKEN: dict[str, tuple[Any, str, str]] = KERNELS.BROKEN
CORRECT: dict[str, Any] = KERNELS.CORRECT


@dataclass(frozen=True)
class Plan:
    """Which cases to run for one broken kernel and what they must show.

    ``fail``: cases of the kernel's own check (``"17x33x65"``,
    ``"256x256x16-distuniform"``) that must fail with its category.
    ``words``: groups of alternatives; each group must have one member in the
    diagnosis of every case in ``fail`` (case-insensitive).
    ``passes``: other cases (``"exact-16x16x16"``) that must pass: the kernel
    is broken in one way only, not everywhere.
    ``also``: cases run too (``"deterministic-1000x1000x1000"``, or a bare check
    name for all its cases); if one fails, its category must be the kernel's
    own or one of ``tolerated``.
    """

    fail: tuple[str, ...]
    words: tuple[tuple[str, ...], ...] = ()
    passes: tuple[str, ...] = ()
    also: tuple[str, ...] = ()
    tolerated: tuple[str, ...] = ()
    timeout: int = 300


NEVER_WRITTEN = (("never written",),)

PLANS: dict[str, Plan] = {
    # K > 16 only: with a single K tile there is no next tile to race with.
    "missing_sync": Plan(fail=("17x33x65", "127x255x63", "1000x1000x1000"), passes=("exact-16x16x16",),
                         also=("deterministic-1000x1000x1000",), tolerated=("nondeterministic",)),
    # Stale values only in a partial last K tile: K = 64 is exact.
    "unguarded_edge": Plan(fail=("17x33x65", "127x255x63"), passes=("exact-64x64x64",)),
    # No bounds check on loads: the K tail reads NaN guard bytes past B. K = 64 fits whole tiles.
    "unguarded_loads": Plan(fail=("17x33x65", "127x255x63"), passes=("exact-64x64x64",)),
    "k_off_by_one": Plan(fail=("17x33x65", "64x64x64", "127x255x63"),
                         words=(("K-1", "K - 1", "one step early"),)),
    # Square: exactly the transpose. Non-square: the same store, read as column-major.
    "transposed_store": Plan(fail=("64x64x64", "127x127x127"), words=(("transposed",),),
                             also=("exact-17x33x65",)),
    "partial_write": Plan(fail=("17x33x65", "64x64x64", "1000x1000x1000"), words=NEVER_WRITTEN,
                          passes=("coverage-1x1x1",)),
    # Rows past M written: at ragged M every value check fails too (its launch wrote outside C), as
    # out_of_bounds_write; at M = 64 (whole tiles) nothing is written outside C and all pass.
    "out_of_bounds_write": Plan(fail=("17x33x65", "127x255x63", "1000x1000x1000"),
                                words=(("after the end of C", "past the end of C"),),
                                passes=("guards-64x64x64", "exact-64x64x64"), also=("exact-17x33x65",)),
    "writes_into_a": Plan(fail=("1x1x1", "17x33x65"), words=(("A (", "of A", "A was"), ("modified",))),
    # Integer inputs are exact in any order: the exact check must not see the atomics.
    "float_atomics": Plan(fail=("1000x1000x1000",), words=(("race", "atomic"),),
                          passes=("exact-1000x1000x1000", "exact-17x33x65")),
    # Every accuracy case is run. At K = 16 rounding the inputs to 11 bits gives an error
    # several hundred times K*u (numpy model), so those must fail whatever the fp32
    # bound's constant; at K = 4096 it is below K*u, so larger K is left to the bound,
    # but any failure must be precision_too_low. Integers |x| <= 2048 survive the rounding.
    "fp16_inside_fp32": Plan(fail=("256x256x16-distuniform", "256x256x16-distheavy"),
                             passes=("exact-64x64x64",), also=("accuracy",)),
    "tf32_inside_fp32": Plan(fail=("256x256x16-distuniform", "256x256x16-distheavy"),
                             passes=("exact-64x64x64",), also=("accuracy",)),
    # Not 1x1x1: a grid of N//16 = 0 blocks is not a launch at all.
    "short_grid": Plan(fail=("17x33x65", "127x255x63", "1000x1000x1000"), words=NEVER_WRITTEN,
                       passes=("coverage-64x64x64",)),
    # One case only: an illegal address poisons the CUDA context for the rest of the process.
    "wild_store": Plan(fail=("64x64x64",), words=(("illegal", "address", "launch failure"),)),
    "panel_smem": Plan(fail=("128x128x65536",), words=(("refused", "shared memory"),), passes=("exact-64x64x64",)),
}



# Checked at import, so a kernel added to kernels.py without a plan fails even with no GPU.
assert set(PLANS) == set(BROKEN), f"kernels.py BROKEN and PLANS differ: {set(PLANS) ^ set(BROKEN)}"


# -- one run of the suite on every kernel here ---------------------------------------

def _split(case: str) -> tuple[str, str]:
    """``"exact-16x16x16"`` -> ``("exact", "16x16x16")``; a bare check name keeps an empty rest."""
    check, _, rest = case.partition("-")
    return check, rest


def _selection(name: str, check: str, plan: Plan) -> str:
    """The ``-k`` expression running exactly the plan's cases (test ids: check-kernel-MxNxK[-params])."""
    ids = [test_id(check, name, rest) for rest in plan.fail]
    for case in (*plan.passes, *plan.also):
        other, rest = _split(case)
        ids.append(test_id(other, name, rest))
    return " or ".join(dict.fromkeys(ids))


# The root cause each broken kernel must get from the cases its plan runs: its check's own
# category, but for missing_sync, whose race (the deterministic check) explains its wrong values.
PRIMARY = {name: category for name, (_, category, _) in BROKEN.items()} | {"missing_sync": "nondeterministic"}

# One pytest process for every kernel here (-n 4), each kernel narrowed to the cases of its plan,
# the correct ones to everything but the timed speed check (a ranking, not a correctness verdict).
_CORRECT_SELECT = "(" + " or ".join(f"-{name}-" for name in CORRECT) + ") and not speed"
SUITE_RUNS = [SuiteRun(
    "broken", tuple(f"{KERNELS_PY}:{name}" for name in (*BROKEN, *CORRECT)),
    select=" or ".join([*(f"({_selection(name, check, PLANS[name])})" for name, (_, _, check) in BROKEN.items()),
                        f"({_CORRECT_SELECT})"]),
    options=("-n", "4"), timeout=480)]


def _summary_text(record: dict[str, Any]) -> str:
    """The diagnosis, lower-cased: the record's summary and details (the category is a field)."""
    return "\n".join([record["summary"] or "", *record["details"]]).lower()


def assert_caught(name: str, check: str, category: str, plan: Plan, entry: dict[str, Any], output: str,
                  primary: str) -> None:
    records = {case_key(c): c for c in entry["checks"]}
    seen = "\n".join(f"  {key}: {c['outcome']} {c['category'] or ''}" for key, c in records.items())

    for rest in plan.fail:
        key = f"{check}-{rest}"
        assert key in records, f"{name}: {key} did not run; ran:\n{seen}\n{output[-4000:]}"
        rec = records[key]
        assert rec["outcome"] == "failed", f"{name}: {key} must fail with {category}, but {rec['outcome']}\n{seen}"
        assert rec["category"] == category, \
            f"{name}: {key} failed as {rec['category']!r}, expected {category!r}:\n{rec['message']}"
        text = _summary_text(rec)
        for group in plan.words:
            assert any(w.lower() in text for w in group), \
                f"{name}: {key}: the diagnosis names none of {group}:\n{rec['message']}"

    for case in plan.passes:
        assert case in records, f"{name}: {case} did not run; ran:\n{seen}\n{output[-4000:]}"
        rec = records[case]
        assert rec["outcome"] == "passed", \
            f"{name}: {case} must pass (the kernel is broken in one way only), but {rec['outcome']}:\n{rec['message']}"

    allowed = {category, *plan.tolerated}
    for key, rec in records.items():
        if rec["outcome"] == "failed":
            assert rec["category"] in allowed, \
                f"{name}: {key} failed as {rec['category']!r}; only {sorted(allowed)} are expected here:\n{rec['message']}"

    said = f"{entry['verdict']} / {entry['primary_category']} ({entry['primary_check']}): {entry['diagnosis']}"
    assert entry["verdict"] == "failed" and entry["primary_category"] == primary, said


CORRECT_CHECKS = ("compile", "launch", "exact", "coverage", "guards", "deterministic", "accuracy")


def assert_correct(name: str, entry: dict[str, Any], output: str, checks: tuple[str, ...] = CORRECT_CHECKS) -> None:
    failed = [f"{case_key(c)}: [{c['category']}] {c['message']}" for c in entry["checks"] if c["outcome"] == "failed"]
    assert not failed, f"{name} is correct, but:\n" + "\n".join(failed)
    assert entry["verdict"] == "passed", entry
    passed = {c["check"] for c in entry["checks"] if c["outcome"] == "passed"}
    for check in checks:
        assert check in passed, f"{name}: no {check} check passed; checks seen: {sorted(passed)}\n{output[-4000:]}"


# -- the tests ---------------------------------------------------------------------

@pytest.mark.parametrize("name", list(BROKEN))
def test_broken_kernel_is_caught_by_its_checker(suite_runs: SuiteRuns, name: str):
    kernel, category, check = BROKEN[name]
    run = suite_runs.result("broken")
    assert_caught(name, check, category, PLANS[name], run.entry(name), run.output, PRIMARY[name])
    assert run.returncode == pytest.ExitCode.TESTS_FAILED, run.output[-4000:]


@pytest.mark.parametrize("name", list(CORRECT))
def test_correct_kernel_passes_every_check(suite_runs: SuiteRuns, name: str):
    run = suite_runs.result("broken")
    assert_correct(name, run.entry(name), run.output)
