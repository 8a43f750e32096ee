"""Grade a generated class on this machine's GPUs and check the targets of issue 47.

    python tools/class_benchmark.py --students 100 [--jobs N] --solo 3 --again 25 [--out DIR] [-- pytest args]

Generates ``--students`` submissions from ``examples/course`` in realistic proportions
(``MIX``: correct tiles, correct but slow naive kernels, a wrong edge, hangs, faults), grades
them with ``python -m pytest_gemm.grading.gradebook`` (the course's pytest.ini; its default
``--jobs`` unless one is given), prints the wall time and where each kind of student's seconds
went (the gradebook JSON's ``time``: checks, GPU-lock and quiet-GPU waits, kernel process
start-ups phase by phase; ``alone.*``: the speed check's hold of the GPU alone, step by step),
grades ``--solo`` of them again one at a time (one of each kind first) and ``--again`` of them a
second time with the class's options (every wrong one first: their out-of-bounds writes race),
and prints one line per target: the class in ``--class-limit`` (120) s (issue 47; issue 26's was 300 s), every faulting and every hanging student in ``--student-limit``
(60) s, the solo students' correctness scores identical and speed (fraction of cuBLAS) within
``--speed-tolerance`` (0.5 %), the second pass's correctness scores identical. Exit status 1
when a target is missed. Needs a GPU (without one every score is 0, and the comparisons
still run).

``--scheduler dask --compare-local`` grades the class through Dask (the gradebook's own
LocalCluster, ``docs/distributed.md``), then again on the local pool with the same ``--jobs``, and
adds issue 47's lines: identical grades, Dask's wall time within 15 % of the local pool's.
"""
from __future__ import annotations

import argparse
import json
import os
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


def grade(folder: Path, out: Path, jobs: int | None, extra: Sequence[str],
          timeout: float | None, lock_log: Path | None = None, scheduler: str = "local",
          cupy_cache: Path | None = None) -> tuple[dict[str, Any], float, Any]:
    """Run the gradebook (``jobs`` None: its default; ``lock_log``: the GPU lock's log of this
    pass, ``PYTEST_GEMM_LOCK_LOG``; ``scheduler``: its --scheduler; ``cupy_cache``: a CuPy kernel
    cache of this pass's own, so that a second pass of the same class compiles as the first
    did); (its students by name, wall seconds, the --jobs it used)."""
    cmd = [sys.executable, "-m", "pytest_gemm.grading.gradebook", str(folder), "--ini", str(COURSE / "pytest.ini"),
           "--out", str(out.with_suffix(".csv")), "--json", str(out)]
    if scheduler != "local":
        cmd += ["--scheduler", scheduler]
    if jobs is not None:
        cmd += ["--jobs", str(jobs)]
    if timeout is not None:
        cmd += ["--timeout", f"{timeout:g}"]
    cmd += ["--", *extra] if extra else []
    print("$", " ".join(cmd), flush=True)
    env = None
    if lock_log is not None:
        lock_log.unlink(missing_ok=True)
        env = dict(os.environ, PYTEST_GEMM_LOCK_LOG=str(lock_log))
    if cupy_cache is not None:
        env = dict(env or os.environ, CUPY_CACHE_DIR=str(cupy_cache))
    started = time.monotonic()
    subprocess.run(cmd, check=True, env=env)
    took = time.monotonic() - started
    book = json.loads(out.read_text())
    return {s["student"]: s for s in book["students"]}, took, book.get("jobs", jobs)


def correctness_score(row: dict[str, Any]) -> float:
    """The score without the speed check's points (which follow the measured fraction of cuBLAS)."""
    return round(float(row["score"]) - float((row.get("checks") or {}).get("speed", 0.0)), 4)


def compare(class_rows: dict[str, Any], solo_rows: dict[str, Any], tolerance: float = 0.02) -> list[dict[str, Any]]:
    """Per student graded both ways: the scores, the speed figures (the fraction of cuBLAS,
    stricter than the speed points, which stop growing at the course's threshold), and whether
    they agree."""
    out = []
    for student, solo in solo_rows.items():
        row = class_rows[student]
        a, b = row.get("fraction_of_cublas"), solo.get("fraction_of_cublas")
        speed_ratio = (a / b) if isinstance(a, (int, float)) and isinstance(b, (int, float)) and b else None
        pa, pb = (float((r.get("checks") or {}).get("speed") or 0.0) for r in (row, solo))
        out.append({"student": student, "class_score": row["score"], "solo_score": solo["score"],
                    "class_status": row["status"], "solo_status": solo["status"],
                    "same_correctness": correctness_score(row) == correctness_score(solo)
                    and row["status"] == solo["status"],
                    "speed_ratio": speed_ratio, "points_ratio": pa / pb if pa and pb else None,
                    "speed_within": speed_ratio is None or abs(speed_ratio - 1.0) <= tolerance})
    return out


