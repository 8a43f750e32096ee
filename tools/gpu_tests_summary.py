"""The one summary line of a GPU test run, from pytest's JUnit XML (``--junitxml``):

    gpu-tests at 1a2b3c4 (2026-12-01 22:10 UTC, NVIDIA H200): 212 passed, 0 failed, 0 skipped, 0 errors in 301.4 s

Used by ``bash tools/gpu_session.sh gpu-tests``; exits 1 when a test failed or errored, when no
test passed (every one skipped: the GPU was not usable), or when the XML is missing (the run was
cut off before pytest wrote it).
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path


def counts(xml: Path) -> dict[str, int]:
    root = ET.parse(xml).getroot()
    suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
    total = {key: sum(int(s.get(key, 0)) for s in suites) for key in ("tests", "failures", "errors", "skipped")}
    total["passed"] = total["tests"] - total["failures"] - total["errors"] - total["skipped"]
    return total


def commit() -> str:
    """The commit the run is at: ``GEMM_COMMIT`` where the tree was copied without its git folder
    (a lent GPU machine), else git's, with ``+changes`` for uncommitted changes to tracked files."""
    if os.environ.get("GEMM_COMMIT"):
        return os.environ["GEMM_COMMIT"]
    try:
        found = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True)
    except OSError:
        return "unknown"
    sha = found.stdout.strip() if found.returncode == 0 else ""
    return (sha or "unknown") + ("+changes" if sha and dirty.stdout.strip() else "")


def device() -> str:
    try:
        found = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                               text=True)
    except OSError:
        return "no GPU seen by nvidia-smi"
    names = found.stdout.strip().splitlines() if found.returncode == 0 else []
    return names[0] if names else "no GPU seen by nvidia-smi"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("xml", type=Path)
    parser.add_argument("--wall", type=float, required=True, help="the run's wall seconds")
    parser.add_argument("--label", default="gpu-tests")
    args = parser.parse_args(argv)
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    head = f"{args.label} at {commit()} ({when}, {device()})"
    if not args.xml.is_file():
        print(f"{head}: no result: the run was cut off before pytest wrote {args.xml} ({args.wall:.1f} s)")
        return 1
    c = counts(args.xml)
    print(f"{head}: {c['passed']} passed, {c['failures']} failed, {c['skipped']} skipped, {c['errors']} errors "
          f"in {args.wall:.1f} s")
    if c["passed"] == 0:  # every test skipped (no GPU seen, a broken CuPy): nothing was tested
        print(f"{args.label}: no test passed: a GPU run that tested nothing is a failure (see the skip reasons, -rs)")
        return 1
    return 1 if c["failures"] or c["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
