#!/usr/bin/env python3
"""Regenerate the measured figures of README.md and docs/ from the JSON outputs of one GPU run.

Each generated figure in README.md and docs/*.md sits in a block

    <!-- figures:NAME -->
    Measured at commit `1a2b3c4` (2026-12-01, NVIDIA H200): `the command`.
    ...the figures...
    <!-- /figures:NAME -->

whose first line names the commit, date and device it was measured at. ``tools/gpu_session.sh``
writes ``meta.json`` (commit, date, device) into its output folder ($OUT) before any stage, and
each stage its JSON; this script rewrites every block whose source is in that folder and leaves
the others as they are (their own first line still says when they were measured):

    python3 tools/readme_figures.py gpu-out/           # rewrite README.md and docs/*.md in place
    python3 tools/readme_figures.py gpu-out/ --check   # exit 1 if one of them would change

Blocks and their sources: ``gpu-tests`` (gpu-tests-summary.txt), ``ladder`` (ladder.json, a
``--gemm-report``), ``class`` (class.json from tools/class_benchmark.py), ``course``
(course.json, the gradebook's ``--json`` of examples/course), ``ecosystems`` (eco_*.json, or the
examples' suite runs inside gpu-suite-runs.tgz).
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parent.parent
BLOCK = re.compile(r"(<!-- figures:(?P<name>[\w-]+) -->\n)(?P<body>.*?)(<!-- /figures:(?P=name) -->)", re.S)
PROVENANCE = re.compile(r"^Measured (at|before) commit `[0-9a-f]{7,40}(\+changes)?` \(\d{4}-\d{2}-\d{2}")


def provenance(meta: dict[str, Any], command: str) -> str:
    return f"Measured at commit `{meta['commit']}` ({meta['date']}, {meta['device']}): `{command}`."


def _gpu_tests(folder: Path, meta: dict[str, Any]) -> str | None:
    path = folder / "gpu-tests-summary.txt"
    if not path.is_file():
        return None
    text = path.read_text()
    if "not the whole suite" in text:  # GPU_TESTS chose some files: never published as the suite's line
        return None
    line = text.strip().splitlines()[-1]
    return provenance(meta, "bash tools/gpu_session.sh gpu-tests") + "\n\n```text\n" + line + "\n```\n"


def _ladder(folder: Path, meta: dict[str, Any]) -> str | None:
    path = folder / "ladder.json"
    if not path.is_file():
        return None
    sys.path.insert(0, str(ROOT / "tools"))
    sys.path.insert(0, str(ROOT))
    from ladder_table import DEFAULT_SHAPE, ladder_rows, markdown_table

    report = json.loads(path.read_text())
    run = ""
    log = folder / "ladder.txt"
    if log.is_file():  # pytest's last line: every check of every rung, baseline and broken kernel
        summary = [line.strip("= ") for line in log.read_text().splitlines() if re.search(r"\d+ passed", line)]
        run = f"The run: {summary[-1]}.\n\n" if summary else ""
    return provenance(meta, meta.get("ladder_command", "bash tools/gpu_session.sh ladder")) + "\n\n" + run \
        + markdown_table(ladder_rows(report, DEFAULT_SHAPE), DEFAULT_SHAPE) + "\n"


def _students(book: dict[str, Any]) -> list[dict[str, Any]]:
    return list(book.get("students") or [])


def _course(folder: Path, meta: dict[str, Any]) -> str | None:
    path = folder / "course.json"
    if not path.is_file():
        return None
    book = json.loads(path.read_text())
    lines = [provenance(meta, meta.get("course_command", "python -m pytest_gemm.grading.gradebook "
                                       "examples/course/submissions --attr kernel --ini examples/course/pytest.ini "
                                       "--out g.csv --json g.json")), ""]
    if book.get("wall_s") is not None:
        lines.append(f"{len(_students(book))} students graded in {float(book['wall_s']):.1f} s with the default options:")
        lines.append("")
    lines += ["| student | status | score | seconds | reason |", "| --- | --- | --- | --- | --- |"]
    for s in _students(book):
        reason = str(s.get("reason") or "").replace("|", "/").splitlines()[0][:120] if s.get("reason") else ""
        lines.append(f"| {s.get('student')} | {s.get('status')} | {s.get('score')} | "
                     f"{float(s.get('elapsed_s') or 0):.1f} | {reason} |")
    return "\n".join(lines) + "\n"


def _class(folder: Path, meta: dict[str, Any]) -> str | None:
    path = folder / "class.json"
    if not path.is_file():
        return None
    book = json.loads(path.read_text())
    students = _students(book)
    log = (folder / "class.txt").read_text().splitlines() if (folder / "class.txt").is_file() else []
    lines = [provenance(meta, meta.get("class_command") or class_command(log, len(students) or 100)), ""]
    # tools/class_benchmark.py's own lines: the wall time, the targets, where the GPU's time went
    said = [line.strip() for line in log if line.startswith("CLASS:")]
    targets = _last_targets(log)
    lock = [line.rstrip() for line in log if line.startswith("GPU LOCK") or line.startswith("  alone")
            or line.startswith("  draining") or line.startswith("  presumed")]
    lines += said + [""] if said else []
    lines += [f"- {line}" for line in targets] + [""] if targets else []
    kinds: dict[str, list[dict[str, Any]]] = {}
    for s in students:
        kind = str(s.get("kind") or re.sub(r"^s\d+-", "", str(s.get("student"))) or "student")
        kinds.setdefault(kind, []).append(s)
    if kinds:
        lines += ["| kind | students | seconds each | score | x cuBLAS (its speed check) |", "| --- | --- | --- | --- | --- |"]
        for kind, rows in sorted(kinds.items()):
            secs = [float(r.get("elapsed_s") or 0.0) for r in rows]
            scores = [float(r.get("score") or 0.0) for r in rows]
            speeds = [float(r["fraction_of_cublas"]) for r in rows if isinstance(r.get("fraction_of_cublas"), (int, float))]
            speed = f"{min(speeds):.4f} to {max(speeds):.4f}" if speeds else "not timed"
            lines.append(f"| {kind} | {len(rows)} | {min(secs):.1f} to {max(secs):.1f} | "
                         f"{min(scores):g} to {max(scores):g} | {speed} |")
    if lock:
        lines += ["", "```text", *lock, "```"]
    return "\n".join(lines) + "\n"


def class_command(log: list[str], students: int) -> str:
    """The benchmark's command line as its log shows it was run: the class's size (its first line,
    ``class of N``; else ``students``), the students graded again alone (``SOLO:``) and a second
    time (``AGAIN:``), and ``--lock-log`` where the lock's holds were read. A finished run
    (``RESULT:``) with no such line was asked for none; a pass skipped or cut short says nothing."""
    sizes = [m[1] for line in log if (m := re.match(r"class of (\d+) in ", line))]
    command = f"python tools/class_benchmark.py --students {sizes[0] if sizes else students}"
    finished = any(line.startswith("RESULT:") for line in log)
    for label, option in (("SOLO", "--solo"), ("AGAIN", "--again")):
        counts = [m[1] for line in log if (m := re.match(rf"{label}: (\d+) students", line))]
        skipped = any(line.startswith(f"{label}: skipped") for line in log)
        if counts or (finished and not skipped):
            command += f" {option} {counts[-1] if counts else 0}"
    return command + (" --lock-log" if any(line.startswith("GPU LOCK") for line in log) else "")


def _last_targets(log: list[str]) -> list[str]:
    """The MET/MISSED lines of the benchmark's last TARGETS list (or of its first, when cut)."""
    out: list[str] = []
    for line in log:
        if line.startswith("TARGETS"):
            out = []
        elif re.match(r"^  (MET|MISSED)\b", line):
            out.append(re.sub(r"^  (MET|MISSED)\s+", lambda m: f"**{m.group(1)}** ", line))
    return list(dict.fromkeys(out))  # the class's own lines repeat in the final list


