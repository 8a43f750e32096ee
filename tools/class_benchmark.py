"""Grade a generated class on this machine's GPUs and check it against grading one at a time.

    python tools/class_benchmark.py --students 100 --jobs 12 --solo 3 [--out DIR] [-- extra pytest args]

Generates ``--students`` submissions from ``examples/course`` in realistic proportions
(``MIX``: correct tiles, correct but slow naive kernels, a wrong edge, hangs, faults), grades
them with ``python -m pytest_gemm.grading.gradebook --jobs N`` (the course's pytest.ini),
prints the wall time, then grades ``--solo`` of them again one at a time (one of each kind
first) and compares: every correctness score must be identical, and each speed figure
(fraction of cuBLAS) within ``--speed-tolerance`` (2 %) of the solo run's. Exit status 1
when a correctness score differs, 2 when a speed figure is out of tolerance. Needs a GPU
(without one every score is 0, and the comparison still runs).
"""
from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Sequence

REPO = Path(__file__).resolve().parent.parent
COURSE = REPO / "examples" / "course"

# (template, kind, share of the class): students in a real class are mostly right, some slow,
# some wrong on ragged edges, a few hang or fault.
MIX: tuple[tuple[str, str, float], ...] = (
    ("alice", "correct", 0.55),
    ("starter", "slow", 0.15),
    ("bob", "wrong", 0.15),
    ("carol", "hanging", 0.05),
    ("dave", "faulting", 0.05),
    ("erin", "faulting", 0.05),
)


def class_plan(n: int) -> list[tuple[str, str, str]]:
    """(student, template, kind) for ``n`` students: the MIX's shares, largest remainders
    first, interleaved so that every kind appears early (a prefix is a small class of its own)."""
    shares = [n * share for _, _, share in MIX]
    counts = [int(s) for s in shares]
    for i in sorted(range(len(MIX)), key=lambda i: shares[i] - counts[i], reverse=True)[:n - sum(counts)]:
        counts[i] += 1
    order: list[int] = []
    left = list(counts)
    while any(left):
        for i in range(len(MIX)):
            if left[i]:
                order.append(i)
                left[i] -= 1
    return [(f"s{j:03d}-{MIX[i][1]}", MIX[i][0], MIX[i][1]) for j, i in enumerate(order)]


def _template_dir(template: str) -> Path:
    return COURSE / ("starter" if template == "starter" else f"submissions/{template}")


def make_class(root: Path, n: int) -> list[tuple[str, str, str]]:
    """Write the class under ``root`` (one folder per student: kernel.py + matmul.cu), each
    kernel named after its student and each source ending in its student's name, so that no two
    are the same kernel and no compile is served from another student's cache."""
    plan = class_plan(n)
    root.mkdir(parents=True, exist_ok=True)
    for student, template, _ in plan:
        folder = root / student
        shutil.copytree(_template_dir(template), folder, ignore=shutil.ignore_patterns("__pycache__"))
        kernel_py = folder / "kernel.py"
        text, count = re.subn(r'name="([^"]*)"', lambda m: f'name="{student} ({m.group(1)})"', kernel_py.read_text())
        assert count == 1, f"{kernel_py}: expected one name=... to rename"
        kernel_py.write_text(text)
        for source in folder.glob("*.cu"):  # every student's source differs, as in a real class: no compile cache hit
            source.write_text(source.read_text() + f"\n// {student}'s submission\n")
    return plan


def grade(folder: Path, out: Path, jobs: int, extra: Sequence[str], timeout: float | None) -> tuple[dict[str, Any], float]:
    """Run the gradebook; (its students by name, wall seconds)."""
    cmd = [sys.executable, "-m", "pytest_gemm.grading.gradebook", str(folder), "--ini", str(COURSE / "pytest.ini"),
           "--out", str(out.with_suffix(".csv")), "--json", str(out), "--jobs", str(jobs)]
    if timeout is not None:
        cmd += ["--timeout", f"{timeout:g}"]
    cmd += ["--", *extra] if extra else []
    print("$", " ".join(cmd), flush=True)
    started = time.monotonic()
    subprocess.run(cmd, check=True)
    took = time.monotonic() - started
    return {s["student"]: s for s in json.loads(out.read_text())["students"]}, took


def correctness_score(row: dict[str, Any]) -> float:
    """The score without the speed check's points (which follow the measured fraction of cuBLAS)."""
    return round(float(row["score"]) - float((row.get("checks") or {}).get("speed", 0.0)), 4)


