// The merged-launch cheat of tests/launches/kernels.py: one launch computes C for several calls'
// buffers (blockIdx.z picks the call), naive loop, row-major, any M, N, K.
extern "C" __global__ void merged_gemm(const unsigned long long* as, const unsigned long long* bs,
                                       const unsigned long long* cs, int M, int N, int K) {
    const float* A = (const float*)as[blockIdx.z];
    const float* B = (const float*)bs[blockIdx.z];
    float* C = (float*)cs[blockIdx.z];
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= M || col >= N) return;
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc += A[(long long)row * K + k] * B[(long long)k * N + col];
    C[(long long)row * N + col] = acc;
}
