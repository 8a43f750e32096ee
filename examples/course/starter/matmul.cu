// Starter kernel: C (M x N) = A (M x K) @ B (K x N), row-major float32.
// Correct for every M, N, K >= 1, but slow: every thread reads a whole row of A and
// a whole column of B from global memory. Your job: make it fast and keep it exact.
// One thread computes one element of C: threadIdx.x walks columns (coalesced loads of B
// and stores of C), threadIdx.y walks rows. kernel.py launches (16, 16) threads per block
// and ceil(N/16) x ceil(M/16) blocks; change block/tile there when you change the mapping.

extern "C" __global__ void matmul(const float* __restrict__ A, const float* __restrict__ B,
                                  float* __restrict__ C, int M, int N, int K) {
    const int row = blockIdx.y * blockDim.y + threadIdx.y;
    const int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= M || col >= N) return;  // the last blocks overhang the matrix: guard them
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc += A[row * K + k] * B[k * N + col];
    C[row * N + col] = acc;
}
