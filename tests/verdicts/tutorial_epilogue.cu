// The epilogue most GEMM tutorials write: C = alpha * acc + beta * C, read unconditionally.
// The argument order is the public SGEMM tutorials' (M, N, K, alpha, A, B, beta, C), declared
// through the signature. Variants, by -D option:
//   (none)              reads C even when beta == 0, and A and B even when alpha == 0: breaks
//                       both BLAS zero rules, nothing else (beta's shows first)
//   -DGUARD_BETA        skips the read of C when beta == 0
//   -DGUARD_ALPHA       skips the K loop when alpha == 0 (C = beta * C): with GUARD_BETA, BLAS-conformant
//   -DIGNORE_BETA       never adds beta * C: wrong whenever beta != 0
//   -DFILTER_NAN        reads C at beta == 0 but replaces NaN by 0 (isnan(c) ? 0 : c): Inf still shows
//   -DFILTER_NONFINITE  reads C at beta == 0 but maps every non-finite value to 0: the BLAS result
//                       for every C, so it passes (docs/verdicts.md)
extern "C" __global__ void sgemm_naive(int M, int N, int K, float alpha, const float* A, const float* B,
                                       float beta, float* C)
{
    const int row = blockIdx.y * blockDim.y + threadIdx.y;
    const int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < M && col < N) {
        float acc = 0.0f;
#if defined(GUARD_ALPHA)
        if (alpha != 0.0f)
#endif
        for (int k = 0; k < K; ++k) {
            acc += A[(size_t)row * K + k] * B[(size_t)k * N + col];
        }
        const size_t i = (size_t)row * N + col;
#if defined(GUARD_ALPHA)
        if (alpha == 0.0f) {
            C[i] = beta == 0.0f ? 0.0f : beta * C[i];
            return;
        }
#endif
#if defined(IGNORE_BETA)
        C[i] = alpha * acc;
#elif defined(GUARD_BETA)
        C[i] = beta == 0.0f ? alpha * acc : alpha * acc + beta * C[i];
#elif defined(FILTER_NAN)
        const float c = C[i];
        C[i] = alpha * acc + beta * (isnan(c) ? 0.0f : c);
#elif defined(FILTER_NONFINITE)
        const float c = C[i];
        C[i] = alpha * acc + beta * (isfinite(c) ? c : 0.0f);
#else
        C[i] = alpha * acc + beta * C[i];
#endif
    }
}