def solo_pick(plan: list[tuple[str, str, str]], k: int) -> list[str]:
    """``k`` students: one of each kind first, then in class order."""
    picked: list[str] = []
    for kind in dict.fromkeys(kind for _, _, kind in plan):
        picked.append(next(s for s, _, kd in plan if kd == kind))
    picked += [s for s, _, _ in plan if s not in picked]
    return picked[:k]


def again_pick(plan: list[tuple[str, str, str]], k: int) -> list[str]:
    """``k`` students to grade a second time: every wrong one first (their out-of-bounds writes
    race, the case where a score could change between runs), then one of each other kind, then
    in class order."""
    wrong = [s for s, _, kind in plan if kind == "wrong"]
    return (wrong + [s for s in solo_pick(plan, len(plan)) if s not in wrong])[:k]


TIME_KEYS = ("wall_s", "check_s", "lock_wait_s", "quiet_wait_s", "start_s", "process_starts")


def _extra(row: dict[str, Any]) -> dict[str, Any]:
    """A student's ``extra_data.pytest_gemm`` (its Gradescope results' facts), or {}."""
    return ((row.get("results") or {}).get("extra_data") or {}).get("pytest_gemm") or {}


def time_by_kind(rows: dict[str, Any], plan: list[tuple[str, str, str]]) -> dict[str, dict[str, float]]:
    """Per kind of student: how many, their seconds (mean and max), and the means of where a
    student's run went (``extra_data.pytest_gemm.time``: the checks' wall time and own time, the
    GPU-lock and quiet-GPU waits, the kernel process start-ups and how many) and of each start-up
    phase; ``other_s`` is the rest of the student's seconds (pytest itself, collection, the
    compile checks); ``alone.STEP``: the means, over the students timed, of where their speed
    check's hold of the GPU alone went (``speed_alone_s``: roofs, quiet, uploads, timed, verify, cublas)."""
    kinds: dict[str, list[dict[str, Any]]] = {}
    for student, _, kind in plan:
        if student in rows:
            kinds.setdefault(kind, []).append(rows[student])
    out: dict[str, dict[str, float]] = {}
    for kind, members in kinds.items():
        times = [_extra(r).get("time") or {} for r in members]
        n = len(members)
        line = {"students": n, "elapsed_mean_s": sum(float(r["elapsed_s"]) for r in members) / n,
                "elapsed_max_s": max(float(r["elapsed_s"]) for r in members)}
        for key in TIME_KEYS:
            line[key] = sum(float(t.get(key) or 0.0) for t in times) / n
        line["other_s"] = line["elapsed_mean_s"] - line["wall_s"]
        for phase in sorted({p for t in times for p in (t.get("start") or {})}):
            line[f"start.{phase}"] = sum(float((t.get("start") or {}).get(phase) or 0.0) for t in times) / n
        holds = [a for a in (_extra(r).get("speed_alone_s") for r in members) if a]  # timed students only
        for step in sorted({s for a in holds for s in a}):
            line[f"alone.{step}"] = sum(float(a.get(step) or 0.0) for a in holds) / len(holds)
        out[kind] = line
    return out


def targets(took: float, jobs: Any, n: int, by_kind: dict[str, dict[str, float]], solo: list[dict[str, Any]],
            again: list[dict[str, Any]], tolerance: float, class_limit: float = 120.0,
            student_limit: float = 60.0) -> list[tuple[bool, str]]:
    """(met, one line) for each target the issue sets (issue 47)."""
    out = [(took <= class_limit, f"class: {n} students in {took:.1f} s with the gradebook's defaults (--jobs {jobs}); "
                                 f"target <= {class_limit:g} s")]
    for kind in ("faulting", "hanging"):
        line = by_kind.get(kind)
        if line:
            out.append((line["elapsed_max_s"] <= student_limit,
                        f"{kind}: every one of {line['students']} in <= {line['elapsed_max_s']:.1f} s "
                        f"(mean {line['elapsed_mean_s']:.1f} s); target <= {student_limit:g} s"))
    if solo:
        same = sum(x["same_correctness"] for x in solo)
        within = sum(x["speed_within"] for x in solo)
        worst = max((abs(x["speed_ratio"] - 1.0) for x in solo if x["speed_ratio"] is not None), default=0.0)
        out.append((same == len(solo) and within == len(solo),
                    f"alone: {len(solo)} students graded again one at a time: correctness identical for {same}, "
                    f"speed within {100 * tolerance:g} % for {within} (worst {100 * worst:.2f} %)"))
    if again:
        same = sum(x["same_correctness"] for x in again)
        out.append((same == len(again), f"twice: {len(again)} students graded a second time (every wrong one "
                                        f"first): correctness identical for {same} of {len(again)}"))
    return out


