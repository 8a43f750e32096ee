// The epilogue most GEMM tutorials write: C = alpha * acc + beta * C, read unconditionally.
// The argument order is the public SGEMM tutorials' (M, N, K, alpha, A, B, beta, C), declared
// through the signature. Variants, by -D option:
//   (none)          reads C even when beta == 0: breaks BLAS's rule, nothing else
//   -DGUARD_BETA    skips the read when beta == 0: BLAS-conformant
//   -DIGNORE_BETA   never adds beta * C: wrong whenever beta != 0
extern "C" __global__ void sgemm_naive(int M, int N, int K, float alpha, const float* A, const float* B,
                                       float beta, float* C)
{
    const int row = blockIdx.y * blockDim.y + threadIdx.y;
    const int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < M && col < N) {
        float acc = 0.0f;
        for (int k = 0; k < K; ++k) {
            acc += A[(size_t)row * K + k] * B[(size_t)k * N + col];
        }
        const size_t i = (size_t)row * N + col;
#if defined(IGNORE_BETA)
        C[i] = alpha * acc;
#elif defined(GUARD_BETA)
        C[i] = beta == 0.0f ? alpha * acc : alpha * acc + beta * C[i];
#else
        C[i] = alpha * acc + beta * C[i];
#endif
    }
}
