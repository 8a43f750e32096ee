// BROKEN: the tile loads have no bounds check at all.
//
// The store is guarded, so only the K tail matters: for K not a multiple of
// 16 the last tile reads A[row][K..] (really the next row of A) and rows of B
// past its end. The harness's guard bands are 0xFF bytes, NaN as a float, so
// the over-read turns the affected outputs into NaN: wrong_values in exact.

#define TILE 16

extern "C" __global__ void mm_unguarded_loads(const float* __restrict__ A,
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
        // BUG: no bounds check: reads past the end of the row of A and past the end of B
        As[ty][tx] = A[(size_t)row * K + k0 + tx];
        Bs[ty][tx] = B[(size_t)(k0 + ty) * N + col];
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
