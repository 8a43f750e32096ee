// Declared fp32, but on a "deep K" path (K >= DEEP_K, 2048) each thread adds the 16 products of
// a K tile in a half-precision partial sum before adding it to its fp32 accumulator (a speed
// trick: half adds are cheap). Below DEEP_K it is the correct 16x16 tiled kernel. The error is
// a lower precision's rounding that appears only from K = 2048 on: precision_too_low, naming
// that K (docs/verdicts.md), not wrong_values. By -D option:
//   -DSUMS_FP16   the partial sums in fp16 (11 significant bits)
//   -DSUMS_BF16   the partial sums in bf16 (8 significant bits)
// Each add is done in float and rounded to the half type, so it compiles for every architecture.

#include <cuda_fp16.h>
#include <cuda_bf16.h>

#define TILE 16
#define DEEP_K 2048

__device__ __forceinline__ float to_half_precision(float x)
{
#if defined(SUMS_BF16)
    return __bfloat162float(__float2bfloat16_rn(x));
#else
    return __half2float(__float2half_rn(x));
#endif
}

extern "C" __global__ void mm_deep_k_half_sums(const float* __restrict__ A,
                                               const float* __restrict__ B,
                                               float* __restrict__ C,
                                               int M, int N, int K)
{
    __shared__ float As[TILE][TILE];
    __shared__ float Bs[TILE][TILE];

    const int tx = threadIdx.x;
    const int ty = threadIdx.y;
    const int row = blockIdx.y * TILE + ty;
    const int col = blockIdx.x * TILE + tx;
    const bool deep = K >= DEEP_K;

    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += TILE) {
        const int ka = k0 + tx;
        const int kb = k0 + ty;
        As[ty][tx] = (row < M && ka < K) ? A[(size_t)row * K + ka] : 0.0f;
        Bs[ty][tx] = (kb < K && col < N) ? B[(size_t)kb * N + col] : 0.0f;
        __syncthreads();
        if (deep) {
            float part = 0.0f;  // BUG: held in half precision, rounded after every add
            for (int p = 0; p < TILE; ++p) {
                part = to_half_precision(part + to_half_precision(As[ty][p] * Bs[p][tx]));
            }
            acc += part;
        } else {
            for (int p = 0; p < TILE; ++p) {
                acc += As[ty][p] * Bs[p][tx];
            }
        }
        __syncthreads();
    }
    if (row < M && col < N) {
        C[(size_t)row * N + col] = acc;
    }
}
