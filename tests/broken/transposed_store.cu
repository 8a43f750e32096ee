// BROKEN: C is stored column-major, C[col*M + row], instead of C[row*N + col].
// Every element is written exactly once (the index is a permutation of 0..M*N-1),
// so nothing is unwritten and nothing outside C is touched: on square shapes the
// result is exactly the transpose of the right answer, on others a scramble.

#define TILE 16

extern "C" __global__ void mm_transposed_store(const float* __restrict__ A,
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
        C[(size_t)col * M + row] = acc;  // BUG: should be C[(size_t)row * N + col]
    }
}