def scheduler_targets(rows: dict[str, Any], took: float, local_rows: dict[str, Any], local_took: float,
                      tolerance: float, wall_limit: float = 1.15) -> list[tuple[bool, str]]:
    """(met, one line) for the class graded through Dask against the same class on the local pool
    (issue 47): identical grades (every correctness score and status; the speed points follow
    the measured speed, compared within ``tolerance``) and a wall time within ``wall_limit`` of
    the local pool's."""
    lines = compare(rows, local_rows, tolerance)
    same = sum(x["same_correctness"] for x in lines)
    scores = sum(x["class_score"] == x["solo_score"] for x in lines)
    within = sum(x["speed_within"] for x in lines)
    worst = max((abs(x["speed_ratio"] - 1.0) for x in lines if x["speed_ratio"] is not None), default=0.0)
    ratio = took / local_took if local_took else float("inf")
    return [(same == len(lines) == len(rows), f"dask grades: {len(lines)} students graded through Dask and on the "
                                              f"local pool: correctness identical for {same}, whole score "
                                              f"identical for {scores}"),
            (within == len(lines), f"dask speed: within {100 * tolerance:g} % of the local pool's for {within} of "
                                   f"{len(lines)} (worst {100 * worst:.2f} %)"),
            (ratio <= wall_limit, f"dask wall: {took:.1f} s through Dask, {local_took:.1f} s on the local pool "
                                  f"(x {ratio:.3f}); target <= x {wall_limit:g}")]


