"""Nothing passes silently: what the run could not test is counted and, where asked, fails it.

- :func:`gpu_checks_not_run`: with ``--gemm-require-gpu``, a run whose GPU checks were all
  skipped fails, with their reasons (an early probe catches the no-GPU case in
  ``configure``; this catches a GPU on which no kernel's check could run).
- :func:`nothing_compiled`: a compile-only run in which no kernel compiled (nor failed to)
  fails with the reasons.
- :func:`untested_kernels`: a kernel under test of which nothing ran for want of a GPU (a
  Python launcher declares no CUDA C to compile) fails the run, with one line naming it.
- :func:`uncompiled_kernels`: in a compile-only run that compiled something, a kernel under
  test none of whose compile checks ran (a Python launcher that declares no CUDA it builds)
  gets one line naming it; the run is judged by what it compiled.
- :func:`skips_by_reason`: the terminal summary counts skipped tests by reason, so a run
  that skipped most of its checks says so without ``-rs``.

Pure functions over the JSON records and pytest's skip reports; tested with no GPU.
"""
from __future__ import annotations

import re
from collections import Counter
from typing import Any, Iterable
from ..outputs.records import as_records
from ..outputs.records import RunResults

#: Records of GPU checks skipped for lack of a GPU carry a message starting with this
#: (``kernels.device.probe``); verdicts and reports can tell "compiled only" by it.
NO_GPU_PREFIX = "no usable GPU"


def is_gpu_check(record: Any) -> bool:
    return record.check != "compile" and not record.ladder


def gpu_checks_not_run(records: Iterable[Any]) -> str | None:
    """None when at least one GPU check ran (passed or failed) or none was collected; else
    why none ran: the skip reasons, most frequent first. ``records``: ``CheckRecord`` (or
    their JSON form)."""

    gpu = [r for r in as_records(records) if is_gpu_check(r)]
    if not gpu or any(r.outcome in ("passed", "failed") for r in gpu):
        return None
    return f"no GPU check ran: all {len(gpu)} were skipped: {_reasons(gpu)}"


def _reasons(records: list[Any]) -> str:
    """The skip messages of ``records``, most frequent first (three, then how many more)."""
    reasons = Counter(str(r.message or "no reason given") for r in records)
    listed = "; ".join(f"{reason} ({count}x)" for reason, count in reasons.most_common(3))
    return listed + (f"; and {len(reasons) - 3} more reasons" if len(reasons) > 3 else "")


def nothing_compiled(records: Iterable[Any]) -> str | None:
    """Compile-only mode: None when some compile check ran (passed or failed); else why none
    did (every one skipped: claims that exclude the architectures asked for, a Python launcher
    that declares no CUDA it builds), the skip messages most frequent first."""

    compiles = [r for r in as_records(records) if r.check == "compile" and not r.ladder]
    if any(r.outcome in ("passed", "failed") for r in compiles):
        return None
    if not compiles:
        return "compile-only mode (--gemm-arch) compiled nothing: no compile check ran (were they deselected?)"
    return f"compile-only mode (--gemm-arch) compiled nothing: every compile check was skipped: {_reasons(compiles)}"


def untested_kernels(records: Iterable[Any], names: Iterable[str] | None = None) -> list[str]:
    """One line for each kernel under test (not the ladder) whose verdict is ``skipped`` and whose
    launch check was skipped for want of a GPU (a Python launcher with no GPU: it has nothing to
    compile): nothing of it was tested. The reason is that launch check's: how far the launcher
    ran with stand-in arrays. ``names``: only these kernels (the Python launchers under test)."""

    lines = []
    wanted = None if names is None else set(names)
    for name, result in RunResults.build(records).kernels.items():
        if wanted is not None and name not in wanted:
            continue
        launch = [r for r in result.checks if r.check == "launch" and r.skipped_for_no_gpu]
        if not result.ladder and result.verdict.status == "skipped" and launch:
            lines.append(f"{name}: not tested: {launch[0].summary}")
    return lines


def uncompiled_kernels(records: Iterable[Any], names: Iterable[str]) -> list[str]:
    """Compile-only mode: one line for each of ``names`` (the kernels under test) whose compile
    checks were all skipped, with the first one's reason; a kernel with no compile record at all
    (deselected) gets none. Pure."""
    lines = []
    kernels = RunResults.build(records).kernels
    for name in names:
        result = kernels.get(name)
        found = [r for r in result.checks if r.check == "compile"] if result is not None and not result.ladder else []
        if found and all(r.outcome == "skipped" for r in found):
            lines.append(f"{name}: not compile-checked: {found[0].summary}")
    return lines


def skip_reason(report: Any) -> str:
    """The reason of a skipped test report (``Skipped: `` dropped)."""
    longrepr = getattr(report, "longrepr", None)
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        reason = str(longrepr[2])
    else:
        reason = str(longrepr or "")
    for prefix in ("Skipped: ", "SKIPPED: "):
        if reason.startswith(prefix):
            reason = reason[len(prefix):]
    return reason.strip() or "no reason given"


#: What varies between skips of one cause (the kernel, the architecture, the shape, the
#: compute capability): replaced, so the summary counts causes; -rs has each test's own words.
_VARYING = (
    (re.compile(r"'[^']*'"), "'…'"),
    (re.compile(r"\bsm_\d+a?\b"), "sm_…"),
    (re.compile(r"\b\d+x\d+x\d+\b"), "MxNxK"),
    (re.compile(r"compute capability \d+\.\d+"), "compute capability …"),
)


def reason_kind(reason: str) -> str:
    """A skip reason with what varies between tests of the same cause replaced."""
    for pattern, replacement in _VARYING:
        reason = pattern.sub(replacement, reason)
    return reason


def skips_by_reason(reports: Iterable[Any], limit: int = 8) -> list[str]:
    """Summary lines: how many tests were skipped, then the count of each cause, in the words of
    one of its tests ("e.g." where they differ: a newcomer read "kernel '…' does not claim sm_…"
    as a placeholder left unfilled)."""
    seen: dict[str, list[str]] = {}  # each cause's skips, in their own words
    for r in reports:
        if getattr(r, "skipped", False) and not hasattr(r, "wasxfail"):
            reason = skip_reason(r)
            seen.setdefault(reason_kind(reason), []).append(reason)
    counts = Counter({kind: len(reasons) for kind, reasons in seen.items()})
    if not counts:
        return []
    total = sum(counts.values())
    lines = [f"pytest-gemm: {total} skipped, by reason (-rs lists each test):"]
    width = len(str(max(counts.values())))
    for kind, count in counts.most_common(limit):
        words = sorted(set(seen[kind]))
        lines.append(f"  {count:>{width}}  {words[0] if len(words) == 1 else 'e.g. ' + words[0]}")
    if len(counts) > limit:
        rest = sum(c for _, c in counts.most_common()[limit:])
        lines.append(f"  {rest:>{width}}  ... {len(counts) - limit} other reasons")
    return lines
