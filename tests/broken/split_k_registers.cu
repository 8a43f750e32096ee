// CORRECT: each thread keeps 4 interleaved partial sums in registers (term k
// goes to sum k % 4) and adds them at the end as (s0 + s1) + (s2 + s3). A fixed
// order, so the same bits every launch; exact on integer inputs; within the
// fp32 bound on random ones. It must pass every check.

#define TILE 16
#define SPLIT 4

extern "C" __global__ void mm_split_k_registers(const float* __restrict__ A,
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

    float acc[SPLIT] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int k0 = 0; k0 < K; k0 += TILE) {
        const int ka = k0 + tx;
        const int kb = k0 + ty;
        As[ty][tx] = (row < M && ka < K) ? A[(size_t)row * K + ka] : 0.0f;
        Bs[ty][tx] = (kb < K && col < N) ? B[(size_t)kb * N + col] : 0.0f;
        __syncthreads();
#pragma unroll
        for (int p = 0; p < TILE; ++p) {
            acc[p % SPLIT] += As[ty][p] * Bs[p][tx];  // TILE is a multiple of SPLIT: k % 4 == p % 4
        }
        __syncthreads();
    }
    if (row < M && col < N) {
        C[(size_t)row * N + col] = (acc[0] + acc[1]) + (acc[2] + acc[3]);
    }
}
