// Rung 3, tiled16 and tiled32 (-DTILE=16, 32): shared-memory tiling, one output per thread.
// Over rung 2 (02_naive_coalesced.cu): data reuse, tiles of A and B staged in shared memory for the block.
//
// A block of TILE x TILE threads owns a TILE x TILE tile of C. It walks K in
// steps of TILE: the block copies a TILE x TILE tile of A and one of B into
// shared memory (one element per thread, coalesced), waits, and every thread
// runs TILE multiply-adds out of shared memory.
//
// What it teaches: each global element is now loaded once per block instead
// of once per thread, so global traffic drops by a factor of TILE; the new
// limit is two shared-memory loads per multiply-add. The two __syncthreads()
// are the whole protocol: the first makes the tile visible before anyone
// reads it, the second stops a fast thread from overwriting the tile while a
// slow one still reads it.
//
// Build with -DTILE=16 or -DTILE=32 (block = (TILE, TILE)).
// Any M, N, K >= 1: elements of a tile that fall outside A or B are loaded as
// zero (adding 0 * x changes no sum), and only in-range outputs are stored.
// Threads outside C still take part in the loads and barriers.

#ifndef TILE
#define TILE 16
#endif

extern "C" __global__ void __launch_bounds__(TILE * TILE)
gemm_tiled(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
           int M, int N, int K)
{
    __shared__ float As[TILE][TILE];
    __shared__ float Bs[TILE][TILE];

    const int tx = threadIdx.x;
    const int ty = threadIdx.y;
    const int row = blockIdx.y * TILE + ty;
    const int col = blockIdx.x * TILE + tx;
    const bool rowIn = row < M;
    const bool colIn = col < N;
    const float* a = A + static_cast<size_t>(rowIn ? row : 0) * K;

    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += TILE) {
        const int ka = k0 + tx;  // column of A this thread loads
        const int kb = k0 + ty;  // row of B this thread loads
        As[ty][tx] = (rowIn && ka < K) ? a[ka] : 0.0f;
        Bs[ty][tx] = (colIn && kb < K) ? B[static_cast<size_t>(kb) * N + col] : 0.0f;
        __syncthreads();

#pragma unroll
        for (int p = 0; p < TILE; ++p) {
            acc += As[ty][p] * Bs[p][tx];
        }
        __syncthreads();
    }

    if (rowIn && colIn) {
        C[static_cast<size_t>(row) * N + col] = acc;
    }
}
