"""Grade a folder of submissions, one pytest process per student, into one gradebook.

    python -m pytest_gemm.grading.gradebook SUBMISSIONS_DIR --attr kernel --out gradebook.csv \\
        --json gradebook.json [--timeout S] [--jobs N] [--ini pytest.ini] [--allow-no-gpu] \\
        [--scheduler dask [--address ADDR]] [-- extra pytest args]

Each student is a subfolder holding ``kernel.py`` (``--file``) or a single
``NAME.py`` file. Each runs as its own ``python -m pytest --gemm-kernel
<file>:<attr> --gemm-gradescope <tmp>/results.json ...`` in a fresh working
directory and its own process group, under an overall wall-clock limit: on
overrun pytest is interrupted (it writes the results of the checks that ran),
then its whole process tree (pytest and the kernel sandboxes it started) is
stopped and killed, and the student is recorded as "timed out". A submission
that crashes pytest, hangs or faults costs only its own row. ``--jobs N`` grades
N students at once, spread over the GPUs (``classrun.py``). On a machine with no usable GPU it
refuses to grade (exit status 2, one line why) unless ``--allow-no-gpu`` asks for the zeros.
Beside a class graded confined in more than one round (``PYTEST_GEMM_HARNESS_SEED``: auto, the
default; on; off), trusted priming runs compile the harness's own CuPy kernels, and each
student's kernel cache starts with what they have compiled by then (``harness_seed.py``; one
line before the class says whether they run, one after it what they compiled).

The pieces: ``submissions.py`` (finding them, the pytest command), ``processes.py``
(the wall-clock limit), ``students.py`` (one student's row), ``classrun.py`` (the
class, jobs and GPUs), ``dask_scheduler.py`` (the class on Dask distributed, ``--scheduler dask``),
``gradebook_files.py`` (CSV, JSON, summary), ``harness_seed.py`` (the CuPy kernels of the harness
compiled once for a confined class); this module is the command line.

A course runs this module (``python -m pytest_gemm.grading.gradebook``, docs/courses.md) and
imports none of its names; it defines only the command line (``__all__``). The rest live in the
modules above: import each name from the one that defines it.
"""
from __future__ import annotations

import argparse
import configparser
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Sequence

from .classrun import StudentGrading, cpu_cores, default_jobs, grade_all, measurement_env
from .gradebook_files import check_columns, clip, confinements, summary_table, write_csv, write_json
from .config import GradingConfig
from .students import DEFAULT_TIMEOUT, StudentResult, load_grading_config
from .submissions import find_submissions
from .dask_scheduler import DaskProblem, grade_class
from .harness_seed import harness_seed
from ..kernels.gpus import visible_gpu_ids

__all__ = ["main", "make_parser", "no_gpu_problem", "split_passthrough"]


# ---- the command line ------------------------------------------------------------------

def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds; e.g. 600") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a number of seconds > 0, e.g. 600")
    return value


def _jobs(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number; e.g. 1 (one student at a time)") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: expected 1 or more students at a time")
    return value


