// UNTRUSTED: computes C correctly, then stores every result 32 TiB past the
// start of C (an index scaled twice, or a stride in bytes used as elements,
// taken to the extreme): nothing is mapped there in any process, so the launch
// dies with an illegal memory access (category fault). The CUDA context of the
// kernel's process is poisoned: the sandbox reports the fault for this check
// and replaces the process, so the next check starts healthy.

#define TILE 16
#define WILD_OFFSET ((size_t)1 << 43)  // floats: 2**45 bytes = 32 TiB

extern "C" __global__ void mm_illegal_address(const float* __restrict__ A,
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
        C[(size_t)row * N + col + WILD_OFFSET] = acc;  // UNTRUSTED: far outside C
    }
}
