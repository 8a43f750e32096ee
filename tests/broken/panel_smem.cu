// BROKEN (for large K): each block stages its whole 16 x K panel of A and K x 16
// panel of B in dynamic shared memory (declared as 2 * 16 * K * 4 bytes in
// kernels.py). Correct while that fits (K <= ~1800 on an H100/H200, whose
// blocks may opt in to 227 KB), but at K = 65536 it asks for 8 MiB and the
// launch is refused (category launch_error).

#define TILE 16

extern "C" __global__ void mm_panel_smem(const float* __restrict__ A,
                                         const float* __restrict__ B,
                                         float* __restrict__ C,
                                         int M, int N, int K)
{
    extern __shared__ float smem[];
    float* Ap = smem;             // Ap[r * K + k] = A[blockRow + r][k]
    float* Bp = smem + TILE * K;  // Bp[k * TILE + c] = B[k][blockCol + c]

    const int tx = threadIdx.x;
    const int ty = threadIdx.y;
    const int row0 = blockIdx.y * TILE;
    const int col0 = blockIdx.x * TILE;
    const int row = row0 + ty;
    const int col = col0 + tx;

    for (int i = ty * TILE + tx; i < TILE * K; i += TILE * TILE) {
        const int ar = row0 + i / K, ak = i % K;
        Ap[i] = ar < M ? A[(size_t)ar * K + ak] : 0.0f;
        const int bk = i / TILE, bc = col0 + i % TILE;
        Bp[i] = bc < N ? B[(size_t)bk * N + bc] : 0.0f;
    }
    __syncthreads();

    float acc = 0.0f;
    for (int k = 0; k < K; ++k) {
        acc += Ap[ty * K + k] * Bp[k * TILE + tx];
    }
    if (row < M && col < N) {
        C[(size_t)row * N + col] = acc;
    }
}