def make_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m pytest_gemm.grading.gradebook",
        description="Grade every submission in SUBMISSIONS_DIR with the pytest-gemm conformance suite, each in "
                    "its own pytest process with a wall-clock limit, into one CSV/JSON gradebook. Arguments "
                    "after -- are passed to every pytest run. Each run loads pytest-gemm's plugin and no "
                    "other installed one (PYTEST_DISABLE_PLUGIN_AUTOLOAD=1): name one after -- (-p NAME), "
                    "or set PYTEST_DISABLE_PLUGIN_AUTOLOAD= (empty) to have pytest load them all.",
        epilog="example: python -m pytest_gemm.grading.gradebook submissions --attr kernel --ini pytest.ini "
               "--out gradebook.csv --json gradebook.json --timeout 600 -- -x")
    p.add_argument("submissions", metavar="SUBMISSIONS_DIR",
                   help="folder with one subfolder (holding --file) or one .py file per student")
    p.add_argument("--attr", default="kernel", help="the kernel attribute in each submission (default: kernel)")
    p.add_argument("--file", default="kernel.py", metavar="NAME",
                   help="the kernel module inside each student's subfolder (default: kernel.py)")
    p.add_argument("--out", default="gradebook.csv", metavar="CSV", help="the CSV gradebook (default: gradebook.csv)")
    p.add_argument("--json", default=None, metavar="PATH", help="also write the JSON gradebook, with each "
                   "student's full Gradescope results")
    p.add_argument("--timeout", type=_positive, default=DEFAULT_TIMEOUT, metavar="S",
                   help=f"wall-clock seconds for one student's whole run (default {DEFAULT_TIMEOUT:g}); "
                        "over it the run is killed and the student scores 0 as 'timed out'")
    p.add_argument("--check-timeout", type=_positive, default=None, metavar="T",
                   help="seconds for one check, passed as --gemm-timeout (default: the plugin's, 20 s plus 1 s per "
                        "5 GFLOP, with short budgets after a kernel's first timeout: a hanging kernel costs well "
                        "under a minute)")
    p.add_argument("--ini", default=None, metavar="PATH",
                   help="the course's pytest ini (gemm_weights, gemm_visibility, gemm_performance_threshold), "
                        "passed to every run as -c")
    p.add_argument("--jobs", type=_jobs, default=None, metavar="N",
                   help="students graded at once (default: what fits this machine, 3 of every 4 CPU cores and at "
                        "most 12 per GPU: 12 on one GPU with 16 cores), spread over the visible GPUs "
                        "(CUDA_VISIBLE_DEVICES); "
                        "on a shared GPU their correctness checks run at once and their timed checks one at a time "
                        "(a GPU-wide lock), so speed figures match a solo run")
    p.add_argument("--measure-each", action="store_true",
                   help="measure the GPU's roofs and cuBLAS in every student's run (default: once per GPU for the "
                        "class, by the first speed check, under the GPU-wide lock; each student's own kernel is "
                        "always timed in its own run)")
    p.add_argument("--logs", default=None, metavar="DIR", help="write each student's pytest output to DIR/STUDENT.log")
    p.add_argument("--scheduler", choices=("local", "dask"), default="local",
                   help="who runs the students: 'local', a pool on this machine (the default), or 'dask', one Dask "
                        "distributed task per student asking its worker for a GPU resource (docs/distributed.md; "
                        "pip install 'pytest-gemm[dask]'): a LocalCluster on this machine, or --address's cluster")
    p.add_argument("--address", default=None, metavar="ADDR",
                   help="with --scheduler dask: the Dask scheduler to grade on (e.g. tcp://head-node:8786); its "
                        "workers' GPU resources set how many students run at once (default: a LocalCluster here "
                        "with --jobs GPU slots)")
    p.add_argument("--allow-no-gpu", action="store_true",
                   help="grade even when this machine has no usable GPU: every GPU check is then skipped and "
                        "scores 0, so every student gets the points of the compile checks only; without this "
                        "flag the gradebook refuses to grade on such a machine (exit status 2)")
    return p


def no_gpu_problem(env: dict[str, str] | None = None, timeout: float = 120.0) -> str | None:
    """Why the students' runs would find no usable GPU (probed in a child process with their
    environment, so this process never initialises CUDA), or None when there is one. With the
    sandbox's dispatch test hook set (``PYTEST_GEMM_DISPATCH``) the checks need no GPU: None."""

    env = dict(os.environ if env is None else env)
    if env.get("PYTEST_GEMM_DISPATCH"):
        return None
    code = ("from pytest_gemm.kernels.device import probe\n"
            "found = probe()\nprint(found if isinstance(found, str) else 'ok')")
    try:
        done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return f"no usable GPU: finding the device took over {timeout:g} s (a hung driver? check nvidia-smi)"
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        return f"no usable GPU: probing it failed: {(done.stderr.strip().splitlines() or ['?'])[-1]}"
    return None if lines[-1] == "ok" else lines[-1]


def split_passthrough(argv: Sequence[str] | None = None) -> tuple[list[str], list[str]]:
    """(this command's arguments, the pytest arguments after ``--``); ``argv`` defaults to sys.argv[1:]."""
    args = list(sys.argv[1:] if argv is None else argv)
    if "--" not in args:
        return args, []
    cut = args.index("--")
    return args[:cut], args[cut + 1:]


