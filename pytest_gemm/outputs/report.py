"""The ranking table (terminal summary) and the JSON report, from the run's results
(``records.RunResults``, built once; a list of records is built into one here).

Pure: tested with no GPU. The report's layout is ``report.schema.json`` beside this file
(``report_schema.py`` validates against it).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .launch_view import check_launches, kernel_launches, launch_lines, speed_lines, timing_trace
from .process_time import time_summary
from .records import RunResults
from .verdicts import BLAS_ZERO_RULES
from ..measure.sweep import report_entries
from tabulate import tabulate
from ..measure.roofs import combine_roofs, roofs_summary
from .sweep_table import sweep_table
from .meta import build_meta

Results = Any  # RunResults, or records (CheckRecord or their JSON form) to build one from

SCHEMA_VERSION = 3  # 2: verdict, primary_category, diagnosis, consequences, notes per kernel (docs/report-schema.md)
# 3: the run's meta block; each timing's per-call times (times_ms, cublas_times_ms) and clocks


def _timing_entry(r: Any) -> dict[str, Any]:
    t = r.facts["timing"]
    return {"shape": t.get("shape"), "median_ms": t["median_ms"], "min_ms": t["min_ms"], "spread": t["spread"],
            "tflops": t["tflops"], "fraction_of_cublas": r.facts.get("fraction_of_cublas"),
            "fraction_of_roof": r.facts.get("fraction_of_roof"), "roof_kind": r.facts.get("roof_kind"),
            "cublas_median_ms": (r.facts.get("cublas") or {}).get("median_ms"),
            "gpu_shared": bool(r.facts.get("gpu_shared")), "late_launches": int(t.get("late_launches") or 0),
            "gpu_busy": (r.facts.get("gpu_quiet") or {}).get("quiet") is False,
            "autotune": r.facts.get("autotune"),  # the config a Triton autotuner chose, or None
            "result_copy": r.facts.get("result_copy"),  # a module's result copied into C in each timed call
            # every timed call, in call order: what --gemm-compare's statistic reads (speed_stats.py)
            "times_ms": list(t.get("times_ms") or []),
            "cublas_times_ms": list((r.facts.get("cublas") or {}).get("times_ms") or []),
            "clocks": r.facts.get("clocks"),  # SM and memory clocks just before and after the timed calls
            "alone_s": r.facts.get("alone_s"),  # where the check's hold of the GPU alone went (measure/laps.py)
            **timing_trace(r)}  # the traced kernels' GPU time beside the event time (launch_view.py)


def kernel_summaries(records: Results) -> dict[str, dict[str, Any]]:
    """Per kernel, as the JSON report keeps it: precision, verdict with its root cause, every
    check's outcome, resources, timings, sweep (``records.KernelResult`` is the typed form)."""
    kernels: dict[str, dict[str, Any]] = {}
    for name, result in RunResults.build(records).kernels.items():
        verdict = result.verdict
        k: dict[str, Any] = {"name": name, "precision": result.precision, "verdict": verdict.status,
                             "primary_category": verdict.primary_category, "diagnosis": verdict.diagnosis,
                             "primary_check": verdict.primary_check, "consequences": verdict.consequences,
                             "notes": verdict.notes, "checks": [], "resources": result.resources,
                             "timings": [], "sweep": []}
        if result.ladder:
            k["ladder"] = True  # a reference rung timed for the ranking, not a kernel under test
        for r in result.checks:
            entry = {"check": r.check, "shape": r.shape, "params": r.params, "outcome": r.outcome,
                     "category": r.category, "summary": r.summary, "details": list(r.details),
                     "message": r.message}
            if r.requested_shape:
                entry["requested_shape"] = r.requested_shape
            if r.wall_s is not None:
                entry["wall_s"] = r.wall_s
            if check_launches(r) is not None:
                entry["launches"] = check_launches(r)  # the GPU kernels it launched (checks/launch_trace.py)
            k["checks"].append(entry)
            if isinstance(r.facts.get("timing"), dict):
                k["timings"].append(_timing_entry(r))
            if r.check == "sweep" and r.facts.get("sweep"):
                k["sweep"] = report_entries(r.facts["sweep"])
        if kernel_launches(result) is not None:
            k["launches"] = kernel_launches(result)
        k["time"] = time_summary(result.checks)  # where its seconds went: process starts, lock waits
        kernels[name] = k
    return kernels


def ranking_rows(records: Results) -> tuple[list[list[Any]], list[list[Any]]]:
    """(ranked rows, unranked rows with the root cause): ranked only when ``timing_trusted``."""
    ranked, unranked = [], []
    for result in RunResults.build(records).kernels.values():
        res = result.resources
        if not result.trusted:
            v = result.verdict
            unranked.append([result.name, result.precision, v.primary_category or "failed",
                             _clip(v.diagnosis or "", 100)])
            continue
        for r in result.timed:
            t = _timing_entry(r)
            rule = result.verdict.primary_category  # a BLAS zero rule alone: right on finite inputs, ranked, marked
            label = result.name + (" (ladder)" if result.ladder else "") \
                + (" (reads C when beta == 0)" if rule == BLAS_ZERO_RULES[0] else "") \
                + (" (GPU shared with another worker)" if t.get("gpu_shared") else "") \
                + (" (GPU busy with another process's work)" if t.get("gpu_busy") else "")
            ranked.append([label, result.precision, "x".join(map(str, t["shape"] or [])), t["median_ms"],
                           t["spread"], t["tflops"], t["fraction_of_cublas"], t["fraction_of_roof"],
                           res.get("registers"), res.get("spill_stores", 0) + res.get("spill_loads", 0) if res else None,
                           res.get("occupancy")])
    ranked.sort(key=lambda row: -row[5])
    return [[i + 1] + row for i, row in enumerate(ranked)], unranked


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[:width - 3] + "..."


