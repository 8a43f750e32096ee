// Rung 1, naive-rows: naive GEMM with threadIdx.x walking down the ROWS of C.
// The first rung: nothing staged, nothing reused; every rung after it adds one idea.
//
// One thread computes one element C[row][col] as a dot product read straight
// from global memory. The launch uses a square block (blockDim.x ==
// blockDim.y) whose tile of C is blockDim.x rows by blockDim.y columns, with
// blockIdx.x over column tiles and blockIdx.y over row tiles (the contract's
// tile=(rows, cols) grid).
//
// What it teaches: the 32 lanes of a warp have consecutive threadIdx.x, so
// here they own 32 consecutive ROWS of one column. Every load of A touches 32
// different rows (stride K floats) and every store of C touches 32 different
// rows (stride N floats): 32 memory transactions where one would do. Compare
// with 02_naive_coalesced.cu, which differs only in the two index lines below.
//
// Any M, N, K >= 1: threads outside C return before touching memory.

extern "C" __global__ void gemm_naive_rows(const float* __restrict__ A,
                                           const float* __restrict__ B,
                                           float* __restrict__ C,
                                           int M, int N, int K)
{
    const int row = blockIdx.y * blockDim.x + threadIdx.x;  // x -> rows (uncoalesced)
    const int col = blockIdx.x * blockDim.y + threadIdx.y;
    if (row >= M || col >= N) {
        return;
    }
    const float* a = A + static_cast<size_t>(row) * K;
    const float* b = B + col;
    float acc = 0.0f;
    for (int p = 0; p < K; ++p) {
        acc += a[p] * b[static_cast<size_t>(p) * N];
    }
    C[static_cast<size_t>(row) * N + col] = acc;
}
