"""How much of each correctness check is host-only work, at the course's shapes (no GPU needed).

    python tools/host_phases.py [--repeat 3] [--checks exact,coverage,...] [--json out.json]

A correctness check runs in its kernel's process while the gradebook's parent holds the GPU
lock shared; a timed check that wants the GPU alone waits for every shared hold in flight to end
("draining", ``tools/lock_log.py``). Host-only work inside a shared hold makes it wait for
nothing that touches the GPU. This tool times, with numpy, the host work each check of a passing
fp32 ``C = A @ B`` kernel does, by the check's own code paths (``checks/*.py``):

- ``before``: before its first GPU operation: drawing its inputs (``judges/inputs.py``, with the
  check's seed) and the upload's host side (the C fill, ``Harness.upload``);
- ``middle``: host work between GPU operations: the float64 reference numpy computes for small
  problems (``checks/common.py``: ``CPU_REFERENCE_FLOPS``), the determinism check's second inputs;
- ``after``: after its last GPU operation, for a passing kernel: the determinism check's
  comparison of its launches on the host (``judges/history.judge_launches``); the others judge on
  the GPU and have none.

What it does not time: anything on the GPU (uploads, launches, GPU references and comparisons,
device-to-host copies), a failing kernel's diagnosis, the child's memory release (``gc.collect``:
timed once, apart). The figures are this machine's CPU, not the grading machine's.
"""
from __future__ import annotations

import argparse
import gc
import json
import sys
import time
from pathlib import Path
from typing import Any, Callable, Sequence

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

COURSE_CHECKS = ("launch", "exact", "coverage", "guards", "alphabeta", "deterministic", "accuracy")
SEEDS = {"exact": 0, "coverage": 1, "guards": 2, "launch": 0}  # exact_inputs' seed in each check


_FIRST = [True]  # --first: each part's first run (cold memory, as a kernel's process runs it once)


def _timed(fn: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    """(the least of ``repeat`` runs' seconds, or the first's with --first; fn's result)."""
    times, out = [], None
    for _ in range(repeat):
        started = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - started)
    return (times[0] if _FIRST[0] else min(times)), out


def _upload_host(problem: Any, c_init: Any = None) -> None:
    """``Harness.upload``'s host side: contiguous inputs, C's fill (or its initial values) as float32."""
    import numpy as np

    from pytest_gemm.judges.sentinels import fill

    np.ascontiguousarray(problem.a)
    np.ascontiguousarray(problem.b)
    (fill((problem.m, problem.n)) if c_init is None else c_init).astype(np.float32)


def case_phases(check: str, shape: tuple[int, int, int], params: dict[str, Any], repeat: int) -> dict[str, float]:
    """Seconds of host work before, between and after a passing kernel's GPU operations."""
    import numpy as np

    from pytest_gemm.checks.common import CPU_REFERENCE_FLOPS
    from pytest_gemm.judges.history import judge_launches
    from pytest_gemm.judges.inputs import exact_inputs, random_inputs
    from pytest_gemm.judges.reference import reference

    m, n, k = shape
    small = 2 * m * n * k <= CPU_REFERENCE_FLOPS

    if check in ("deterministic", "accuracy"):
        dist = params.get("dist", "uniform")
        seed = 4 if check == "deterministic" else 5
        draw = lambda: random_inputs(m, n, k, precision="fp32", distribution=dist, seed=seed)  # noqa: E731
    elif check == "alphabeta":
        draw = lambda: exact_inputs(m, n, k, precision="fp32", seed=3, with_c=True)  # noqa: E731
    else:
        draw = lambda: exact_inputs(m, n, k, precision="fp32", seed=SEEDS[check])  # noqa: E731
    before, problem = _timed(draw, repeat)
    beta = float(params.get("beta", 0.0))
    c_old = problem.c0 if check == "alphabeta" and beta != 0 else None
    before += _timed(lambda: _upload_host(problem, c_old), repeat)[0]
    middle = after = 0.0
    if check in ("exact", "alphabeta") and small:  # reference_f32 by numpy, then uploaded
        middle += _timed(lambda: reference(problem.a64, problem.b64, alpha=float(params.get("alpha", 1.0)),
                                           beta=beta, c0=c_old), repeat)[0]
    if check == "deterministic":
        middle += _timed(lambda: random_inputs(m, n, k, precision="fp32", distribution="uniform", seed=7), repeat)[0]
        if small:  # _accurate's reference_f32 of the launch before new inputs
            middle += _timed(lambda: reference(problem.a64, problem.b64), repeat)[0]
        c = (problem.a64 @ problem.b64).astype(np.float32)
        outputs = [c.copy() for _ in range(5)]
        other = (c + 1).astype(np.float32)
        after += _timed(lambda: judge_launches(outputs, c, other, lambda: None), repeat)[0]
    return {"before_s": before, "middle_s": middle, "after_s": after}


def course_cases(checks: Sequence[str]) -> list[tuple[str, tuple[int, int, int], dict[str, Any]]]:
    """(check, shape, params) of the course's run on an fp32 C = A @ B kernel (the registry's full sets)."""
    from pytest_gemm.checks import registry

    out = []
    for name in checks:
        spec = registry.get(name)  # alphabeta: not run for the course's kernels (no alpha/beta); timed as for one that takes them
        for shape in spec.shapes:  # type: ignore[union-attr]
            for params in spec.params:
                out.append((name, tuple(shape), dict(params)))
    return out


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repeat", type=int, default=3, help="times each part is run (default 3)")
    p.add_argument("--checks", default=",".join(COURSE_CHECKS), help="comma-separated checks (default: the course's)")
    p.add_argument("--least", action="store_true", help="keep each part's least time over --repeat runs "
                   "(default: its first run, as a kernel's process runs it once)")
    p.add_argument("--json", type=Path, default=None, help="write every case's figures here")
    args = p.parse_args(argv)
    _FIRST[0] = not args.least
    rows = []
    for check, shape, params in course_cases([c for c in args.checks.split(",") if c]):
        phases = case_phases(check, shape, params, args.repeat)
        rows.append({"check": check, "shape": list(shape), "params": params, **phases})
        extra = "".join(f" {k}={v}" for k, v in params.items())
        print(f"  {check} {'x'.join(map(str, shape))}{extra}: before {phases['before_s'] * 1e3:.1f} ms, "
              f"middle {phases['middle_s'] * 1e3:.1f} ms, after {phases['after_s'] * 1e3:.1f} ms", flush=True)
    gc_s, _ = _timed(gc.collect, args.repeat)
    print("\nPER CHECK (summed over its cases; ms)")
    for check in dict.fromkeys(r["check"] for r in rows):
        mine = [r for r in rows if r["check"] == check]
        b, mid, a = (sum(r[key] for r in mine) * 1e3 for key in ("before_s", "middle_s", "after_s"))
        top = max(mine, key=lambda r: r["before_s"] + r["middle_s"] + r["after_s"])
        print(f"  {check}: {len(mine)} cases, before {b:.0f}, middle {mid:.0f}, after {a:.0f}, host in all "
              f"{b + mid + a:.0f}; largest {'x'.join(map(str, top['shape']))} "
              f"({(top['before_s'] + top['middle_s'] + top['after_s']) * 1e3:.0f})")
    print(f"  the child's gc.collect after each check (release_memory): {gc_s * 1e3:.1f} ms here")
    if args.json:
        args.json.write_text(json.dumps({"cases": rows, "gc_collect_s": gc_s}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
