// UNTRUSTED: healthy.cu, except that when M == 1 every result is stored 32 TiB past the start
// of C (a skinny-matrix path gone wrong): an illegal memory access at every shape with M == 1
// (exact 1x1x1, 1x4096x4096, ..., coverage and guards at 1x1x1), right everywhere else. It
// must earn every check it passes: a kernel that faults only at some shapes is never cut off
// (pytest_gemm/checks/hangs.py), each fault costing only its own check.

#define TILE 16
#define WILD_OFFSET ((size_t)1 << 43)  // floats: 2**45 bytes = 32 TiB

extern "C" __global__ void mm_faults_at_m1(const float* __restrict__ A,
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
        As[ty][tx] = (row < M && ka < K) ? A[(size_t)row * K + ka] : 0.0f;
        Bs[ty][tx] = (kb < K && col < N) ? B[(size_t)kb * N + col] : 0.0f;
        __syncthreads();
        for (int p = 0; p < TILE; ++p) {
            acc += As[ty][p] * Bs[p][tx];
        }
        __syncthreads();
    }
    if (row < M && col < N) {
        C[(size_t)row * N + col + (M == 1 ? WILD_OFFSET : 0)] = acc;  // UNTRUSTED: far outside C when M == 1
    }
}
