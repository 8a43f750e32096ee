"""Grade the course example exactly as its README gives it, with the gradebook's defaults, and
say whether it met issue 47's target (<= 60 s on one H200; issue 26's was 90 s).

    python tools/course_benchmark.py [--limit 60] [--out DIR] [-- extra pytest args]

Runs ``python -m pytest_gemm.grading.gradebook examples/course/submissions --attr kernel
--ini examples/course/pytest.ini --out g.csv --json g.json`` (in ``--out``, default a temp
dir), then prints each student's status, score and seconds and one MET/MISSED line. Exit
status 1 when the target is missed.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Sequence

REPO = Path(__file__).resolve().parent.parent
COURSE = REPO / "examples" / "course"


def command(out: Path, extra: Sequence[str] = ()) -> list[str]:
    """The README's command, writing g.csv and g.json into ``out``."""
    cmd = [sys.executable, "-m", "pytest_gemm.grading.gradebook", str(COURSE / "submissions"), "--attr", "kernel",
           "--ini", str(COURSE / "pytest.ini"), "--out", str(out / "g.csv"), "--json", str(out / "g.json")]
    return cmd + (["--", *extra] if extra else [])


def summary(book: dict[str, Any], took: float, limit: float) -> tuple[bool, list[str]]:
    """(met, lines): one line per student, then the target's."""
    lines = [f"  {s['student']}: {s['status']}, {s['score']:g} / {s['max_score']:g} in {s['elapsed_s']:.1f} s"
             for s in book["students"]]
    met = took <= limit
    lines.append(f"  {'MET ' if met else 'MISSED'}  course: {len(book['students'])} students in {took:.1f} s with the "
                 f"gradebook's defaults (--jobs {book.get('jobs')}); target <= {limit:g} s")
    return met, lines


def main(argv: Sequence[str] | None = None) -> int:
    from pytest_gemm.grading.gradebook import split_passthrough

    args_in, extra = split_passthrough(argv)
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--limit", type=float, default=60.0, help="the target in seconds (default 60)")
    p.add_argument("--out", default=None, help="folder for g.csv and g.json (default: a temp dir)")
    args = p.parse_args(args_in)
    out = Path(args.out or tempfile.mkdtemp(prefix="gemm-course-"))
    out.mkdir(parents=True, exist_ok=True)
    cmd = command(out, extra)
    print("$", " ".join(cmd), flush=True)
    started = time.monotonic()
    subprocess.run(cmd, check=True)
    took = time.monotonic() - started
    met, lines = summary(json.loads((out / "g.json").read_text()), took, args.limit)
    print("\nTARGET (issue 47)\n" + "\n".join(lines))
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
