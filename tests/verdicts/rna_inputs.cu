// Declared fp32, but A and B are rounded to TF32 with round-half-away-from-zero, as
// cvt.rna.tf32.f32 does (CUTLASS's default float -> tfloat32_t), before they are multiplied;
// the sum stays fp32. Errors look like TF32 on random inputs, and at K <= 3 (exact inputs above
// 2**11, where odd integers are ties) the exact outputs are A@B of the rna-rounded inputs, not
// of the ties-to-even ones: precision_too_low, both ways (judges/patterns.py models all three).
// sm_80 and later use the PTX instruction; older architectures the same rounding on the bits.

#define TILE 16

__device__ __forceinline__ float round_rna_tf32(float x)
{
    unsigned u;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(u) : "f"(x));
#else
    u = __float_as_uint(x) + 0x1000u;  // half an ulp of TF32 added to the magnitude
#endif
    return __uint_as_float(u & 0xFFFFE000u);
}

extern "C" __global__ void mm_rna_inputs(const float* __restrict__ A,
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
        // BUG: inputs rounded to TF32 (ties away from zero) in a kernel that declares fp32
        As[ty][tx] = round_rna_tf32((row < M && ka < K) ? A[(size_t)row * K + ka] : 0.0f);
        Bs[ty][tx] = round_rna_tf32((kb < K && col < N) ? B[(size_t)kb * N + col] : 0.0f);
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
