// Rung 2, naive-coalesced: naive GEMM with threadIdx.x walking along the COLUMNS of C.
// Over rung 1 (01_naive_rows.cu): coalescing, a warp's 32 threads touch 32 neighbouring columns.
//
// The same one-thread-one-output dot product as 01_naive_rows.cu; only the
// mapping of threads to outputs changes. blockIdx.x/threadIdx.x cover the
// columns, blockIdx.y/threadIdx.y the rows (tile = blockDim.y rows by
// blockDim.x columns).
//
// What it teaches: a warp now owns 32 consecutive COLUMNS of one row, so its
// loads of B and its stores of C are 128 contiguous bytes (one transaction),
// and its loads of A are one address broadcast to all lanes. Same arithmetic,
// several times faster: memory coalescing is the first thing to get right.
//
// Any M, N, K >= 1: threads outside C return before touching memory.

extern "C" __global__ void gemm_naive_coalesced(const float* __restrict__ A,
                                                const float* __restrict__ B,
                                                float* __restrict__ C,
                                                int M, int N, int K)
{
    const int col = blockIdx.x * blockDim.x + threadIdx.x;  // x -> columns (coalesced)
    const int row = blockIdx.y * blockDim.y + threadIdx.y;
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
