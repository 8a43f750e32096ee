// BROKEN: the second __syncthreads() (after the inner product loop) is missing.
//
// A warp that finishes its 16 multiply-adds goes straight on to load the NEXT
// K tile into As/Bs while slower warps of the block still read the current
// one. Each warp reads only its own rows of As but every row of Bs, so the
// slow warps pick up rows of the next B tile: wrong values whenever K > 16.
//
// On a real GPU the warps of a block run almost in step, so this race fires
// only now and then. To make it fire on every launch, each warp first does
// some "uneven work" (a clock spin of warp * DRIFT cycles, standing in for a
// divergent branch or a slow epilogue): warp 0 reloads rows 0-1 of Bs long
// before warp 7 reads them. Without the bug the spin changes nothing: the
// second barrier would hold warp 0 until every warp has finished reading.

#define TILE 16
#define DRIFT 2048  // cycles of extra work per warp index (about 1 us on an H200)

__device__ __forceinline__ void uneven_work(long long cycles)
{
    const long long start = clock64();
    while (clock64() - start < cycles) {
    }
    __threadfence_block();  // keep the compiler from hoisting the tile reads above the spin
}

extern "C" __global__ void mm_missing_sync(const float* __restrict__ A,
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
    const int warp = (ty * TILE + tx) / 32;

    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += TILE) {
        const int ka = k0 + tx;
        const int kb = k0 + ty;
        As[ty][tx] = (row < M && ka < K) ? A[(size_t)row * K + ka] : 0.0f;
        Bs[ty][tx] = (kb < K && col < N) ? B[(size_t)kb * N + col] : 0.0f;
        __syncthreads();
        uneven_work((long long)warp * DRIFT);
        for (int p = 0; p < TILE; ++p) {
            acc += As[ty][p] * Bs[p][tx];
        }
        // BUG: no __syncthreads() here: the next iteration overwrites As/Bs while other warps still read them
    }
    if (row < M && col < N) {
        C[(size_t)row * N + col] = acc;
    }
}