HEADERS = ["rank", "kernel", "precision", "shape", "median ms", "spread", "TFLOP/s", "x cuBLAS", "of roof",
           "regs", "spills", "occupancy"]


def ranking_table(records: Results) -> list[str]:
    ranked, unranked = ranking_rows(records)
    lines: list[str] = []
    if ranked:
        fmt = [[r[0], r[1], r[2], r[3], f"{r[4]:.3f}", f"{100 * r[5]:.1f}%", f"{r[6]:.2f}",
                "" if r[7] is None else f"{r[7]:.3f}", "" if r[8] is None else f"{100 * r[8]:.0f}%",
                r[9], r[10], "" if r[11] is None else f"{100 * r[11]:.0f}%"] for r in ranked]
        lines += tabulate(fmt, headers=HEADERS, tablefmt="simple").splitlines()
    if unranked:
        lines.append("not ranked (failed correctness or timing checks; one root cause each, "
                     "its consequences in the JSON report):")
        lines += tabulate(unranked, headers=["kernel", "precision", "root cause", "diagnosis"],
                          tablefmt="simple").splitlines()
    return lines


def compile_table(records: Results) -> list[str]:
    """Compile-only checks: one row per kernel and architecture with ptxas' resource figures."""
    rows = []
    for r in RunResults.build(records).records:
        if r.check != "compile" or r.outcome == "skipped":
            continue
        res = r.facts.get("resources") or {}
        build = r.params.get("build")  # a Python launcher's declared build
        rows.append([f"{r.kernel} ({build})" if build else r.kernel, r.params.get("arch"), res.get("registers", ""),
                     (res.get("spill_stores", 0) + res.get("spill_loads", 0)) if res else "",
                     res.get("stack_frame", ""), res.get("shared_static", ""),
                     r.outcome if not r.category else f"{r.outcome} ({r.category})"])
    if not rows:
        return []
    return tabulate(rows, headers=["kernel", "arch", "registers", "spill bytes", "stack bytes",
                                   "static smem bytes", "outcome"], tablefmt="simple").splitlines()


def summary_lines(st: Any, run: Results | None = None, own_kernel: bool = False) -> list[str]:
    """The terminal summary's lines; ``own_kernel``: the course requires the student's own kernel
    (runner/trace_options.py), so a skipped trace says the rule went unchecked."""
    run = RunResults.build(st.results if run is None else run)
    records = run.records
    table = compile_table(run) + ranking_table(run) + sweep_table(run)
    roofs = roofs_summary(combine_roofs(r.facts.get("roofs") for r in records))
    table += [roofs] if roofs else []
    table += sorted({f"device: {w}" for r in records for w in r.facts.get("device_warnings") or ()})
    table += speed_lines(run) + launch_lines(run, own_kernel)
    table += verdict_lines(run)
    failures = [r for r in records if r.failed]
    notes = list(getattr(st, "notes", None) or [])  # e.g. where --gemm-plot drew the ranking
    if not table and not failures and not notes:
        return []
    lines = ["", "=" * 20 + " pytest-gemm " + "=" * 20]
    lines += table + notes
    if failures:
        lines += root_cause_lines(run)
    return lines


def verdict_lines(records: Results) -> list[str]:
    """Kernels under test whose run did not test everything: never shown as passed."""
    lines = []
    for name, result in RunResults.build(records).kernels.items():
        v = result.verdict
        if (v.status in ("compiled only", "incomplete") or (v.notes and v.status != "failed")) and not result.ladder:
            lines.append(f"{name}: {v.status}" + (f" ({'; '.join(v.notes)})" if v.notes else ""))
    return lines


def root_cause_lines(records: Results) -> list[str]:
    """Each failing kernel: its root cause and diagnosis, then what failed as a consequence."""
    lines = []
    for name, result in RunResults.build(records).kernels.items():
        v = result.verdict
        if v.status != "failed":
            continue
        lines.append(f"{name}: {v.primary_category or 'failed'} ({v.primary_check}): {v.diagnosis}")
        lines += [f"    consequence: {c}" for c in v.consequences]
    return lines


def build_report(records: Results, device: dict[str, Any] | None,
                 meta: dict[str, Any] | None = None) -> dict[str, Any]:
    run = RunResults.build(records)
    if meta is None:  # what this process knows: versions, the clocks the speed checks read
        meta = build_meta(None, None, (), device.get("name") if device else None, run.records)
    return {"schema_version": SCHEMA_VERSION, "meta": meta, "device": device,
            "roofs": combine_roofs(r.facts.get("roofs") for r in run.records),
            "kernels": list(kernel_summaries(run).values())}


def json_report(run: Results, with_device: bool = True, command: str | None = None, cwd: str | None = None,
                folders: Any = (), with_versions: bool | None = None) -> dict[str, Any]:
    """The JSON report of a run (the device and the CUDA versions are probed only when asked,
    the device only when a GPU check ran; ``with_versions`` defaults to ``with_device``); its meta
    block names ``command``, ``cwd`` and the commits of the kernels' ``folders``."""
    from ..kernels.device import probe  # lazy: a test replaces probe on its module

    run = RunResults.build(run)
    ran = any(r.outcome != "skipped" for r in run.records)
    found = probe() if with_device and ran else None
    device = found.as_dict() if found is not None and not isinstance(found, str) else None
    meta = build_meta(command, cwd, folders, device["name"] if device else None, run.records,
                      probe=with_device if with_versions is None else with_versions)
    return build_report(run, device, meta)


def write_json(path: Path, report: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=2, default=str))