def _ecosystem_reports(folder: Path) -> list[dict[str, Any]]:
    """The examples' reports: the ecosystems stage's eco_*.json, or the gpu-tests stage's suite
    runs (gpu-suite-runs.tgz, eco-*/report.json)."""
    import tarfile

    found = [json.loads(p.read_text()) for p in sorted(folder.glob("eco_*.json"))]
    archive = folder / "gpu-suite-runs.tgz"
    if not found and archive.is_file():
        with tarfile.open(archive) as tar:
            for member in sorted(tar.getmembers(), key=lambda m: m.name):
                if re.search(r"/eco-[\w-]+/report\.json$", member.name):
                    found.append(json.loads(tar.extractfile(member).read()))  # type: ignore[union-attr]
    return found


def _ecosystems(folder: Path, meta: dict[str, Any]) -> str | None:
    reports = _ecosystem_reports(folder)
    if not reports:
        return None
    sys.path.insert(0, str(ROOT / "tools"))
    from ecosystems import table

    command = "bash tools/gpu_session.sh gpu-tests" if (folder / "gpu-suite-runs.tgz").is_file() \
        else "bash tools/gpu_session.sh ecosystems"
    return provenance(meta, command) + "\n\n" + table(reports) + "\n"


SOURCES: dict[str, Callable[[Path, dict[str, Any]], str | None]] = {
    "gpu-tests": _gpu_tests, "ladder": _ladder, "course": _course, "class": _class, "ecosystems": _ecosystems,
}


def regenerate(text: str, folder: Path) -> tuple[str, list[str]]:
    """(the README with every block whose source is in ``folder`` rewritten, their names)."""
    meta = json.loads((folder / "meta.json").read_text())
    done: list[str] = []

    def replace(match: re.Match[str]) -> str:
        source = SOURCES.get(match["name"])
        body = source(folder, meta) if source else None
        if body is None:
            return match.group(0)
        done.append(match["name"])
        return match.group(1) + body + match.group(4)

    return BLOCK.sub(replace, text), done


def unproven_blocks(text: str) -> list[str]:
    """Blocks whose first line does not name the commit and date they were measured at."""
    return [m["name"] for m in BLOCK.finditer(text) if not PROVENANCE.match(m["body"])]


def documents() -> list[Path]:
    """The files whose figure blocks this script keeps: README.md and every page of docs/."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path, help="a GPU run's output folder (with meta.json)")
    parser.add_argument("--readme", type=Path, action="append",
                        help="a file to rewrite (repeatable; default: README.md and docs/*.md)")
    parser.add_argument("--check", action="store_true", help="exit 1 if a file would change")
    args = parser.parse_args(argv)
    if not (args.folder / "meta.json").is_file():
        parser.error(f"{args.folder} has no meta.json: pass the output folder of tools/gpu_session.sh")
    changed = []
    for path in args.readme or documents():
        text = path.read_text()
        new, done = regenerate(text, args.folder)
        if done:
            print(f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}: regenerated {', '.join(done)}")
        if new != text:
            changed.append(path)
            if not args.check:
                path.write_text(new)
    if not changed:
        print("nothing changed (no source found, or every block already current)")
    return 1 if args.check and changed else 0

if __name__ == "__main__":
    sys.exit(main())
