// Split-K: blockIdx.z takes K slice z; each thread sums its slice for one element of C.
//   gemm_split_k_atomic: adds the slice's partial sum into C with float atomicAdd (C zeroed
//     first by the launcher): the order of the additions, and so the rounding, varies.
//   gemm_split_k_partials + gemm_split_k_reduce: partial sums to a workspace, then summed
//     in slice order: the same bits every launch.
extern "C" __global__ void gemm_split_k_atomic(const float* A, const float* B, float* C, int M, int N, int K,
                                               int slice)
{
    const int row = blockIdx.y * blockDim.y + threadIdx.y;
    const int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= M || col >= N) return;
    const int k0 = blockIdx.z * slice;
    const int k1 = min(K, k0 + slice);
    float acc = 0.0f;
    for (int k = k0; k < k1; ++k) acc += A[(size_t)row * K + k] * B[(size_t)k * N + col];
    atomicAdd(&C[(size_t)row * N + col], acc);
}

extern "C" __global__ void gemm_split_k_partials(const float* A, const float* B, float* W, int M, int N, int K,
                                                 int slice)
{
    const int row = blockIdx.y * blockDim.y + threadIdx.y;
    const int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= M || col >= N) return;
    const int k0 = blockIdx.z * slice;
    const int k1 = min(K, k0 + slice);
    float acc = 0.0f;
    for (int k = k0; k < k1; ++k) acc += A[(size_t)row * K + k] * B[(size_t)k * N + col];
    W[((size_t)blockIdx.z * M + row) * N + col] = acc;
}

extern "C" __global__ void gemm_split_k_reduce(const float* W, float* C, int M, int N, int slices)
{
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)M * N) return;
    float acc = 0.0f;
    for (int s = 0; s < slices; ++s) acc += W[(size_t)s * M * N + i];
    C[i] = acc;
}
