#!/usr/bin/env python3
"""Three cuBLAS calls per precision at SIZE^3 on the speed check's exact inputs, nothing else:
run under Nsight Compute to see which kernel cuBLAS picks in this process (a different pick
from one process to the next would explain a median that moves between runs while our own
rungs hold still). Needs a GPU.

    ncu --clock-control none --metrics gpu__time_duration.sum python3 bench/cublas_kernels.py
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=4096)
    parser.add_argument("--precisions", default="fp32,fp16")
    args = parser.parse_args()
    import cupy
    import reference_kernels

    from pytest_gemm.judges.inputs import exact_inputs

    n = args.size
    for precision in args.precisions.split(","):
        problem = exact_inputs(n, n, n, precision=precision, seed=100)
        a, b = cupy.asarray(problem.a), cupy.asarray(problem.b)
        c = cupy.empty((n, n), dtype=cupy.float32)
        for _ in range(3):
            reference_kernels.CUBLAS[precision].fn(a, b, c)
        cupy.cuda.runtime.deviceSynchronize()
        print(f"{precision}: 3 calls done", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
