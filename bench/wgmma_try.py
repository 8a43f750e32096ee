"""Check and time builds of the Hopper rung (reference_kernels/12_wgmma.cu) against cuBLAS, on a GPU.

    python bench/wgmma_try.py [--variants s4g16,s3g16,s4g16c2,s5g16p,...] [--sizes 2048,4096,8192] [--precision fp16,bf16]

Each variant (sS: WG_STAGES, gG: WG_GROUP_M, cC: WG_CLUSTER, 1 when left out, a trailing p:
WG_PINGPONG=1; then tN: WG_STORE_BUFFERS=N, the TMA-store epilogue) runs in its own process
with a time limit, so a hang or a fault in one build costs only that build. In that process:
exact-integer inputs at
ragged and square shapes compared bit for bit with a float64 reference (C poisoned with NaN
before every launch), random inputs against the same reference (relative Frobenius error),
then, only if every check passed, the build, cuBLAS (cublasGemmEx, same precision, fp32 out)
and the build again, each timed by the suite's own timer (pytest_gemm.measure.timing.time_gpu: L2
flushed, launch guard, settling, median) at each size; the fraction of cuBLAS printed twice
(the two timings of the build bracket the baseline's). Needs CuPy and a compute capability 9.0 GPU.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
#: The bench's copy of reference_kernels/12_wgmma.cu: the same kernel, and clusters (-DWG_CLUSTER),
#: which the rung does not ship. Every variant builds from it.
SOURCE = str(ROOT / "bench" / "candidates" / "wgmma_clusters.cu")

def parse_variant(variant: str) -> tuple[int, int, int, bool, int]:
    """``s4g16c2`` -> (stages 4, group 16, cluster 2, no ping-pong, C stored from registers); ``c``
    is optional, ``p`` asks for the ping-pong consumers and ``tN`` for the TMA-store epilogue
    through N boxes a consumer (``t`` alone: 2): ``s5g16p`` -> (5, 16, 1, True, 0), ``s3g16t4`` ->
    (3, 16, 1, False, 4)."""
    found = re.fullmatch(r"s(\d+)g(\d+)(?:c(\d+))?(p?)(?:t(\d*))?", variant)
    if not found:
        raise ValueError(f"{variant!r} is not a build name like s4g16, s4g16c2, s5g16p or s4g16t2")
    stages, group, cluster, pingpong, store = found.groups()
    buffers = 0 if store is None else int(store or 2)
    return int(stages), int(group), int(cluster or 1), pingpong == "p", buffers


def variant_kernel(variant: str, precision: str):
    """A build of the rung as a PyKernel, for the conformance suite:
    ``pytest --gemm-kernel bench/wgmma_try.py:fp16_s4g16c2``."""
    from pytest_gemm.model.contract import PyKernel
    from reference_kernels.wgmma import WgmmaLauncher

    launchers = []

    def run(a, b, c):
        if not launchers:
            launchers.append(WgmmaLauncher(precision, *parse_variant(variant), source=SOURCE))
        launchers[0](a, b, c)

    return PyKernel(run, precision=precision, min_cc=(9, 0), arches=("sm_90a",), name=f"wgmma-{precision}-{variant}")


fp16_s4g16c2 = variant_kernel("s4g16c2", "fp16")
bf16_s4g16c2 = variant_kernel("s4g16c2", "bf16")


def __getattr__(name: str):
    """Any other build by name, for the suite: ``bench/wgmma_try.py:bf16_s5g32p``."""
    precision, _, variant = name.partition("_")
    if precision in ("fp16", "bf16") and variant.startswith("s"):
        try:
            parse_variant(variant)
        except ValueError:
            pass
        else:
            return variant_kernel(variant, precision)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# The last three: many tiles a block with K slices that are no multiple of the ring's stages
# (ping-pong consumers skip each other's slices), an odd number of 64-row tiles, ragged edges.
EXACT_SHAPES = [(1, 1, 1), (17, 33, 65), (64, 64, 64), (128, 256, 64), (130, 264, 72), (1, 4096, 4096),
                (4096, 8, 8), (257, 520, 1032), (1000, 1000, 1000), (2048, 2048, 2048), (4096, 4096, 4096),
                (4096, 2048, 104), (3000, 1000, 328), (8191, 776, 200)]
RANDOM_SHAPES = [(1000, 1000, 1000), (4096, 4096, 4096)]


def _inputs(m, n, k, precision, exact, seed, reference=True):
    """A, B (2-byte bit patterns on the GPU) and, with ``reference``, A @ B in float64."""
    import cupy
    import numpy as np

    rng = np.random.default_rng(seed)
    if exact:
        a = rng.integers(-2, 3, size=(m, k)).astype(np.float32)
        b = rng.integers(-2, 3, size=(k, n)).astype(np.float32)
    else:
        a = rng.standard_normal((m, k)).astype(np.float32)
        b = rng.standard_normal((k, n)).astype(np.float32)
    if precision == "fp16":
        a16, b16 = a.astype(np.float16), b.astype(np.float16)
        if not reference:
            return cupy.asarray(a16), cupy.asarray(b16), None
        a_ref, b_ref = a16.astype(np.float64), b16.astype(np.float64)
    else:  # bf16 bit patterns: round to nearest even on the top 16 bits
        def to_bf16(x):
            bits = x.view(np.uint32).astype(np.uint64)
            bits = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
            return bits.astype(np.uint16)
        a16, b16 = to_bf16(a), to_bf16(b)
        if not reference:
            return cupy.asarray(a16), cupy.asarray(b16), None
        a_ref = (a16.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
        b_ref = (b16.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return cupy.asarray(a16), cupy.asarray(b16), cupy.asarray(a_ref) @ cupy.asarray(b_ref)


def child(variant: str, precision: str, sizes: list[int], budget_s: float = 1.0) -> dict:
    import cupy
    import numpy as np

    from pytest_gemm.measure.cublas import cublas_bf16, cublas_fp16
    from reference_kernels.wgmma import WgmmaLauncher

    launcher = WgmmaLauncher(precision, *parse_variant(variant), source=SOURCE)
    cublas = cublas_fp16.fn if precision == "fp16" else cublas_bf16.fn
    out: dict = {"variant": variant, "precision": precision, "checks": [], "timing": []}
    ok = True
    for exact, shapes in ((True, EXACT_SHAPES), (False, RANDOM_SHAPES)):
        for (m, n, k) in shapes:
            a, b, ref = _inputs(m, n, k, precision, exact, seed=m * 7 + n * 3 + k)
            c = cupy.full((m, n), np.nan, dtype=cupy.float32)
            launcher(a, b, c)
            cupy.cuda.runtime.deviceSynchronize()
            unwritten = int(cupy.isnan(c).sum())
            if exact:
                wrong = int((c.astype(cupy.float64) != ref).sum())
                passed = unwritten == 0 and wrong == 0
                detail = f"unwritten {unwritten} wrong {wrong}"
                if wrong:
                    idx = cupy.argwhere(c.astype(cupy.float64) != ref)[:3].get().tolist()
                    detail += f" first {idx} got {[float(c[i, j]) for i, j in idx]} want {[float(ref[i, j]) for i, j in idx]}"
            else:
                err = float(cupy.linalg.norm(c.astype(cupy.float64) - ref) / cupy.linalg.norm(ref))
                passed = unwritten == 0 and err < (2e-3 if precision == "fp16" else 1e-2)
                detail = f"unwritten {unwritten} rel_err {err:.2e}"
            ok &= passed
            out["checks"].append({"shape": [m, n, k], "exact": exact, "passed": passed, "detail": detail})
            print(f"[{variant} {precision}] {'exact' if exact else 'random'} {m}x{n}x{k}: "
                  f"{'PASS' if passed else 'FAIL'} {detail}", flush=True)
            del a, b, ref, c
    print(f"[{variant}] blocks (clusters) at once: {launcher._functions()[2]}", flush=True)
    # Same inputs through the launcher twice: bit-identical (determinism).
    a, b, _ = _inputs(2048, 2048, 2048, precision, False, seed=5, reference=False)
    c1 = cupy.empty((2048, 2048), cupy.float32)
    c2 = cupy.empty((2048, 2048), cupy.float32)
    launcher(a, b, c1)
    launcher(a, b, c2)
    same = bool((c1.view(cupy.uint32) == c2.view(cupy.uint32)).all())
    print(f"[{variant}] deterministic: {same}", flush=True)
    ok &= same
    out["passed"] = ok
    if not ok:
        print(f"[{variant}] correctness failed: not timed", flush=True)
        return out

    from pytest_gemm.measure.timing import time_gpu

    l2 = int(cupy.cuda.runtime.getDeviceProperties(0)["l2CacheSize"])
    for size in sizes:
        a, b, _ = _inputs(size, size, size, precision, False, seed=size, reference=False)
        c = cupy.empty((size, size), cupy.float32)
        flops = 2.0 * size ** 3
        # The suite's own timer: L2 flushed, launch guard, settle, median. Ours, cuBLAS, ours again.
        first = time_gpu(lambda: launcher(a, b, c), flops=flops, l2_bytes=l2, budget_s=budget_s)
        base = time_gpu(lambda: cublas(a, b, c), flops=flops, l2_bytes=l2, budget_s=budget_s)
        again = time_gpu(lambda: launcher(a, b, c), flops=flops, l2_bytes=l2, budget_s=budget_s)
        row = {"size": size, "ms": first.median_ms, "ms_again": again.median_ms, "cublas_ms": base.median_ms,
               "tflops": first.tflops, "tflops_again": again.tflops, "cublas_tflops": base.tflops,
               "fraction": base.median_ms / first.median_ms, "fraction_again": base.median_ms / again.median_ms,
               "spread": first.spread}
        out["timing"].append(row)
        print(f"[{variant} {precision}] {size}^3: {row['tflops']:.1f} / {row['tflops_again']:.1f} TFLOP/s vs cuBLAS "
              f"{row['cublas_tflops']:.1f} -> {row['fraction']:.3f} / {row['fraction_again']:.3f}", flush=True)
        del a, b, c
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--variants", default="s4g16")
    parser.add_argument("--precision", default="fp16")
    parser.add_argument("--sizes", default="2048,4096,8192")
    parser.add_argument("--timeout", type=float, default=120)
    parser.add_argument("--budget-s", type=float, default=1.0, help="measured GPU seconds per timing (time_gpu)")
    parser.add_argument("--child", default=None)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s]
    if args.child:
        result = child(args.child, args.precision, sizes, args.budget_s)
        if args.json:
            Path(args.json).write_text(json.dumps(result))
        return
    results = []
    for variant in args.variants.split(","):
        for precision in args.precision.split(","):
            path = Path(os.environ.get("OUT", "/tmp")) / f"wgmma_{variant}_{precision}.json"
            cmd = [sys.executable, __file__, "--child", variant, "--precision", precision, "--sizes", args.sizes,
                   "--json", str(path), "--budget-s", str(args.budget_s)]
            try:
                proc = subprocess.run(cmd, timeout=args.timeout)
                status = "rc=%d" % proc.returncode
            except subprocess.TimeoutExpired:
                status = f"TIMEOUT after {args.timeout}s (hang?)"
            res = json.loads(path.read_text()) if path.exists() else {"variant": variant, "precision": precision}
            res["status"] = status
            results.append(res)
    print("\n=== summary (one line per variant and size: ours before / after cuBLAS) ===")
    for res in results:
        verdict = "passed" if res.get("passed") else "NOT PASSED"
        print(res["variant"], res["precision"], res["status"], verdict)
        for row in res.get("timing", []):
            print(f"{res['variant']:>10} {res['precision']} {row['size']}^3  {row['tflops']:.1f} / "
                  f"{row['tflops_again']:.1f} TFLOP/s  cuBLAS {row['cublas_tflops']:.1f}  "
                  f"fraction {row['fraction']:.3f} / {row['fraction_again']:.3f}")


if __name__ == "__main__":
    main()
