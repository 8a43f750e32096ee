"""Where a run's GPU time went, from the GPU lock's log (``PYTEST_GEMM_LOCK_LOG``).

    PYTEST_GEMM_LOCK_LOG=lock.jsonl python -m pytest_gemm.grading.gradebook ...
    python tools/lock_log.py lock.jsonl

Each line of the log is one hold (``measure/gpu_lock.py``): who (pid), ``kind`` (``x``: a timed
check alone on the GPU; ``s``: a correctness check or a kernel process's start-up, beside other
shared holders; ``r``: a check presumed hung, from then until it ended, while timed checks
waited for it; ``w``: a check warming up, which timed checks wait for a while only), ``what``, and when it was asked for, held and released. The summary says how
much of the run's span the GPU was held alone (timings run one at a time: that part of a class
does not shrink with more students at once), how long the timed checks waited and how much of
that was spent draining shared holds while new ones queued behind them, how long nothing held
the GPU at all, and the longest shared holds by what they were. No GPU needed.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Iterable, Sequence


def read_log(path: Path) -> list[dict[str, Any]]:
    holds = []
    for line in path.read_text().splitlines():
        line = line.strip()
        if line:
            holds.append(json.loads(line))
    return holds


def _union(intervals: Iterable[tuple[float, float]]) -> list[tuple[float, float]]:
    out: list[tuple[float, float]] = []
    for start, end in sorted(i for i in intervals if i[1] > i[0]):
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


def _length(intervals: Sequence[tuple[float, float]]) -> float:
    return sum(end - start for start, end in intervals)


def _minus(a: Sequence[tuple[float, float]], b: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    """The parts of the disjoint sorted intervals ``a`` outside the disjoint sorted ``b``."""
    out = []
    for start, end in a:
        cursor = start
        for b_start, b_end in b:
            if b_end <= cursor or b_start >= end:
                continue
            if b_start > cursor:
                out.append((cursor, b_start))
            cursor = max(cursor, b_end)
        if cursor < end:
            out.append((cursor, end))
    return out


def _intersect(a: Sequence[tuple[float, float]], b: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    return _minus(a, _minus(a, b))


def group_of(what: str) -> str:
    """A hold's group: its check's name ("exact at 64x64x64" -> "exact"), or what it is."""
    return (what or "?").split(" at ")[0]


def summarize(holds: Sequence[dict[str, Any]], top: int = 5) -> dict[str, Any]:
    """Seconds, from the holds of one run (see the module's docstring)."""
    if not holds:
        return {"holds": 0}
    start = min(h["asked"] for h in holds)
    end = max(h["released"] for h in holds)
    alone = [h for h in holds if h["kind"] == "x"]
    shared = [h for h in holds if h["kind"] == "s"]
    hung = [h for h in holds if h["kind"] == "r"]
    warming = [h for h in holds if h["kind"] == "w"]
    held_alone = _union((h["held"], h["released"]) for h in alone)
    held_shared = _union((h["held"], h["released"]) for h in shared)
    held_any = _union([*held_alone, *held_shared])
    writer_waiting = _union((h["asked"], h["held"]) for h in alone)
    # a timed check waits for the shared holds in progress to end; new ones queue behind it
    draining = _intersect(_minus(writer_waiting, held_alone), held_shared)
    by_group: dict[str, dict[str, float]] = {}
    for h in shared:
        g = by_group.setdefault(group_of(h.get("what", "")), {"holds": 0, "held_s": 0.0, "max_s": 0.0, "wait_s": 0.0})
        g["holds"] += 1
        g["held_s"] += h["released"] - h["held"]
        g["max_s"] = max(g["max_s"], h["released"] - h["held"])
        g["wait_s"] += h["held"] - h["asked"]
    longest = sorted(shared, key=lambda h: h["held"] - h["released"])[:top]
    return {
        "holds": len(holds), "span_s": end - start,
        "alone": {"holds": len(alone), "held_s": _length(held_alone),
                  "wait_s": sum(h["held"] - h["asked"] for h in alone),
                  "max_s": max((h["released"] - h["held"] for h in alone), default=0.0)},
        "shared": {"holds": len(shared), "held_s": sum(h["released"] - h["held"] for h in shared),
                   "wait_s": sum(h["held"] - h["asked"] for h in shared)},
        "draining_s": _length(draining),
        "presumed_hung": {"holds": len(hung), "marked_s": _length(_union((h["held"], h["released"]) for h in hung)),
                          "longest": max((h["released"] - h["held"] for h in hung), default=0.0)},
        "warming": {"holds": len(warming), "marked_s": _length(_union((h["held"], h["released"]) for h in warming)),
                    "longest": max((h["released"] - h["held"] for h in warming), default=0.0)},
        "unheld_s": (end - start) - _length(held_any),
        "by_group": {k: {kk: round(vv, 3) for kk, vv in v.items()} for k, v in
                     sorted(by_group.items(), key=lambda kv: -kv[1]["held_s"])},
        "longest_shared": [{"what": h.get("what", ""), "pid": h["pid"], "held_s": round(h["released"] - h["held"], 3)}
                           for h in longest],
    }


def render(summary: dict[str, Any]) -> str:
    if not summary.get("holds"):
        return "GPU LOCK: no holds logged"
    span, alone, shared = summary["span_s"], summary["alone"], summary["shared"]
    lines = [
        f"GPU LOCK: {summary['holds']} holds over {span:.1f} s",
        f"  alone (timed checks): {alone['holds']} holds, {alone['held_s']:.1f} s held "
        f"({100 * alone['held_s'] / span:.0f} % of the span), longest {alone['max_s']:.2f} s; "
        f"their waits {alone['wait_s']:.1f} s in all",
        f"  draining (a timed check waiting for shared holds to end, new ones queued): {summary['draining_s']:.1f} s "
        f"({100 * summary['draining_s'] / span:.0f} %)",
        f"  held by no one: {summary['unheld_s']:.1f} s ({100 * summary['unheld_s'] / span:.0f} %)",
        f"  presumed hung (no timing while they ran, the other checks went on): {summary['presumed_hung']['holds']} "
        f"checks, {summary['presumed_hung']['marked_s']:.1f} s, longest {summary['presumed_hung']['longest']:.1f} s",
        f"  warming up (timed checks wait for them a while only): {summary['warming']['holds']} checks, "
        f"{summary['warming']['marked_s']:.1f} s, longest {summary['warming']['longest']:.1f} s",
        f"  shared: {shared['holds']} holds, {shared['held_s']:.1f} s summed, their waits {shared['wait_s']:.1f} s summed",
    ]
    for group, g in summary["by_group"].items():
        lines.append(f"    {group}: {g['holds']:.0f} holds, {g['held_s']:.1f} s, longest {g['max_s']:.2f} s, "
                     f"waits {g['wait_s']:.1f} s")
    lines.append("  longest shared holds: " + "; ".join(f"{h['what']} ({h['held_s']:.2f} s)"
                                                        for h in summary["longest_shared"]))
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("log", type=Path, help="the GPU lock's log (PYTEST_GEMM_LOCK_LOG), one JSON hold a line")
    args = parser.parse_args(argv)
    print(render(summarize(read_log(args.log))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
