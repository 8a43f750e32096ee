// BROKEN: the store adds a wild 64-bit offset to C (as an uninitialised or
// mis-scaled stride would), 4 TiB past the buffer: no memory is mapped there,
// so the launch dies with an illegal address (category fault). An illegal
// address poisons the CUDA context for the rest of the process, so the test
// runs this kernel on one shape in a process of its own.

#define TILE 16
#define WILD_OFFSET ((size_t)1 << 40)  // floats

extern "C" __global__ void mm_wild_store(const float* __restrict__ A,
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
        C[(size_t)row * N + col + WILD_OFFSET] = acc;  // BUG: the offset does not belong here
    }
}