def main(argv: Sequence[str] | None = None) -> int:
    from pytest_gemm.grading.gradebook import split_passthrough

    args_in, extra = split_passthrough(argv)
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--students", type=int, default=100)
    p.add_argument("--jobs", type=int, default=None, help="students at once in the class run (default: the "
                   "gradebook's own default, what fits the machine)")
    p.add_argument("--solo", type=int, default=3, help="students graded again one at a time (default 3)")
    p.add_argument("--again", type=int, default=25, help="students graded a second time with the class's "
                   "options, every wrong one first (default 25; 0: none; the whole class: --again 100)")
    p.add_argument("--speed-tolerance", type=float, default=0.005)
    p.add_argument("--class-limit", type=float, default=120.0, help="the class's target in seconds (default 120)")
    p.add_argument("--student-limit", type=float, default=60.0,
                   help="each faulting and hanging student's target in seconds (default 60)")
    p.add_argument("--timeout", type=float, default=None, help="per-student limit (the gradebook's default)")
    p.add_argument("--deadline", type=float, default=None, help="seconds from the start after which no further "
                   "pass begins: the solo and second passes are skipped, saying so, when their estimate does not fit")
    p.add_argument("--out", default=None, help="folder for the class and the gradebooks (default: a temp dir)")
    p.add_argument("--scheduler", choices=("local", "dask"), default="local", help="the class pass's gradebook "
                   "--scheduler (default local; dask: a LocalCluster on this machine, pip install 'pytest-gemm[dask]')")
    p.add_argument("--compare-local", action="store_true", help="with --scheduler dask: grade the same class "
                   "again on the local pool, with the same --jobs, and compare grades and wall times (issue 47: "
                   "identical grades, Dask within 15 %% of the local pool's wall time)")
    p.add_argument("--lock-log", action="store_true", help="log the GPU lock's holds of the class pass "
                   "(OUT/class-lock.jsonl) and print where its GPU time went (tools/lock_log.py)")
    args = p.parse_args(args_in)
    began = time.monotonic()
    root = Path(args.out or tempfile.mkdtemp(prefix="gemm-class-"))
    plan = make_class(root / "class", args.students)
    print(f"class of {len(plan)} in {root / 'class'}: "
          + ", ".join(f"{n} {kind}" for kind, n in _counts(plan).items()), flush=True)
    lock_path = root / "class-lock.jsonl" if args.lock_log else None
    fresh = args.compare_local and args.scheduler != "local"  # each pass compiles every kernel afresh
    rows, took, jobs = grade(root / "class", root / "class.json", args.jobs, extra, args.timeout, lock_path,
                             args.scheduler, root / "cupy-cache-class" if fresh else None)
    print(f"\nCLASS: {len(rows)} students graded in {took:.1f} s with --jobs {jobs} "
          f"({took / max(1, len(rows)):.1f} s per student)" + (f" through {args.scheduler}"
                                                                if args.scheduler != "local" else ""), flush=True)
    compared: list[tuple[bool, str]] = []
    left = None if args.deadline is None else args.deadline - (time.monotonic() - began)
    if args.compare_local and args.scheduler != "local" and left is not None and took > left:
        compared = [(False, f"dask: the local pass skipped: about {took:.0f} s would not fit in the {left:.0f} s "
                            "left before --deadline (a smaller --students)")]
        print(f"\nLOCAL: {compared[0][1]}", flush=True)
    elif args.compare_local and args.scheduler != "local":
        local_rows, local_took, _ = grade(root / "class", root / "local.json", jobs, extra, args.timeout,
                                          cupy_cache=root / "cupy-cache-local")
        print(f"\nLOCAL: the same {len(local_rows)} students on the local pool in {local_took:.1f} s with --jobs {jobs}")
        compared = scheduler_targets(rows, took, local_rows, local_took, args.speed_tolerance)
        for ok, line in compared:
            print(f"  {'MET ' if ok else 'MISSED'}  {line}", flush=True)
    by_kind = time_by_kind(rows, plan)
    print("\nWHERE THE SECONDS WENT (means per student of each kind; start.*: the kernel process start-ups)")
    for kind, line in by_kind.items():
        print(f"  {kind}: " + ", ".join(f"{k} {v:.2f}" if isinstance(v, float) else f"{k} {v}"
                                         for k, v in line.items()), flush=True)
    if lock_path is not None and lock_path.exists():
        print()
        print(lock_summary(lock_path), flush=True)
    for ok, line in targets(took, jobs, len(rows), by_kind, [], [], args.speed_tolerance, args.class_limit,
                            args.student_limit):
        print(f"  {'MET ' if ok else 'MISSED'}  {line}", flush=True)  # now, in case a later pass is cut off

    def fits(what: str, estimate: float) -> bool:
        left = None if args.deadline is None else args.deadline - (time.monotonic() - began)
        if left is None or estimate <= left:
            return True
        print(f"\n{what}: skipped, about {estimate:.0f} s would not fit in the {left:.0f} s left before --deadline")
        return False

    per_student = took * max(1, jobs or 1) / max(1, len(rows))  # one student's seconds, as graded in the class
    solo: list[dict[str, Any]] = []
    if args.solo > 0 and fits("SOLO", per_student * args.solo):
        solo_dir = root / "solo"
        for student in solo_pick(plan, args.solo):
            shutil.copytree(root / "class" / student, solo_dir / student)
        solo_rows, solo_took, _ = grade(solo_dir, root / "solo.json", 1, extra, args.timeout)
        print(f"\nSOLO: {len(solo_rows)} students one at a time in {solo_took:.1f} s")
        solo = compare(rows, solo_rows, args.speed_tolerance)
        for line in solo:
            ratio = "" if line["speed_ratio"] is None else f", speed class/solo {line['speed_ratio']:.4f}"
            print(f"  {line['student']}: class {line['class_score']:g} ({line['class_status']}), solo "
                  f"{line['solo_score']:g} ({line['solo_status']}){ratio}"
                  + ("" if line["same_correctness"] else "  CORRECTNESS DIFFERS")
                  + ("" if line["speed_within"] else "  SPEED OUT OF TOLERANCE"))
    again: list[dict[str, Any]] = []
    if args.again > 0 and fits("AGAIN", took * min(args.again, len(rows)) / max(1, len(rows)) + per_student):
        again_dir = root / "again"
        for student in again_pick(plan, args.again):
            shutil.copytree(root / "class" / student, again_dir / student)
        again_rows, again_took, again_jobs = grade(again_dir, root / "again.json", args.jobs, extra, args.timeout)
        print(f"\nAGAIN: {len(again_rows)} students graded a second time in {again_took:.1f} s (--jobs {again_jobs})")
        again = compare(rows, again_rows, 1.0)  # correctness only: speed is the solo run's comparison
        for line in again:
            if not line["same_correctness"]:
                print(f"  {line['student']}: first {line['class_score']:g} ({line['class_status']}), second "
                      f"{line['solo_score']:g} ({line['solo_status']})  CORRECTNESS DIFFERS")
    met = targets(took, jobs, len(rows), by_kind, solo, again, args.speed_tolerance, args.class_limit,
                  args.student_limit) + compared
    print("\nTARGETS (issue 47" + (", with its Dask lines" if compared else "") + ")")
    for ok, line in met:
        print(f"  {'MET ' if ok else 'MISSED'}  {line}")
    print(f"\nRESULT: {sum(ok for ok, _ in met)} of {len(met)} targets met; files in {root}")
    return 0 if all(ok for ok, _ in met) else 1


def lock_summary(path: Path) -> str:
    sys.path.insert(0, str(REPO / "tools"))
    from lock_log import read_log, render, summarize

    return render(summarize(read_log(path)))


def _counts(plan: list[tuple[str, str, str]]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for _, _, kind in plan:
        counts[kind] = counts.get(kind, 0) + 1
    return counts


if __name__ == "__main__":
    sys.exit(main())
