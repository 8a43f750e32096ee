// A naive GEMM, one thread per element of C (tests/launches/kernels.py: the CUDA-graph launcher
// captures one launch of it and replays the graph): C = alpha * A @ B + beta * C; with
// beta == 0, C is not read (BLAS: it may hold NaN).
extern "C" __global__ void graph_gemm(const float* A, const float* B, float* C, int M, int N, int K,
                                      float alpha, float beta) {
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= M || col >= N) return;
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc += A[(long long)row * K + k] * B[(long long)k * N + col];
    long long at = (long long)row * N + col;
    C[at] = beta == 0.0f ? alpha * acc : alpha * acc + beta * C[at];
}
