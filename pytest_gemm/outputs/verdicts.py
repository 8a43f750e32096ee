"""The verdict rules: what one kernel's check records add up to (``kernel_verdict``: its
status and, when it failed, one root cause with the other failures as its consequences) and
whether its timings may be ranked (``timing_trusted_checks``). ``records.KernelResult`` applies
both once, when a run's results are built; no renderer decides on its own.

Pure: tested with no GPU. The rules are written down, one row per rule, in
``docs/verdicts.md``; each has a test.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

from ..checks.registry import CHECKS
from ..model.precision import NEAR_BOUND
from ..model import categories as cat
import re

# records.CheckRecord: not imported, since records imports this module to build each kernel's result
CheckRecord = Any

# wrong_stream (the launch check): work off the caller's stream is not inside the caller's timing
# either, so none of such a kernel's timings is ranked
UNTRUSTED_TIMING = (cat.TIMING_ESCAPE, cat.STALE_OUTPUT, cat.WRONG_STREAM)
TIMED_CHECKS = tuple(c.name for c in CHECKS if c.timed)
CORRECTNESS_CHECKS = tuple(c.name for c in CHECKS if c.correctness)

# Root causes, most fundamental first: a failure of an earlier kind explains later ones
# (a fault or a race makes values wrong; wrong values make a timed output wrong).
ROOT_CAUSE_ORDER: tuple[str, ...] = (
    cat.COMPILE_ERROR, cat.LAUNCH_ERROR,
    # the launcher's work is not on the caller's stream (the launch check): not ordered after the
    # harness's uploads nor before its reads, so every other check's evidence is unreliable
    cat.WRONG_STREAM,
    cat.VENDOR_KERNEL, cat.FAULT, cat.TIMEOUT, cat.INPUT_MODIFIED,
    cat.OUT_OF_BOUNDS_WRITE, cat.NONDETERMINISTIC, cat.UNWRITTEN_OUTPUT, cat.WRONG_VALUES, cat.BETA_ZERO_READS_C,
    cat.PRECISION_TOO_LOW, cat.TIMING_ESCAPE, cat.STALE_OUTPUT,
)
# BLAS's zero-scalar rule (beta == 0: C is not read): a kernel that breaks only it is right on every
# finite input, and ranked. Reading A and B at alpha == 0 is a note (``cat.NOTES``), not a rule.
BLAS_ZERO_RULES = (cat.BETA_ZERO_READS_C,)
# Where a failure showed first: the registry's order (compile, launch, exact, ...), then the smaller shape
_CHECK_ORDER = tuple(c.name for c in CHECKS)


@dataclass
class Verdict:
    status: str                              # passed | failed | compiled only | incomplete | skipped
    primary_category: str | None = None      # the root cause, when failed
    diagnosis: str | None = None             # what the primary check said
    primary_check: str | None = None         # where it showed first (``exact 17x33x65``)
    consequences: list[str] = field(default_factory=list)  # the other failed checks, one line per check
    notes: list[str] = field(default_factory=list)         # e.g. not BLAS-conformant at beta == 0

    def as_dict(self) -> dict[str, Any]:
        return {"status": self.status, "primary_category": self.primary_category, "diagnosis": self.diagnosis,
                "primary_check": self.primary_check, "consequences": list(self.consequences),
                "notes": list(self.notes)}


# ---- the rules ----------------------------------------------------------------------

def _size(r: CheckRecord) -> int:
    m, n, k = (list(r.shape or []) + [0, 0, 0])[:3]
    return m * n * k


def _order(r: CheckRecord) -> tuple[int, int]:
    check = _CHECK_ORDER.index(r.check) if r.check in _CHECK_ORDER else len(_CHECK_ORDER)
    return check, _size(r)


# The checks that compare C's values with the reference (``judges_values`` in the registry)
_CORRECTNESS = tuple(c.name for c in CHECKS if c.judges_values)


def _precision_evidence(checks: Sequence[CheckRecord]) -> bool:
    """precision_too_low is a root cause only when the random-input errors match a lower
    precision's rounding in size at two K or more (so they grow with K as that precision's do),
    and every other wrong value is explained the same way: an exact check either passed or found
    the output to be exactly A@B of inputs rounded to that precision (judges/diagnose.py)."""
    accuracy_failed = [r for r in checks if r.check == "accuracy" and r.failed]
    ks = {(r.shape or [0, 0, 0])[2] for r in accuracy_failed}
    if not accuracy_failed or len(ks) < 2 or any(r.category != cat.PRECISION_TOO_LOW for r in accuracy_failed):
        return False
    # a wrong exact output whose errors are rounding-sized with no logic pattern (an fp16 or bf16
    # accumulator, not rounded inputs) is explained the same way (checks/exact.py: exact_error)
    return not any(r.failed and r.check in _CORRECTNESS and r.category == cat.WRONG_VALUES
                   and not _rounding_sized(r) for r in checks)


def _rounding_sized(r: CheckRecord) -> bool:
    return r.check == "exact" and bool((r.facts.get("exact_error") or {}).get("rounding_sized"))


def _k(r: CheckRecord) -> int:
    return int((list(r.shape or []) + [0, 0, 0])[2])


def _precision_onset(checks: Sequence[CheckRecord]) -> tuple[int, int] | None:
    """Precision loss that starts at some K (fp16 or bf16 partial sums on a deep-K path):
    (the first K that fails, the largest K below it that passed), or None. Evidence, all of:
    every random-input failure matches a lower precision's rounding in size (precision_too_low);
    every other correctness failure is an exact check whose errors are rounding-sized with no
    logic pattern (``exact_error``, checks/exact.py) or a precision_too_low; nothing fails
    below that K; and a random-input case below it passed: the loss grows with K."""
    failed = [r for r in checks if r.failed and r.check in _CORRECTNESS]
    accuracy = [r for r in failed if r.check == "accuracy"]
    if not accuracy or any(r.category != cat.PRECISION_TOO_LOW for r in accuracy):
        return None
    for r in failed:
        if r.category != cat.PRECISION_TOO_LOW and not (r.category == cat.WRONG_VALUES and _rounding_sized(r)):
            return None
    onset = min(_k(r) for r in failed)
    below = [_k(r) for r in checks if r.check == "accuracy" and r.passed and _k(r) < onset]
    if not below:
        return None
    return onset, max(_k(r) for r in checks if r.check in _CORRECTNESS and r.passed and _k(r) < onset)


def _emulated_fp32(checks: Sequence[CheckRecord]) -> bool:
    """An fp32 emulation on tensor cores (3xTF32): some exact output is exactly the emulation's
    result (fact ``emulated_fp32``, checks/exact.py), every other wrong value of a correctness check
    is another such output or a random-input error the size of a lower precision's rounding
    just over its bound (``precision_too_low`` from the accuracy check, at most ``NEAR_BOUND`` times
    the bound: the tensor cores' accumulator truncates, which takes 3xTF32 just over the fp32 bound
    on heavy-tailed inputs), and an accuracy check passed: products accurate to about fp32, but
    not IEEE fp32 products."""
    wrong = [r for r in checks if r.failed and r.check in _CORRECTNESS
             and r.category in (cat.WRONG_VALUES, cat.PRECISION_TOO_LOW)]
    emulated = [r for r in wrong if r.check == "exact" and r.category == cat.PRECISION_TOO_LOW
                and r.facts.get("emulated_fp32")]
    return bool(emulated) and all(r.category == cat.PRECISION_TOO_LOW and (r.facts.get("emulated_fp32") or _near_bound(r))
                                  for r in wrong) and any(r.check == "accuracy" and r.passed for r in checks)


def _near_bound(r: CheckRecord) -> bool:
    """An accuracy failure just over its bound (at most ``NEAR_BOUND`` times it, fact ``accuracy``):
    the size of a truncating float32 accumulator's errors, not of a lower precision's inputs."""
    facts = r.facts.get("accuracy") or {}
    ratio, allowed = facts.get("max_ratio"), facts.get("allowed")
    return r.check == "accuracy" and isinstance(ratio, (int, float)) and isinstance(allowed, (int, float)) \
        and ratio <= NEAR_BOUND * allowed


def _history(failed: Sequence[CheckRecord]) -> list[CheckRecord]:
    """Failures whose evidence is that the output follows the call history (checks/deterministic.py:
    a replay with a fresh history, or a stale result for new inputs), not chance."""
    return [r for r in failed if r.facts.get("call_history") and r.category in (cat.STALE_OUTPUT, cat.UNWRITTEN_OUTPUT)]


def _swapped_scalars(failed: Sequence[CheckRecord]) -> list[CheckRecord]:
    """The alpha/beta check's records that found C = beta*A@B + alpha*C_old (fact ``alpha_beta_swapped``):
    at alpha == 1 and beta == 0, where every other check calls, that formula leaves C as it was, so
    their ``unwritten_output`` is the swap's consequence, not a store that never happens."""
    return [r for r in failed if r.check == "alphabeta" and r.facts.get("alpha_beta_swapped") is True]


