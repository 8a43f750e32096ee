// Micro-benchmarks for the measured roofs (pytest_gemm/roofs.py).
//
// gemm_roof_fma: the FP32 FMA roof. Every thread runs CHAINS independent
// chains x = x * a + b, UNROLL rounds per loop iteration, `iters` iterations,
// so the FMA pipes never wait on a result: the rate is bounded by the FMA
// throughput alone. a and b are kernel arguments (nothing can be folded at
// compile time), FMAs are never merged or reassociated (no fast math), and the
// chains are summed and stored once so none of them is dead code. The store is
// 4 bytes per thread, nothing against the arithmetic.
//
// FLOPs per thread: 2 * CHAINS * UNROLL * iters (roofs.fma_flops).
//
// Parameters come in as -D options (roofs.py passes the same CHAINS and UNROLL
// it uses to count FLOPs).

#ifndef CHAINS
#define CHAINS 8
#endif
#ifndef UNROLL
#define UNROLL 16
#endif

extern "C" __global__ void gemm_roof_fma(float* __restrict__ out, float a, float b, int iters) {
    const int tid = blockIdx.x * blockDim.x + threadIdx.x;
    float x[CHAINS];
#pragma unroll
    for (int c = 0; c < CHAINS; ++c) {
        x[c] = (float)(tid + c) * 1.0e-7f;
    }
    for (int i = 0; i < iters; ++i) {
#pragma unroll
        for (int r = 0; r < UNROLL; ++r) {
#pragma unroll
            for (int c = 0; c < CHAINS; ++c) {
                x[c] = fmaf(x[c], a, b);
            }
        }
    }
    float sum = 0.0f;
#pragma unroll
    for (int c = 0; c < CHAINS; ++c) {
        sum += x[c];
    }
    out[tid] = sum;
}
