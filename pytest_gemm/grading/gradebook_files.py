"""The gradebook's files: the CSV (one row per student), the JSON (with each student's full
Gradescope results) and the terminal summary."""
from __future__ import annotations

import csv
import json
from dataclasses import asdict
from pathlib import Path
from typing import Any, Sequence

from .config import CHECKS, GradingConfig
from .students import StudentResult
from tabulate import tabulate


def check_columns(results: Sequence[StudentResult], config: GradingConfig | None = None) -> list[str]:
    seen = {name for r in results for name in r.checks}
    if not seen:
        config = config or GradingConfig()
        seen = {c for c in CHECKS if config.weight(c) > 0}
    return [c for c in CHECKS if c in seen] + sorted(seen - set(CHECKS))


def _num(value: float | None, digits: int = 4) -> str:
    return "" if value is None else f"{round(float(value), digits):g}"


def write_csv(path: Path, results: Sequence[StudentResult], columns: Sequence[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["student", "score", "max_score", *columns, "tflops", "fraction_of_cublas", "status",
                         "reason"])
        for r in results:
            writer.writerow([r.student, _num(r.score), _num(r.max_score),
                             *[_num(r.checks.get(c)) for c in columns],
                             _num(r.tflops, 3), _num(r.fraction_of_cublas), r.status, r.reason])


def write_json(path: Path, results: Sequence[StudentResult], meta: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    body = dict(meta, schema_version=1, students=[asdict(r) for r in results])
    path.write_text(json.dumps(body, indent=2, default=str))


def confinements(results: Sequence[StudentResult]) -> dict[str, int]:
    """What the students' submitted code ran under (kernels/confine.py), with how many students
    each: from their Gradescope results (none for a student whose run wrote none)."""
    found: dict[str, int] = {}
    for r in results:
        level = ((r.results or {}).get("extra_data") or {}).get("pytest_gemm", {}).get("confinement")
        if level:
            found[str(level)] = found.get(str(level), 0) + 1
    return found


def clip(text: str, limit: int = 160) -> str:
    """``text`` cut to at most ``limit`` characters at a word boundary, with an ellipsis."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text.rfind(" ", 0, limit - 1)
    return text[:cut if cut > limit // 2 else limit - 1].rstrip(" ,;:(") + "…"


def summary_table(results: Sequence[StudentResult]) -> str:
    rows = [[r.student, r.status, f"{r.score:g} / {r.max_score:g}", _num(r.tflops, 2),
             _num(r.fraction_of_cublas, 3), clip(r.reason, 90)]
            for r in results]
    return tabulate(rows, headers=["student", "status", "score", "TFLOP/s", "x cuBLAS", "notes"],
                    tablefmt="simple")
