"""The ceiling of mma.sync on this GPU, against cuBLAS fp16 -> fp32 at 4096^3, in one process.

    python bench/mma_sync_peak.py

The Ampere tensor rung (mma-fp16, mma.sync.m16n8k16) cannot run faster than the tensor cores
accept mma.sync. This kernel issues nothing else: every warp runs CHAINS independent
accumulator chains of m16n8k16 (fp16 in, fp32 accumulate) on registers, with no memory traffic,
over a grid of several blocks per SM. Its rate over cuBLAS's (timed with the suite's timer) is
the most any mma.sync kernel could reach on this card. Needs CuPy and an sm_80+ GPU.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

SOURCE = r"""
extern "C" __global__ void __launch_bounds__(256) mma_peak(float* out, int iterations) {
    float d[CHAINS][4];
    unsigned a[4], b[2];
    for (int i = 0; i < 4; ++i) a[i] = 0x3C003C00u ^ (threadIdx.x * (i + 1));  // fp16 pairs near 1
    for (int i = 0; i < 2; ++i) b[i] = 0x3C003C00u ^ (threadIdx.x * (i + 7));
#pragma unroll
    for (int c = 0; c < CHAINS; ++c)
#pragma unroll
        for (int i = 0; i < 4; ++i) d[c][i] = 0.0f;
    for (int it = 0; it < iterations; ++it) {
#pragma unroll
        for (int c = 0; c < CHAINS; ++c)
            asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                         : "+f"(d[c][0]), "+f"(d[c][1]), "+f"(d[c][2]), "+f"(d[c][3])
                         : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
    }
    float s = 0.0f;
#pragma unroll
    for (int c = 0; c < CHAINS; ++c) s += d[c][0] + d[c][1] + d[c][2] + d[c][3];
    out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}
"""


def main() -> None:
    argparse.ArgumentParser(description=__doc__.split("\n", 1)[0]).parse_args()
    import cupy  # imported here, not at the top: --help needs no CUDA

    from pytest_gemm.measure.cublas import cublas_fp16
    from pytest_gemm.measure.timing import time_gpu

    props = cupy.cuda.runtime.getDeviceProperties(0)
    sms, l2 = int(props["multiProcessorCount"]), int(props["l2CacheSize"])
    size = 4096
    a = cupy.random.default_rng(1).standard_normal((size, size), dtype=cupy.float32).astype(cupy.float16)
    b = cupy.random.default_rng(2).standard_normal((size, size), dtype=cupy.float32).astype(cupy.float16)
    c = cupy.empty((size, size), cupy.float32)
    base = time_gpu(lambda: cublas_fp16.fn(a, b, c), flops=2.0 * size ** 3, l2_bytes=l2)
    print(f"cuBLAS fp16 4096^3: {base.tflops:.1f} TFLOP/s", flush=True)
    iterations = 4096
    for chains in (4, 8):
        for blocks_per_sm in (1, 2, 4):
            kernel = cupy.RawKernel(SOURCE, "mma_peak", options=(f"-DCHAINS={chains}",))
            grid = sms * blocks_per_sm
            out = cupy.empty(grid * 256, cupy.float32)
            flops = 2.0 * 16 * 8 * 16 * chains * iterations * (grid * 256 // 32)
            t = time_gpu(lambda: kernel((grid,), (256,), (out, cupy.int32(iterations))), flops=flops)
            print(f"mma.sync m16n8k16 f32.f16: {chains} chains/warp, {blocks_per_sm} x 8 warps/SM: "
                  f"{t.tflops:.1f} TFLOP/s = {t.tflops / base.tflops:.3f} of cuBLAS fp16", flush=True)


if __name__ == "__main__":
    main()
