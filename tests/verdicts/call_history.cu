// Kernels whose output depends on state kept in __device__ memory between launches. Each counts
// its launches with the last-block-done pattern: every block reads the counter when it starts,
// and the last block to finish (after all the others have read it) advances it, so every block
// of one launch sees the same value and a replay with a fresh module sees the same sequence.
//
// mm_counter_skips_last_row: 16x16 tiles; on every second launch the last row of C is not
//   stored. Launches on the same inputs differ, but not by chance: replayed with a fresh call
//   history they differ the same way, call for call: unwritten_output ("row M-1 (the last one)
//   was left unwritten on calls 2 and 4"), not nondeterministic.
// mm_persistent: a persistent kernel (one or two blocks per SM, from the device the grid
//   callable receives) that takes 16x16 tiles from a tile counter in __device__ memory.
//   -DRESET_COUNTER: the last block resets the counter for the next launch (correct).
//   Without it the counter is never reset: the first launch computes every tile, later ones
//   find the counter past their last tile and write nothing (unwritten_output).

#define TILE 16

__device__ unsigned int launches;
__device__ unsigned int finished;

extern "C" __global__ void mm_counter_skips_last_row(const float* __restrict__ A,
                                                     const float* __restrict__ B,
                                                     float* __restrict__ C,
                                                     int M, int N, int K)
{
    __shared__ float As[TILE][TILE];
    __shared__ float Bs[TILE][TILE];

    const unsigned int call = *(volatile unsigned int*)&launches;
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
    const bool skip = (call & 1u) && row == M - 1;  // BUG: behaviour follows the launch count
    if (row < M && col < N && !skip) {
        C[(size_t)row * N + col] = acc;
    }
    __syncthreads();
    if (tx == 0 && ty == 0) {
        __threadfence();
        if (atomicAdd(&finished, 1u) == gridDim.x * gridDim.y - 1) {  // the last block of this launch
            launches = call + 1;
            finished = 0;
            __threadfence();
        }
    }
}

__device__ unsigned int next_tile;
__device__ unsigned int blocks_done;

extern "C" __global__ void mm_persistent(const float* __restrict__ A,
                                         const float* __restrict__ B,
                                         float* __restrict__ C,
                                         int M, int N, int K)
{
    __shared__ float As[TILE][TILE];
    __shared__ float Bs[TILE][TILE];
    __shared__ unsigned int tile;

    const int tx = threadIdx.x;
    const int ty = threadIdx.y;
    const unsigned int tiles_n = (N + TILE - 1) / TILE;
    const unsigned int tiles = tiles_n * ((M + TILE - 1) / TILE);
    for (;;) {
        if (tx == 0 && ty == 0) {
            tile = atomicAdd(&next_tile, 1u);
        }
        __syncthreads();
        const unsigned int t = tile;
        if (t >= tiles) {
            break;  // every thread of the block read the same t
        }
        const int row = (int)(t / tiles_n) * TILE + ty;
        const int col = (int)(t % tiles_n) * TILE + tx;
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
        __syncthreads();  // before thread 0 takes the next tile into `tile`
    }
#if defined(RESET_COUNTER)
    if (tx == 0 && ty == 0) {
        __threadfence();
        if (atomicAdd(&blocks_done, 1u) == gridDim.x - 1) {  // every block has left the loop
            next_tile = 0;
            blocks_done = 0;
            __threadfence();
        }
    }
#endif
}