def main(argv: Sequence[str] | None = None) -> int:
    args_in, extra = split_passthrough(argv)
    parser = make_parser()
    args = parser.parse_args(args_in)
    root = Path(args.submissions)
    if not root.is_dir():
        parser.error(f"SUBMISSIONS_DIR {args.submissions!r} is not a directory; give the folder holding one "
                     "subfolder or .py file per student")
    if not args.attr.isidentifier():
        parser.error(f"--attr {args.attr!r} is not a Python attribute name; e.g. --attr kernel")
    ini = None
    if args.ini is not None:
        ini = Path(args.ini).resolve()
        if not ini.is_file():
            parser.error(f"--ini {args.ini!r}: no such file; give the course's pytest.ini (or tox.ini, "
                         "setup.cfg, pyproject.toml)")
        try:
            config = load_grading_config(ini)
        except (ValueError, configparser.Error, OSError) as exc:
            parser.error(f"--ini {args.ini!r}: {exc}")
    else:
        config = GradingConfig()
    submissions = find_submissions(root, args.file)
    if not submissions:
        parser.error(f"no submissions in {str(root)!r}: expected one subfolder holding {args.file} "
                     "(or one .py file) per student")

    if args.address and args.scheduler != "dask":
        parser.error(f"--address {args.address!r} names a Dask scheduler: add --scheduler dask")
    if args.address and args.jobs is not None:
        parser.error("--jobs sets the students graded at once on this machine; with --address the Dask workers' "
                     "GPU resources set it (dask worker ADDR --nthreads N --resources GPU=N): drop --jobs")
    problem = None if args.allow_no_gpu or args.scheduler == "dask" else no_gpu_problem()  # dask: on each worker
    if problem is not None:
        print(f"gradebook: not grading: {problem}; every GPU check would be skipped and score 0. Run it on the "
              "grading machine's GPU, or pass --allow-no-gpu to grade the compile checks only (zeros for the rest)",
              file=sys.stderr)
        return 2
    if args.jobs is None:
        jobs = default_jobs(len(visible_gpu_ids()), cpu_cores())
    else:
        jobs = args.jobs
    where = f"with --jobs {jobs}"
    started = time.monotonic()

    def progress(r: StudentResult) -> None:
        print(f"[{time.monotonic() - started:6.1f} s] {r.student}: {r.status}, {r.score:g} / {r.max_score:g}"
              f" in {r.elapsed_s:.1f} s" + (f" ({clip(r.reason)})" if r.reason else ""), flush=True)

    extra = [*extra, "--gemm-allow-no-gpu"] if args.allow_no_gpu else extra  # each run refuses otherwise
    log_dir = Path(args.logs).resolve() if args.logs else None
    gpu_probed = not (args.allow_no_gpu or args.scheduler == "dask")  # and found: the refusal above
    # The class's shared measurements (the roofs, cuBLAS) are named before the harness's priming
    # runs start, so that the roofs their speed checks measure are the class's, not measured again
    with measurement_env(None, not args.measure_each) as measured, \
            harness_seed(extra, remote=args.address, no_gpu=None if gpu_probed else no_gpu_problem, env=measured,
                         class_size=len(submissions), at_once=jobs) as seed_env:
        env = {**measured, **seed_env}
        if args.scheduler == "dask":
            grading = StudentGrading.of_class(attr=args.attr, timeout=args.timeout, check_timeout=args.check_timeout,
                                              ini=ini, extra_args=extra, log_dir=log_dir)
            try:
                results, jobs, where = grade_class(submissions, grading, address=args.address, jobs=jobs,
                                                   no_gpu=None if args.allow_no_gpu else no_gpu_problem,
                                                   share_measurements=not args.measure_each, progress=progress,
                                                   env=env)
            except DaskProblem as exc:
                print(f"gradebook: not grading: {exc}", file=sys.stderr)
                return 2
            where = "on " + where
        else:
            results = grade_all(submissions, attr=args.attr, timeout=args.timeout, check_timeout=args.check_timeout,
                                ini=ini, extra_args=extra, jobs=jobs, log_dir=log_dir, env=env,
                                progress=progress, share_measurements=not args.measure_each)
    columns = check_columns(results, config)
    confined = confinements(results)
    write_csv(Path(args.out), results, columns)
    if args.json:
        write_json(Path(args.json), results, {
            "submissions_dir": str(root.resolve()), "attr": args.attr, "timeout_s": args.timeout,
            "check_timeout_s": args.check_timeout, "ini": str(ini) if ini else None, "pytest_args": extra,
            "measurements": "each run" if args.measure_each else "once per GPU for the class", "jobs": jobs,
            "scheduler": args.scheduler, "confinement": confined, "columns": columns})
    print()
    print(summary_table(results))
    print(f"\ngradebook: {args.out}" + (f", {args.json}" if args.json else "")
          + f" ({len(results)} students, " + ", ".join(f"{n} {s}" for s, n in Counter(r.status for r in results).items())
          + f"; {time.monotonic() - started:.1f} s {where})"
          + ("\nsubmitted code ran confined by: " + ", ".join(f"{level} ({n} students)" for level, n in confined.items())
             if confined else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