def _primary(failed: Sequence[CheckRecord], checks: Sequence[CheckRecord]) -> str | None:
    cats = {r.category for r in failed}
    if cats & {cat.COMPILE_ERROR, cat.LAUNCH_ERROR}:
        return cat.COMPILE_ERROR if cat.COMPILE_ERROR in cats else cat.LAUNCH_ERROR
    precision = _precision_evidence(checks) or _precision_onset(checks) is not None or _emulated_fp32(checks)
    swapped = bool(_swapped_scalars(failed))
    # C left as it was, launch after launch, is the swap's doing too, not a history the kernel keeps
    history = [r for r in _history(failed) if not (swapped and r.category == cat.UNWRITTEN_OUTPUT)]
    for category in ROOT_CAUSE_ORDER:
        if category == cat.UNWRITTEN_OUTPUT and swapped:
            continue
        if category == cat.NONDETERMINISTIC and history:
            # outputs that follow the call history explain launches that differ, and the wrong
            # or unwritten values of the checks that met the state; a race would not
            return min(history, key=_order).category
        if category == cat.WRONG_VALUES and precision:
            continue  # wrong values there are the lower precision's (none in a correctness check)
        if category in cats:
            return category
        if category == cat.WRONG_VALUES and cat.PRECISION_TOO_LOW in cats and not precision:
            return cat.WRONG_VALUES  # errors beyond the bound that do not follow a lower precision
    return None  # failures with no category of ours (a speed gate, an assertion in a user's test)


