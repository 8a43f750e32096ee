#!/usr/bin/env python3
"""Compare two saved ``--gemm-report`` files: the same comparison as ``pytest --gemm-compare``
(``pytest_gemm/outputs/compare.py``; the statistic is in docs/compare.md), for reports already
written, e.g. a run with ``-n 0`` against one with ``-n 2``, or last week's against today's:

    python3 tools/compare_reports.py OLD.json NEW.json --fail 2%

prints the kernels whose correctness changed, whether the setups differ, and one row per kernel
and shape timed in both (same / faster / slower / unsure from both runs' per-call times). Exit
status 1 when the gate fails: a kernel surely slower by more than ``--fail`` (default 2%), a
kernel that became wrong, or nothing timed in both reports.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Sequence

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script from a checkout: import the project beside it
    sys.path.insert(0, str(ROOT))


def main(argv: Sequence[str] | None = None) -> int:
    from pytest_gemm.outputs.compare import as_dict, compare, parse_fail, parse_noise, read_report, render
    from pytest_gemm.outputs.speed_stats import StatisticsUnavailable, require_scipy

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("old", type=Path, help="the saved report (the baseline)")
    parser.add_argument("new", type=Path, help="the report to compare with it")
    parser.add_argument("--fail", default="2%", help="fail when a kernel is surely slower by more than this (2%%)")
    parser.add_argument("--tolerance", type=float, default=None, help="the same as a fraction (0.02 = --fail 2%%)")
    parser.add_argument("--noise", default="1%", help="the noise band: the smallest change called slower or "
                        "faster (1%%; docs/compare.md)")
    parser.add_argument("--out", type=Path, help="also write the comparison as JSON here")
    args = parser.parse_args(argv)
    try:
        if args.tolerance is not None and not 0 < args.tolerance < 10:
            raise ValueError(f"--tolerance {args.tolerance:g}: expected a fraction above 0, e.g. 0.02 (= --fail 2%)")
        threshold = args.tolerance if args.tolerance is not None else parse_fail(args.fail)
        noise = parse_noise(args.noise)
        require_scipy()
        old, new = read_report(args.old), read_report(args.new)
    except (ValueError, StatisticsUnavailable) as exc:
        parser.error(str(exc).replace("--gemm-compare-fail", "--fail").replace("--gemm-compare-noise", "--noise")
                     .replace("--gemm-compare ", ""))
    result = compare(old, new, threshold, str(args.old), noise)
    print("\n".join(render(result)))
    if args.out:
        args.out.write_text(json.dumps(as_dict(result), indent=2))
    return 1 if result.gate_failure() else 0


if __name__ == "__main__":
    sys.exit(main())