def compare(class_rows: dict[str, Any], solo_rows: dict[str, Any], tolerance: float = 0.02) -> list[dict[str, Any]]:
    """Per student graded both ways: the scores, the speed figures, and whether they agree."""
    out = []
    for student, solo in solo_rows.items():
        row = class_rows[student]
        a, b = row.get("fraction_of_cublas"), solo.get("fraction_of_cublas")
        speed_ratio = (a / b) if isinstance(a, (int, float)) and isinstance(b, (int, float)) and b else None
        out.append({"student": student, "class_score": row["score"], "solo_score": solo["score"],
                    "class_status": row["status"], "solo_status": solo["status"],
                    "same_correctness": correctness_score(row) == correctness_score(solo)
                    and row["status"] == solo["status"],
                    "speed_ratio": speed_ratio,
                    "speed_within": speed_ratio is None or abs(speed_ratio - 1.0) <= tolerance})
    return out


def solo_pick(plan: list[tuple[str, str, str]], k: int) -> list[str]:
    """``k`` students: one of each kind first, then in class order."""
    picked: list[str] = []
    for kind in dict.fromkeys(kind for _, _, kind in plan):
        picked.append(next(s for s, _, kd in plan if kd == kind))
    picked += [s for s, _, _ in plan if s not in picked]
    return picked[:k]


def main(argv: Sequence[str] | None = None) -> int:
    from pytest_gemm.grading.gradebook import split_passthrough

    args_in, extra = split_passthrough(argv)
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--students", type=int, default=100)
    p.add_argument("--jobs", type=int, default=8, help="students at once in the class run (default 8)")
    p.add_argument("--solo", type=int, default=5, help="students graded again one at a time (default 5)")
    p.add_argument("--speed-tolerance", type=float, default=0.02)
    p.add_argument("--timeout", type=float, default=None, help="per-student limit (the gradebook's default)")
    p.add_argument("--out", default=None, help="folder for the class and the gradebooks (default: a temp dir)")
    args = p.parse_args(args_in)
    root = Path(args.out or tempfile.mkdtemp(prefix="gemm-class-"))
    plan = make_class(root / "class", args.students)
    print(f"class of {len(plan)} in {root / 'class'}: "
          + ", ".join(f"{n} {kind}" for kind, n in _counts(plan).items()), flush=True)
    rows, took = grade(root / "class", root / "class.json", args.jobs, extra, args.timeout)
    print(f"\nCLASS: {len(rows)} students graded in {took:.1f} s with --jobs {args.jobs} "
          f"({took / max(1, len(rows)):.1f} s per student)", flush=True)
    hanging = [r for s, r in rows.items() if "hanging" in s]
    if hanging:
        print("hanging students took " + ", ".join(f"{r['elapsed_s']:.1f} s ({r['status']}, {r['score']:g})"
                                                     for r in hanging))
    if args.solo <= 0:
        return 0
    solo_dir = root / "solo"
    for student in solo_pick(plan, args.solo):
        shutil.copytree(root / "class" / student, solo_dir / student)
    solo_rows, solo_took = grade(solo_dir, root / "solo.json", 1, extra, args.timeout)
    print(f"\nSOLO: {len(solo_rows)} students one at a time in {solo_took:.1f} s")
    table = compare(rows, solo_rows, args.speed_tolerance)
    for line in table:
        ratio = "" if line["speed_ratio"] is None else f", speed class/solo {line['speed_ratio']:.4f}"
        print(f"  {line['student']}: class {line['class_score']:g} ({line['class_status']}), solo "
              f"{line['solo_score']:g} ({line['solo_status']}){ratio}"
              + ("" if line["same_correctness"] else "  CORRECTNESS DIFFERS")
              + ("" if line["speed_within"] else "  SPEED OUT OF TOLERANCE"))
    same = sum(line["same_correctness"] for line in table)
    within = sum(line["speed_within"] for line in table)
    print(f"\nRESULT: {len(rows)} students in {took:.1f} s (--jobs {args.jobs}); correctness scores identical for "
          f"{same} of {len(table)} graded solo; speed within {100 * args.speed_tolerance:g} % for {within} of "
          f"{len(table)}; files in {root}")
    return 0 if same == len(table) and within == len(table) else (1 if same != len(table) else 2)


def _counts(plan: list[tuple[str, str, str]]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for _, _, kind in plan:
        counts[kind] = counts.get(kind, 0) + 1
    return counts


if __name__ == "__main__":
    sys.exit(main())