def _representative(records: Sequence[CheckRecord]) -> CheckRecord:
    """The record whose diagnosis stands for the kernel: the one most of them share (numbers
    aside), first in suite order: one shape's accident (K = 1 makes "skips a K term" read as
    "every element is 0") does not speak for the rest."""

    groups: dict[str, list[CheckRecord]] = {}
    for r in records:
        groups.setdefault(re.sub(r"\d+", "#", r.first_line), []).append(r)
    largest = max(groups.values(), key=lambda g: (len(g), tuple(-x for x in min(_order(r) for r in g))))
    return min(largest, key=_order)


def _consequences(failed: Sequence[CheckRecord], category: str | None) -> list[str]:
    """The failed checks of another category than the root cause, one line per check (those of
    the root cause's own category are the same finding at other shapes)."""
    by_check: dict[str, list[CheckRecord]] = {}
    for r in sorted(failed, key=_order):
        if r.category != category:
            by_check.setdefault(r.check, []).append(r)
    lines = []
    for check, rs in by_check.items():
        # a precision finding that the verdict did not accept is shown as what it is: wrong values
        cats = sorted({(cat.WRONG_VALUES if r.category == cat.PRECISION_TOO_LOW else r.category) or "failed"
                       for r in rs})
        what = f"{len(rs)} case{'s' if len(rs) > 1 else ''}" if len(rs) > 1 or rs[0].shape else "failed"
        lines.append(f"{check}: {what} ({', '.join(cats)}), first {rs[0].where}")
    return lines


def _alpha_zero_notes(checks: Sequence[CheckRecord]) -> list[str]:
    """The note for a kernel that reads A and B at alpha == 0 (fact ``alpha_zero_reads_ab`` of the
    beta_zero check: the NaN outputs and where): not a failure, since BLAS documents no rule there."""
    seen = [r for r in checks if isinstance(r.facts.get(cat.ALPHA_ZERO_READS_AB), dict)]
    if not seen:
        return []
    first = min(seen, key=_order).facts[cat.ALPHA_ZERO_READS_AB]
    return [f"{cat.ALPHA_ZERO_READS_AB}: with alpha == 0 it reads A and B (NaN in them gave {first.get('nan_outputs')} "
            f"NaN outputs at {first.get('shape')}); reference BLAS does not read them there, but BLAS documents no such "
            "rule, so this costs nothing"]


