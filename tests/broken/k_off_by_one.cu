// BROKEN: the K loop stops one step early: the last term, A[row][K-1] * B[K-1][col],
// is never added. Wrong values on every shape (all zeros when K = 1).

#define TILE 16

extern "C" __global__ void mm_k_off_by_one(const float* __restrict__ A,
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
    const int kEnd = K - 1;  // BUG: should be K

    float acc = 0.0f;
    for (int k0 = 0; k0 < kEnd; k0 += TILE) {
        const int ka = k0 + tx;
        const int kb = k0 + ty;
        As[ty][tx] = (row < M && ka < kEnd) ? A[(size_t)row * K + ka] : 0.0f;
        Bs[ty][tx] = (kb < kEnd && col < N) ? B[(size_t)kb * N + col] : 0.0f;
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
