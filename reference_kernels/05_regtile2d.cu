// Rung 5, regtile2d: 2D register tiling, C = alpha * A @ B + beta * C.
// Over rung 4 (04_regtile1d.cu): an 8 x 8 outer product per thread in registers, 16 shared loads per 64 FMAs.
//
// Block tile 128 x 128 of C, K walked in slices of BK = 8, 256 threads. Each
// thread owns an 8 x 8 micro-tile of C (rows 8 * (t / 16) .., columns
// 8 * (t % 16) ..) held in 64 registers.
//
// What it teaches: per step of k a thread reads 8 values of A and 8 of B from
// shared memory into registers and does all 64 products of their outer
// product, so shared loads per FMA fall to 16/64 = 0.25 (04_regtile1d.cu: 9/8).
// The price is registers: 64 accumulators plus 16 operands per thread.
//
// Fill: the 128 x 8 slice of A and the 8 x 128 slice of B are 1024 floats
// each, four per thread, walked linearly so consecutive threads read
// consecutive addresses.
// Any M, N, K >= 1: out-of-range elements of a slice are loaded as zero and
// only in-range outputs are stored. beta == 0 means C is not read (it may
// hold NaN), the BLAS convention.

#define BM 128
#define BN 128
#define BK 8
#define TM 8
#define TN 8
#define NTHREADS ((BM / TM) * (BN / TN))  // 256

extern "C" __global__ void __launch_bounds__(NTHREADS, 2)
gemm_regtile2d(const float* __restrict__ A, const float* __restrict__ B,
               float* __restrict__ C, int M, int N, int K,
               float alpha, float beta)
{
    if (alpha == 0.0f) {
        K = 0;  // BLAS: with alpha == 0, A and B do not affect C (C = beta * C), even if they hold NaN
    }
    __shared__ float As[BM * BK];  // row-major: BM rows of BK
    __shared__ float Bs[BK * BN];  // row-major: BK rows of BN

    const int tid = threadIdx.x;
    const int blockRow = blockIdx.y * BM;
    const int blockCol = blockIdx.x * BN;

    // Output mapping: a 16 x 16 grid of 8 x 8 micro-tiles.
    const int threadRow = tid / (BN / TN);
    const int threadCol = tid % (BN / TN);

    // Fill mapping. A: 8 threads per row, 32 rows per pass, 4 passes.
    // B: 128 threads per row, 2 rows per pass, 4 passes.
    const int aRow = tid / BK;
    const int aCol = tid % BK;
    const int bRow = tid / BN;
    const int bCol = tid % BN;
    constexpr int A_ROWS_PER_PASS = NTHREADS / BK;  // 32
    constexpr int B_ROWS_PER_PASS = NTHREADS / BN;  // 2

    const int gbCol = blockCol + bCol;
    const bool bColIn = gbCol < N;

    float acc[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; ++i) {
#pragma unroll
        for (int j = 0; j < TN; ++j) {
            acc[i][j] = 0.0f;
        }
    }

    for (int k0 = 0; k0 < K; k0 += BK) {
        const int ka = k0 + aCol;
#pragma unroll
        for (int r = 0; r < BM; r += A_ROWS_PER_PASS) {
            const int gRow = blockRow + aRow + r;
            As[(aRow + r) * BK + aCol] =
                (gRow < M && ka < K) ? A[static_cast<size_t>(gRow) * K + ka] : 0.0f;
        }
#pragma unroll
        for (int r = 0; r < BK; r += B_ROWS_PER_PASS) {
            const int kb = k0 + bRow + r;
            Bs[(bRow + r) * BN + bCol] =
                (bColIn && kb < K) ? B[static_cast<size_t>(kb) * N + gbCol] : 0.0f;
        }
        __syncthreads();

#pragma unroll
        for (int p = 0; p < BK; ++p) {
            float regM[TM];
            float regN[TN];
#pragma unroll
            for (int i = 0; i < TM; ++i) {
                regM[i] = As[(threadRow * TM + i) * BK + p];
            }
#pragma unroll
            for (int j = 0; j < TN; ++j) {
                regN[j] = Bs[p * BN + threadCol * TN + j];
            }
#pragma unroll
            for (int i = 0; i < TM; ++i) {
#pragma unroll
                for (int j = 0; j < TN; ++j) {
                    acc[i][j] += regM[i] * regN[j];
                }
            }
        }
        __syncthreads();
    }

    // Epilogue: C = alpha * acc + beta * C, C read only when beta != 0.
    const bool readC = beta != 0.0f;
#pragma unroll
    for (int i = 0; i < TM; ++i) {
        const int row = blockRow + threadRow * TM + i;
        if (row < M) {
            float* c = C + static_cast<size_t>(row) * N;
#pragma unroll
            for (int j = 0; j < TN; ++j) {
                const int col = blockCol + threadCol * TN + j;
                if (col < N) {
                    c[col] = readC ? fmaf(beta, c[col], alpha * acc[i][j]) : alpha * acc[i][j];
                }
            }
        }
    }
}
