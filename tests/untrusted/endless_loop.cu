// UNTRUSTED: computes its output, then never returns: `while (true)` around a
// volatile store (volatile, so the compiler may not delete the loop as one
// without side effects). Every thread with an output spins forever; only
// ending the kernel's process stops it. The sandbox kills the process after
// --gemm-timeout seconds (category timeout) and the next check runs in a fresh
// process.

#define TILE 16

extern "C" __global__ void mm_endless_loop(const float* __restrict__ A,
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
        volatile float* out = C + (size_t)row * N + col;
        while (true) {  // UNTRUSTED: the loop has no exit
            *out = acc;
        }
    }
}
