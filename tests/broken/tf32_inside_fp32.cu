// BROKEN: declared fp32, but A and B are rounded to TF32 (10 explicit mantissa
// bits, as a tensor core's TF32 mode does) before they are multiplied; the
// sum stays fp32. The error looks like TF32, not fp32: precision_too_low on
// random inputs. Small integer inputs (|x| <= 2048) survive the rounding, so
// the exact check passes whenever K >= 4.
//
// The rounding is done on the bits (round to nearest even, then keep the top
// 19 bits), as pytest_gemm.precision.round_to_tf32 models it, so this compiles
// for sm_75 too; plain truncation (mask only) would double the error and bias it.

#define TILE 16

__device__ __forceinline__ float round_to_tf32(float x)
{
    unsigned u = __float_as_uint(x);
    u = (u + 0xFFFu + ((u >> 13) & 1u)) & 0xFFFFE000u;
    return __uint_as_float(u);
}

extern "C" __global__ void mm_tf32_inside_fp32(const float* __restrict__ A,
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

    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += TILE) {
        const int ka = k0 + tx;
        const int kb = k0 + ty;
        // BUG: inputs rounded to TF32 in a kernel that declares fp32
        As[ty][tx] = round_to_tf32((row < M && ka < K) ? A[(size_t)row * K + ka] : 0.0f);
        Bs[ty][tx] = round_to_tf32((kb < K && col < N) ? B[(size_t)kb * N + col] : 0.0f);
        __syncthreads();
        for (int p = 0; p < TILE; ++p) {
            acc += As[ty][p] * Bs[p][tx];
        }
        __syncthreads();
    }
    if (row < M && col < N) {
        C[(size_t)row * N + col] = acc;
    }
}
