#!/usr/bin/env python3
"""Launch one kernel (a ladder rung or a candidate) a few times at SIZE^3, nothing else: run it
under Nsight Compute to see where its time goes (tensor pipe busy, warp stalls, L2 and DRAM
traffic). Needs a GPU.

    ncu --clock-control none --kernel-name regex:gemm_ --launch-skip 1 --launch-count 1 \\
        --section SpeedOfLight --section WarpStateStats --section MemoryWorkloadAnalysis \\
        python3 bench/profile_kernel.py --kernel mma-fp16 --size 4096

--kernel also takes a --gemm-kernel spec (module:attr or file.py:attr[:key], one kernel), e.g.
bench/cutlass_sm80/launchers.py:ALL:128x256x64_s3 (CUTLASS's kernel is named cutlass::Kernel...:
give ncu --kernel-name regex:Kernel).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))


def _kernel(name: str, kernel_by_name):
    """A ladder rung or candidate by name, or one kernel of a spec (``file.py:attr[:key]``)."""
    if ":" not in name:
        return kernel_by_name(name)
    from pytest_gemm.kernels.loader import load_spec

    spec, _, key = name.rpartition(":") if name.count(":") > 1 else (name, "", "")
    kernels = load_spec(spec, REPO)
    chosen = [k for k in kernels if not key or str(k.name).endswith(key)]
    if len(chosen) != 1:
        raise SystemExit(f"{name}: {len(chosen)} kernels match; give file.py:attr:NAME_SUFFIX to pick one "
                         f"of {', '.join(str(k.name) for k in kernels)}")
    return chosen[0]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernel", required=True, help="a rung (reference_kernels) or candidate name")
    parser.add_argument("--size", type=int, default=4096)
    parser.add_argument("--calls", type=int, default=3)
    args = parser.parse_args()
    import cupy
    import numpy as np

    from pytest_gemm.kernels.harness import harness_for
    from pytest_gemm.kernels.device import probe
    from pytest_gemm.model.precision import to_storage

    sys.path.insert(0, str(REPO / "bench"))
    from perf_candidates import kernel_by_name

    kernel = _kernel(args.kernel, kernel_by_name)
    device = probe()
    if isinstance(device, str):
        print(device, file=sys.stderr)
        return 2
    h = harness_for(kernel, device)
    n = args.size
    rng = np.random.default_rng(1234)
    # The kernel's own storage type for its precision (bf16 as bit patterns, tf32 as float32).
    a, b = (cupy.asarray(to_storage(rng.uniform(-1.0, 1.0, size=(n, n)).astype(np.float32), kernel.precision))
            for _ in range(2))
    c = cupy.empty((n, n), dtype=cupy.float32)
    for _ in range(args.calls):
        h.loaded(a, b, c, n, n, n)
    cupy.cuda.runtime.deviceSynchronize()
    print(f"{kernel.name}: {args.calls} calls at {n}^3 done", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