def kernel_verdict(checks: Sequence[CheckRecord]) -> Verdict:
    """The verdict of one kernel's checks.

    - failed: some check failed. The primary category is the most fundamental category among
      the failures (``ROOT_CAUSE_ORDER``; precision_too_low only with ``_precision_evidence``,
      ``_precision_onset`` or ``_emulated_fp32``),
      its diagnosis the one most of its records share (``_representative``); every other failure
      is listed as a consequence, not as a finding of its own.
    - passed: nothing failed and a GPU check (beyond compile and launch) passed.
    - compiled only: nothing failed, the compile checks passed and the GPU checks were
      skipped for want of a GPU.
    - incomplete: nothing failed, but no correctness check ran (only launch or timing), or the
      harness could not run some check (``harness_out_of_memory``, or ``harness_error``: its own
      code raised outside the kernel's launch): not the kernel's failure, never its root cause.
    - skipped: nothing ran.
    """
    notes = []
    if any(r.check == "beta_zero" and r.passed and r.facts.get("blas_beta_zero") is False for r in checks):
        notes.append("declared beta_zero=\"reads_c\": reads C when beta == 0, so it is not BLAS-conformant there")
    notes += _alpha_zero_notes(checks)
    harness = [r for r in checks if r.failed and r.category in cat.HARNESS_FAILURES]
    oom = [r for r in harness if r.category == cat.HARNESS_OUT_OF_MEMORY]
    bugs = [r for r in harness if r.category == cat.HARNESS_ERROR]
    if oom:  # the harness's failure, not the kernel's: those checks did not run
        notes.append(f"{len(oom)} check(s) could not run: the test harness ran out of GPU memory "
                     f"(first {oom[0].where}); no verdict on the kernel there")
    if bugs:
        notes.append(f"{len(bugs)} check(s) could not run: pytest-gemm's own code raised outside the kernel's "
                     f"launch (first {bugs[0].where}): a bug in pytest-gemm; no verdict on the kernel there")
    failed = [r for r in checks if r.failed and r.category not in cat.HARNESS_FAILURES]
    if failed:
        category = _primary(failed, checks)
        history = [r for r in _history(failed) if r.category == category]
        emulated = [r for r in failed if r.facts.get("emulated_fp32")] if category == cat.PRECISION_TOO_LOW and \
            _emulated_fp32(checks) else []  # the exact check's 3xTF32 finding names it, not an accuracy excess
        # the swap names it, not the accuracy check's errors "far beyond any rounding" (C left as it was)
        swapped = _swapped_scalars(failed) if category == cat.WRONG_VALUES else []
        candidates = history or emulated or swapped or [r for r in failed if r.category == category] or \
            [r for r in failed if r.category == cat.PRECISION_TOO_LOW] or failed
        head = _representative(candidates)
        diagnosis = head.first_line
        if category == cat.WRONG_VALUES and head.category == cat.PRECISION_TOO_LOW:
            diagnosis = ("random-input errors exceed the bound but do not follow a lower precision's rounding "
                         "(or the exact checks fail too): " + head.where)
        onset = _precision_onset(checks) if category == cat.PRECISION_TOO_LOW else None
        if onset is not None and not _precision_evidence(checks):
            diagnosis = (f"precision is lost from K = {onset[0]} on (every check passed up to K = {onset[1]}): errors "
                         "the size of a lower precision's rounding that start at a K, as partial sums held in fp16 "
                         f"or bf16 on a deep-K path make them; {diagnosis}")
        return Verdict("failed", category, diagnosis, head.where, _consequences(failed, category), notes)
    if harness:
        return Verdict("incomplete", notes=notes)
    if any(r.passed and r.check in CORRECTNESS_CHECKS for r in checks):
        return Verdict("passed", notes=notes)
    if any(r.passed and r.check == "compile" for r in checks):
        if any(r.skipped_for_no_gpu for r in checks) or not any(r.check != "compile" for r in checks):
            return Verdict("compiled only", notes=notes + ["no GPU check ran: only the compile checks"])
    if any(r.passed for r in checks):
        ran = ", ".join(sorted({r.check for r in checks if r.passed}))
        return Verdict("incomplete", notes=notes + [f"no correctness check ran (only {ran})"])
    return Verdict("skipped", notes=notes)


def timing_trusted_checks(checks: Sequence[CheckRecord]) -> bool:
    """A kernel's timings may be ranked when no correctness check failed and no timed check
    found its timing untrustworthy (work escaping the timed region, a stale output). A speed
    gate (``--gemm-min-cublas-fraction``) or a sweep that ran out of time does not make the
    speed check's timing untrustworthy, and neither does reading C at beta == 0 (the kernel is
    right on finite C; it is ranked, marked)."""
    for r in checks:
        if r.failed and r.category in (*BLAS_ZERO_RULES, cat.HARNESS_OUT_OF_MEMORY):
            continue  # BLAS's beta == 0 rule alone (right on finite inputs); the harness's own failure
        # (a harness_error is not: a check that could not run vouches for nothing, and a kernel
        # could raise one on purpose)
        if r.failed and (r.check not in TIMED_CHECKS or r.category in UNTRUSTED_TIMING):
            return False
    return True
