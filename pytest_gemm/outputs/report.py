"""The ranking table (terminal summary) and the JSON report, from the check records.

Pure: works on the list of JSON records collected from every check, so it is
tested with no GPU.
"""
from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

SCHEMA_VERSION = 1


def kernel_summaries(records: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per kernel: precision, verdict, every check's outcome, resources, timings."""
    kernels: dict[str, dict[str, Any]] = {}
    for r in records:
        k = kernels.setdefault(r["kernel"], {"name": r["kernel"], "precision": r.get("precision"),
                                             "checks": [], "resources": {}, "timings": [], "sweep": []})
        if r.get("ladder"):
            k["ladder"] = True  # a reference rung timed for the ranking, not a kernel under test
        entry = {key: r.get(key) for key in ("check", "shape", "params", "outcome", "category", "message", "wall_s")}
        k["checks"].append(entry)
        if r.get("resources") and r.get("check") == "launch":
            k["resources"] = r["resources"]
        if r.get("timing"):
            t = r["timing"]
            k["timings"].append({"shape": t.get("shape"), "median_ms": t["median_ms"], "min_ms": t["min_ms"],
                                 "spread": t["spread"], "tflops": t["tflops"],
                                 "fraction_of_cublas": r.get("fraction_of_cublas"),
                                 "fraction_of_roof": r.get("fraction_of_roof"),
                                 "roof_kind": r.get("roof_kind"),
                                 "cublas_median_ms": r.get("cublas", {}).get("median_ms"),
                                 "gpu_shared": bool(r.get("gpu_shared")),
                                 "late_launches": int(t.get("late_launches") or 0)})
        if r.get("check") == "sweep" and r.get("sweep"):
            from ..measure.sweep import report_entries

            k["sweep"] = report_entries(r["sweep"])
    for k in kernels.values():
        outcomes = [c["outcome"] for c in k["checks"]]
        failed = [c for c in k["checks"] if c["outcome"] == "failed"]
        k["verdict"] = "failed" if failed else ("passed" if "passed" in outcomes else "skipped")
        k["failure_categories"] = sorted({c["category"] or "failed" for c in failed})
    return kernels


def _correct(summary: dict[str, Any]) -> bool:
    """Ranked only if no correctness check failed (speed and sweep failures, e.g. a gate, still rank;
    those that make a timing untrusted are handled in ranking_rows)."""
    return not [c for c in summary["checks"] if c["outcome"] == "failed" and c["check"] not in ("speed", "sweep")]


def ranking_rows(records: list[dict[str, Any]]) -> tuple[list[list[Any]], list[list[Any]]]:
    """(ranked rows, unranked rows with failure categories)."""
    summaries = kernel_summaries(records)
    ranked, unranked = [], []
    for s in summaries.values():
        res = s["resources"]
        speed_failed = [c for c in s["checks"] if c["check"] in ("speed", "sweep")
                        and c["category"] in ("timing_escape", "stale_output")]
        if not _correct(s) or speed_failed:
            cats = sorted({c["category"] or "failed" for c in s["checks"] if c["outcome"] == "failed"})
            unranked.append([s["name"], s["precision"], ", ".join(cats)])
            continue
        for t in s["timings"]:
            label = s["name"] + (" (ladder)" if s.get("ladder") else "") \
                + (" (GPU shared with another worker)" if t.get("gpu_shared") else "")
            ranked.append([label, s["precision"], "x".join(map(str, t["shape"] or [])), t["median_ms"],
                           t["spread"], t["tflops"], t["fraction_of_cublas"], t["fraction_of_roof"],
                           res.get("registers"), res.get("spill_stores", 0) + res.get("spill_loads", 0) if res else None,
                           res.get("occupancy")])
    ranked.sort(key=lambda row: -row[5])
    return [[i + 1] + row for i, row in enumerate(ranked)], unranked


HEADERS = ["rank", "kernel", "precision", "shape", "median ms", "spread", "TFLOP/s", "x cuBLAS", "of roof",
           "regs", "spills", "occupancy"]


def ranking_table(records: list[dict[str, Any]]) -> list[str]:
    from tabulate import tabulate

    ranked, unranked = ranking_rows(records)
    lines: list[str] = []
    if ranked:
        fmt = [[r[0], r[1], r[2], r[3], f"{r[4]:.3f}", f"{100 * r[5]:.1f}%", f"{r[6]:.2f}",
                "" if r[7] is None else f"{r[7]:.3f}", "" if r[8] is None else f"{100 * r[8]:.0f}%",
                r[9], r[10], "" if r[11] is None else f"{100 * r[11]:.0f}%"] for r in ranked]
        lines += tabulate(fmt, headers=HEADERS, tablefmt="simple").splitlines()
    if unranked:
        lines.append("not ranked (failed correctness or timing checks):")
        lines += tabulate(unranked, headers=["kernel", "precision", "failure categories"], tablefmt="simple").splitlines()
    return lines


def compile_table(records: list[dict[str, Any]]) -> list[str]:
    """Compile-only checks: one row per kernel and architecture with ptxas' resource figures."""
    from tabulate import tabulate

    rows = []
    for r in records:
        if r.get("check") != "compile" or r["outcome"] == "skipped":
            continue
        res = r.get("resources") or {}
        rows.append([r["kernel"], (r.get("params") or {}).get("arch"), res.get("registers", ""),
                     (res.get("spill_stores", 0) + res.get("spill_loads", 0)) if res else "",
                     res.get("stack_frame", ""), res.get("shared_static", ""),
                     r["outcome"] if not r.get("category") else f"{r['outcome']} ({r['category']})"])
    if not rows:
        return []
    return tabulate(rows, headers=["kernel", "arch", "registers", "spill bytes", "stack bytes",
                                   "static smem bytes", "outcome"], tablefmt="simple").splitlines()


def summary_lines(st: Any, config: Any) -> list[str]:
    from ..measure.roofs import combine_roofs, roofs_summary
    from .sweep_table import sweep_table

    records = st.results
    table = compile_table(records) + ranking_table(records) + sweep_table(records)
    roofs = roofs_summary(combine_roofs(r.get("roofs") for r in records))
    table += [roofs] if roofs else []
    failures = [r for r in records if r["outcome"] == "failed"]
    notes = list(getattr(st, "notes", None) or [])  # e.g. where --gemm-plot drew the ranking
    if not table and not failures and not notes:
        return []
    lines = ["", "=" * 20 + " pytest-gemm " + "=" * 20]
    lines += table + notes
    if failures:
        by_cat: dict[str, int] = defaultdict(int)
        for r in failures:
            by_cat[r.get("category") or "failed"] += 1
        lines.append("failed checks by category: " + ", ".join(f"{c}: {n}" for c, n in sorted(by_cat.items())))
    return lines


def build_report(records: list[dict[str, Any]], device: dict[str, Any] | None) -> dict[str, Any]:
    from ..measure.roofs import combine_roofs

    return {"schema_version": SCHEMA_VERSION, "device": device,
            "roofs": combine_roofs(r.get("roofs") for r in records),
            "kernels": list(kernel_summaries(records).values())}


def write_json_report(path: Path, st: Any) -> None:
    from ..kernels.device import probe

    found = probe() if st.results and any(r.get("outcome") != "skipped" for r in st.results) else None
    device = found.as_dict() if found is not None and not isinstance(found, str) else None
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(build_report(st.results, device), indent=2, default=str))
