// dave: a naive kernel whose store uses a 64-bit "debug" offset left over from an
// experiment: every element is written about 16 GiB past C, an illegal address
// (a fault that poisons the CUDA context of the process that launched it).

extern "C" __global__ void matmul(const float* __restrict__ A, const float* __restrict__ B,
                                  float* __restrict__ C, int M, int N, int K) {
    const int row = blockIdx.y * blockDim.y + threadIdx.y;
    const int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= M || col >= N) return;
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc += A[row * K + k] * B[k * N + col];
    const long long debug_offset = 1LL << 32;  // BUG: left in; should be 0
    C[(long long)row * N + col + debug_offset] = acc;
}
