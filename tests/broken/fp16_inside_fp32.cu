// BROKEN: declared fp32, but the shared-memory tiles are stored as __half (to
// halve shared-memory use), so every input is rounded to fp16 (11 significant
// bits) before it is multiplied. The products of two halves are exact in
// fp32 and the sum is fp32: exactly what an fp16-input kernel computes, so
// the error looks like fp16, not fp32: precision_too_low on random inputs.
// Small integer inputs (|x| <= 2048) survive the rounding, so the exact
// check passes whenever K >= 4.

#include <cuda_fp16.h>

#define TILE 16

extern "C" __global__ void mm_fp16_inside_fp32(const float* __restrict__ A,
                                               const float* __restrict__ B,
                                               float* __restrict__ C,
                                               int M, int N, int K)
{
    __shared__ __half As[TILE][TILE];  // BUG: should be float
    __shared__ __half Bs[TILE][TILE];  // BUG: should be float

    const int tx = threadIdx.x;
    const int ty = threadIdx.y;
    const int row = blockIdx.y * TILE + ty;
    const int col = blockIdx.x * TILE + tx;

    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += TILE) {
        const int ka = k0 + tx;
        const int kb = k0 + ty;
        As[ty][tx] = __float2half_rn((row < M && ka < K) ? A[(size_t)row * K + ka] : 0.0f);
        Bs[ty][tx] = __float2half_rn((kb < K && col < N) ? B[(size_t)kb * N + col] : 0.0f);
        __syncthreads();
        for (int p = 0; p < TILE; ++p) {
            acc += __half2float(As[ty][p]) * __half2float(Bs[p][tx]);
        }
        __syncthreads();
    }
    if (row < M && col < N) {
        C[(size_t)row * N + col] = acc;
    }
}
