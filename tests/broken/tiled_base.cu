// The correct kernel every broken one in this folder starts from.
//
// 16x16 shared-memory tiles, one output per thread, any M, N, K >= 1:
// tile slots outside A or B are loaded as 0 (0 * x adds nothing), only
// in-range outputs are stored, and two barriers per K step (one before the
// tile is read, one before it is overwritten). Each broken kernel is a copy of
// this file with ONE thing changed, marked "BUG:".
//
// short_grid uses this file unchanged: its bug is in the launch grid it
// declares (kernels.py), not in the CUDA code.

#define TILE 16

extern "C" __global__ void mm_tiled_base(const float* __restrict__ A,
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
        const int ka = k0 + tx;  // column of A this thread loads
        const int kb = k0 + ty;  // row of B this thread loads
        As[ty][tx] = (row < M && ka < K) ? A[(size_t)row * K + ka] : 0.0f;
        Bs[ty][tx] = (kb < K && col < N) ? B[(size_t)kb * N + col] : 0.0f;
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
