// A two-kernel split-K GEMM (tests/launches/kernels.py): splitk_partial<TILE> writes the partial
// products of each K half into a workspace (2 x M x N), splitk_reduce adds the halves into C.
template <int TILE>
__global__ void splitk_partial(const float* A, const float* B, float* work, int M, int N, int K) {
    int row = blockIdx.y * TILE + threadIdx.y;
    int col = blockIdx.x * TILE + threadIdx.x;
    int half = blockIdx.z;
    int k0 = half * ((K + 1) / 2), k1 = min(K, k0 + (K + 1) / 2);
    if (row >= M || col >= N) return;
    float acc = 0.0f;
    for (int k = k0; k < k1; ++k) acc += A[(long long)row * K + k] * B[(long long)k * N + col];
    work[(long long)half * M * N + (long long)row * N + col] = acc;
}

extern "C" __global__ void splitk_reduce(const float* work, float* C, long long count) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < count) C[i] = work[i] + work[count + i];
}
