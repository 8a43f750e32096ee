// BROKEN: float atomics make the summation order, and so the rounding, change
// from launch to launch. Declared deterministic (the default), so the
// deterministic check must catch it.
//
// C is poisoned before each launch, so the kernel does not accumulate into C:
// each block sums into a zero-initialised 16x16 accumulator in shared memory.
// Each K tile is split four ways: thread (ty, tx) adds its 4-term partial sum
// for column tx to rows ty, ty+4, ty+8, ty+12 (mod 16), so every accumulator
// element gets four atomicAdds per tile from four different warps, in
// whatever order they arrive. On integer inputs every partial sum is exact,
// so the exact check still passes; on random inputs the last bits differ.
//
// The warps of a block run almost in step, so each warp first waits a few
// cycles drawn from the SM clock (different on every launch): that makes the
// arrival order, which would vary only now and then, vary on every launch.
// With a fixed-order reduction the wait would change nothing.

#define TILE 16
#define SPLIT 4

__device__ __forceinline__ void clock_jitter(int warp)
{
    unsigned h = (unsigned)clock64() ^ (0x9E3779B9u * (unsigned)(warp + 1));
    h *= 0x85EBCA6Bu;
    h ^= h >> 13;
    h *= 0xC2B2AE35u;
    h ^= h >> 16;
    const long long wait = h & 255u;
    const long long start = clock64();
    while (clock64() - start < wait) {
    }
}

extern "C" __global__ void mm_float_atomics(const float* __restrict__ A,
                                            const float* __restrict__ B,
                                            float* __restrict__ C,
                                            int M, int N, int K)
{
    __shared__ float As[TILE][TILE];
    __shared__ float Bs[TILE][TILE];
    __shared__ float Cs[TILE][TILE];

    const int tx = threadIdx.x;
    const int ty = threadIdx.y;
    const int row = blockIdx.y * TILE + ty;
    const int col = blockIdx.x * TILE + tx;
    const int warp = (ty * TILE + tx) / 32;

    Cs[ty][tx] = 0.0f;  // made visible by the first barrier below
    for (int k0 = 0; k0 < K; k0 += TILE) {
        const int ka = k0 + tx;
        const int kb = k0 + ty;
        As[ty][tx] = (row < M && ka < K) ? A[(size_t)row * K + ka] : 0.0f;
        Bs[ty][tx] = (kb < K && col < N) ? B[(size_t)kb * N + col] : 0.0f;
        __syncthreads();
        clock_jitter(warp);
#pragma unroll
        for (int j = 0; j < SPLIT; ++j) {
            const int r = (ty + j * (TILE / SPLIT)) % TILE;
            float part = 0.0f;
#pragma unroll
            for (int p = j * (TILE / SPLIT); p < (j + 1) * (TILE / SPLIT); ++p) {
                part += As[r][p] * Bs[p][tx];
            }
            atomicAdd(&Cs[r][tx], part);  // BUG: four warps add into Cs[r][tx] in arrival order
        }
        __syncthreads();
    }
    if (row < M && col < N) {
        C[(size_t)row * N + col] = Cs[ty][tx];
    }
}
