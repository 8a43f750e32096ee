// UNTRUSTED: C is right, but the kernel also keeps a "scratch" copy of C's last
// row in the N floats right after C: memory it was never given (in real use,
// another array of the caller's). The guard band behind C catches it (category
// out_of_bounds_write, check guards); C itself passes the exact checks.

#define TILE 16

extern "C" __global__ void mm_writes_into_harness(const float* __restrict__ A,
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
        if (row == M - 1) {
            C[(size_t)M * N + col] = acc;  // UNTRUSTED: past the end of C
        }
    }
}
