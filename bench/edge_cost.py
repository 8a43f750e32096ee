#!/usr/bin/env python3
"""What edge handling costs on an aligned shape, for the float4 rungs.

Every rung handles any M, N, K >= 1; the price must be small where nothing is
ragged: on an aligned shape a rung may be at most 3 % slower than the same
kernel built without edge handling. The cost is largest where the edge paths
are biggest, the float4 rungs with scalar fallbacks (``vectorized`` and
``warptile``), so those are measured. Each is built twice: the default build
(the ladder rung) and the bench's copy of its source (``bench/candidates/vectorized.cu``,
``warptile.cu``) built with ``-DGEMM_NO_EDGE`` (every edge test replaced by ``true``:
no bounds checks, no scalar fallback; correct only for M, N multiples of 128, K of
the rung's K slice, 16-byte aligned buffers). The rung ships only its edge handling.

For each rung: both builds are checked bit-exact on exact-integer inputs,
then timed with ``pytest_gemm.measure.timing.time_gpu`` (CUDA events, L2 flushed
before each call), interleaved A B A B over several rounds after a settling
round that is discarded; each build's time is the median of its per-round
medians, and the slowdown of the edge-handling build is
``100 * (edge / no_edge - 1)`` %. The timed buffers' last output is verified
too. Prints one JSON object. Exit status: 0 when every rung is bit-exact and
within the limit, 1 when one is not, 2 when it could not run (no GPU, bad
arguments).

Run from the repository root on a machine with a GPU:

    python3 bench/edge_cost.py                 # 4096^3, 7 rounds of 0.5 s per build
    python3 bench/edge_cost.py --rounds 11 --budget-s 1.0 --out edge_cost.json
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
from pathlib import Path
from typing import Any, Sequence

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script from a checkout: import the project beside it
    sys.path.insert(0, str(ROOT))

import reference_kernels  # noqa: E402  (never touches CUDA)
from pytest_gemm.model.contract import CudaKernel  # noqa: E402

NO_EDGE_OPTION = "-DGEMM_NO_EDGE"
RUNGS: tuple[str, ...] = ("vectorized", "warptile")
#: M, N, K granularity the -DGEMM_NO_EDGE build of each rung assumes (block tile rows, cols; K slice).
NO_EDGE_MULTIPLE: dict[str, tuple[int, int, int]] = {"vectorized": (128, 128, 8), "warptile": (128, 128, 16)}
LIMIT_PCT = 3.0
DEFAULT_SHAPE = (4096, 4096, 4096)


# -- pure helpers (tested with no GPU) -------------------------------------------

#: The bench's copies of the rungs' sources, which keep the -DGEMM_NO_EDGE build.
NO_EDGE_SOURCE: dict[str, Path] = {name: ROOT / "bench" / "candidates" / f"{name}.cu" for name in RUNGS}


def no_edge_variant(kernel: CudaKernel) -> CudaKernel:
    """The same declaration, from the bench's copy of its source built with -DGEMM_NO_EDGE,
    under a distinct name."""
    return dataclasses.replace(kernel, source=str(NO_EDGE_SOURCE[str(kernel.name)]),
                               options=(*tuple(kernel.options), NO_EDGE_OPTION), name=f"{kernel.name}-no-edge")


def variants(names: Sequence[str] = RUNGS) -> list[tuple[CudaKernel, CudaKernel]]:
    """(default build, no-edge build) for each named rung."""
    pairs = []
    for name in names:
        if name not in NO_EDGE_MULTIPLE:
            raise ValueError(f"rung {name!r} has no -DGEMM_NO_EDGE build; valid: {', '.join(NO_EDGE_MULTIPLE)}")
        kernel = reference_kernels.by_name(name)
        assert isinstance(kernel, CudaKernel)
        pairs.append((kernel, no_edge_variant(kernel)))
    return pairs


def shape_problem(name: str, shape: Sequence[int]) -> str | None:
    """Why the no-edge build of ``name`` cannot run ``shape``, or None."""
    bad = [f"{dim}={size} is not a multiple of {mult}"
           for dim, size, mult in zip("MNK", shape, NO_EDGE_MULTIPLE[name]) if size % mult]
    if bad:
        return f"{name} built with {NO_EDGE_OPTION} assumes aligned shapes: {', '.join(bad)}"
    return None


def median_of_medians(round_medians_ms: Sequence[float]) -> float:
    if not round_medians_ms:
        raise ValueError("no rounds to summarise")
    return float(statistics.median(round_medians_ms))


def slowdown_pct(edge_ms: float, no_edge_ms: float) -> float:
    """How much slower the edge-handling build is, in % (negative: faster)."""
    if no_edge_ms <= 0:
        raise ValueError(f"no-edge time must be positive, got {no_edge_ms}")
    return 100.0 * (edge_ms / no_edge_ms - 1.0)


def summarize_rung(rung: str, edge_rounds: Sequence[float], no_edge_rounds: Sequence[float],
                   flops: float, limit_pct: float = LIMIT_PCT) -> dict[str, Any]:
    """The figures of one rung from its per-round medians (ms), A and B paired by round."""
    edge, no_edge = median_of_medians(edge_rounds), median_of_medians(no_edge_rounds)
    slowdown = slowdown_pct(edge, no_edge)
    paired = [slowdown_pct(e, b) for e, b in zip(edge_rounds, no_edge_rounds)]
    return {
        "rung": rung,
        "edge_ms": edge,
        "no_edge_ms": no_edge,
        "edge_tflops": flops / (edge * 1e-3) / 1e12,
        "no_edge_tflops": flops / (no_edge * 1e-3) / 1e12,
        "edge_round_medians_ms": list(edge_rounds),
        "no_edge_round_medians_ms": list(no_edge_rounds),
        "slowdown_pct": slowdown,
        "paired_slowdown_pct": paired,
        "paired_slowdown_range_pct": [min(paired), max(paired)] if paired else None,
        "limit_pct": limit_pct,
        "within_limit": slowdown <= limit_pct,
    }


def parse_shape(text: str) -> tuple[int, int, int]:
    from pytest_gemm.model.shapes import parse_shape as parse

    try:
        return parse(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="edge_cost.py",
        description=("Time each float4 rung (default build, with edge handling) against its "
                     f"{NO_EDGE_OPTION} build on an aligned shape and print the slowdown as JSON. "
                     "Needs a GPU."),
        epilog=("Exit status: 0 every rung bit-exact and within --limit-pct; 1 otherwise; "
                "2 could not run (no usable GPU, bad arguments)."))
    parser.add_argument("--rungs", default=",".join(RUNGS),
                        help=f"comma-separated rungs (default: {','.join(RUNGS)}; valid: {', '.join(NO_EDGE_MULTIPLE)})")
    parser.add_argument("--shape", type=parse_shape, default=DEFAULT_SHAPE,
                        help="N or MxNxK, multiples of 128 x 128 x 16 (default: 4096)")
    parser.add_argument("--rounds", type=int, default=7, help="timed A B rounds (default: 7)")
    parser.add_argument("--budget-s", type=float, default=0.5,
                        help="seconds of GPU time per build per round (default: 0.5)")
    parser.add_argument("--settle-s", type=float, default=0.5,
                        help="seconds per build of an untimed settling round first (default: 0.5)")
    parser.add_argument("--limit-pct", type=float, default=LIMIT_PCT,
                        help=f"largest acceptable slowdown in %% (default: {LIMIT_PCT})")
    parser.add_argument("--out", type=Path, default=None, help="also write the JSON to this file")
    return parser


# -- GPU part -----------------------------------------------------------------------

def _mismatches(got: Any, want32: Any) -> int:
    import cupy

    return int((got.view(cupy.uint32) != want32.view(cupy.uint32)).sum())


def measure(pairs: list[tuple[CudaKernel, CudaKernel]], device: Any, shape: tuple[int, int, int], rounds: int,
            budget_s: float, settle_s: float, limit_pct: float) -> list[dict[str, Any]]:
    import cupy

    from pytest_gemm.kernels.harness import Harness
    from pytest_gemm.judges.inputs import exact_inputs
    from pytest_gemm.judges.reference import reference
    from pytest_gemm.measure.timing import gemm_flops, time_gpu

    m, n, k = shape
    flops = gemm_flops(m, n, k)
    problem = exact_inputs(m, n, k, precision="fp32", seed=0)
    want32 = reference(cupy.asarray(problem.a64), cupy.asarray(problem.b64), xp=cupy).astype(cupy.float32)
    a, b = cupy.asarray(problem.a), cupy.asarray(problem.b)  # cupy allocations are 256-byte aligned

    results = []
    for edge_kernel, no_edge_kernel in pairs:
        builds = []
        for kernel in (edge_kernel, no_edge_kernel):
            h = Harness(kernel, device)
            # Exactness through the harness: guarded buffers, C poisoned before the launch.
            exact_bad = _mismatches(h.run(problem).c, want32)
            res = h.loaded.compiled.resources if h.loaded.compiled is not None else None
            c = cupy.empty((m, n), dtype=cupy.float32)
            loaded = h.loaded

            def call(loaded: Any = loaded, c: Any = c) -> None:
                loaded(a, b, c, m, n, k)

            builds.append({"kernel": kernel, "call": call, "c": c, "mismatches": exact_bad,
                           "registers": res.registers if res else None,
                           "spills": res.spills if res else None, "rounds": []})

        def timed(build: dict[str, Any], budget: float) -> float:
            return time_gpu(build["call"], flops=flops, l2_bytes=device.l2_bytes, budget_s=budget).median_ms

        for build in builds:  # settle clocks and caches; discarded
            timed(build, settle_s)
        for _ in range(rounds):
            for build in builds:  # A B A B ...
                build["rounds"].append(timed(build, budget_s))

        edge, no_edge = builds
        summary = summarize_rung(edge_kernel.name, edge["rounds"], no_edge["rounds"], flops, limit_pct)
        for label, build in (("edge", edge), ("no_edge", no_edge)):
            timed_bad = _mismatches(build["c"], want32)  # the output of the last timed call
            summary[label] = {"name": build["kernel"].name, "options": list(build["kernel"].options),
                              "registers": build["registers"], "spills": build["spills"],
                              "bit_exact": build["mismatches"] == 0 and timed_bad == 0,
                              "mismatches": build["mismatches"], "timed_output_mismatches": timed_bad}
        summary["ok"] = summary["within_limit"] and summary["edge"]["bit_exact"] and summary["no_edge"]["bit_exact"]
        results.append(summary)
    return results


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    names = [r.strip() for r in args.rungs.split(",") if r.strip()]
    try:
        pairs = variants(names)
    except ValueError as exc:
        parser.error(str(exc))
    bad = [p for p in (shape_problem(name, args.shape) for name in names) if p]
    if bad:
        parser.error("; ".join(bad))
    if args.rounds < 1 or args.budget_s <= 0 or args.settle_s < 0:
        parser.error("--rounds must be >= 1, --budget-s > 0 and --settle-s >= 0")

    from pytest_gemm.kernels.device import probe

    device = probe()
    report: dict[str, Any] = {"shape": list(args.shape), "rounds": args.rounds, "budget_s": args.budget_s,
                              "settle_s": args.settle_s, "limit_pct": args.limit_pct, "option": NO_EDGE_OPTION}
    if isinstance(device, str):
        report.update(error=device, ok=False)
        status = 2
    else:
        report["device"] = {"name": device.name, "arch": device.arch, "sm_count": device.sm_count}
        report["rungs"] = measure(pairs, device, args.shape, args.rounds, args.budget_s, args.settle_s,
                                  args.limit_pct)
        report["ok"] = all(r["ok"] for r in report["rungs"])
        status = 0 if report["ok"] else 1
    text = json.dumps(report, indent=2)
    print(text)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")
    return status


if __name__ == "__main__":
    sys.exit(main())
