// BROKEN: the kernel writes through its A pointer: when done, thread (0, 0) of
// block (0, 0) "clears" A[0][0] as if it were scratch space. A is not declared
// const, so the compiler could not object. (Other blocks may still read A[0][0]
// after that, so C can be wrong too; the guards check reports the write.)

#define TILE 16

extern "C" __global__ void mm_writes_into_a(float* __restrict__ A,  // BUG: should be const float*
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
        C[(size_t)row * N + col] = acc;
    }
    if (row == 0 && col == 0) {
        A[0] = 0.0f;  // BUG: a GEMM kernel must never write its inputs
    }
}
