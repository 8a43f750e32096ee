#!/usr/bin/env python3
"""What Triton's tutorial costs to warm up with no harness at all: the floor under issue 43's bound.

    python3 tools/triton_warmup_floor.py [--variants fp16,fp32,ieee] [--limit 340]

calls Triton's tutorial matmul (tests/warmup/tutorial.py, with its 16-config autotuner) directly,
with a Triton cache no run has used, at the shapes a kernel found tuning gets (the quick exact and
accuracy shapes, then the speed check's 4096^3), in that order; prints the first call's time at
each (compiling the configs at each new Triton specialisation, benchmarking them at each new
shape), and the second's. Each variant runs in its own process, all at once: ``fp16``,
``fp32`` (as published: TF32 products) and ``ieee`` (fp32 with ``input_precision="ieee"``). A
variant still running at ``--limit`` seconds is stopped and says where it was. Needs a GPU, torch and Triton; ``--help`` needs neither.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PRECISION = {"fp16": None, "fp32": None, "ieee": "ieee"}  # tl.dot's input_precision


def shapes() -> list[tuple[int, int, int]]:
    """The quick shapes in the order the suite meets them, then the speed check's default shape."""
    sys.path.insert(0, str(ROOT))
    from pytest_gemm.checks.registry import QUICK_ACCURACY, QUICK_EXACT

    return list(dict.fromkeys((*QUICK_EXACT, *QUICK_ACCURACY, (4096, 4096, 4096))))


def one_variant(variant: str) -> None:
    """In this process: a cold cache, then the first and second call at each shape."""
    os.environ["TRITON_CACHE_DIR"] = str(Path(tempfile.gettempdir()) / f"gemm-floor-{uuid.uuid4().hex}")
    start = time.perf_counter()
    import cupy

    sys.path.insert(0, str(ROOT / "tests" / "warmup"))
    import tutorial  # imports Triton

    dtype = cupy.float16 if variant == "fp16" else cupy.float32
    print(f"{variant}: imports {time.perf_counter() - start:.1f} s", flush=True)
    for m, n, k in shapes():
        a, b, c = cupy.ones((m, k), dtype), cupy.ones((k, n), dtype), cupy.zeros((m, n), cupy.float32)
        times = []
        for _ in range(2):
            t0 = time.perf_counter()
            tutorial.launch(a, b, c, PRECISION[variant])
            cupy.cuda.Device().synchronize()
            times.append(time.perf_counter() - t0)
        print(f"{variant} {m}x{n}x{k}: first call {times[0]:.1f} s, second {times[1]:.3f} s, "
              f"{time.perf_counter() - start:.1f} s so far", flush=True)
    print(f"{variant}: every shape in {time.perf_counter() - start:.1f} s", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--variants", default="fp16,fp32,ieee", help="comma-separated: fp16, fp32, ieee")
    parser.add_argument("--limit", type=float, default=340.0, help="seconds before a variant is stopped")
    parser.add_argument("--one", help=argparse.SUPPRESS)  # a child: the variant it runs
    args = parser.parse_args()
    if args.one:
        one_variant(args.one)
        return 0
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    unknown = [v for v in variants if v not in PRECISION]
    if unknown or not variants:
        parser.error(f"--variants {args.variants!r}: choose among {', '.join(PRECISION)}")
    children = {v: subprocess.Popen([sys.executable, __file__, "--one", v], stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, text=True) for v in variants}
    deadline = time.monotonic() + args.limit
    failed = 0
    for variant, child in children.items():
        try:
            out, _ = child.communicate(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            child.kill()
            out, _ = child.communicate()
            out += f"{variant}: stopped at the {args.limit:g} s limit, still warming up at the shape after the last line\n"
            failed = 1
        failed |= child.returncode != 0
        print(out, end="", flush=True)
    return failed


if __name__ == "__main__":
    sys.exit(main())
