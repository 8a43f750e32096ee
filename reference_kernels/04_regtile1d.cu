// Rung 4, regtile1d: 1D register tiling.
// Over rung 3 (03_tiled.cu): 8 outputs per thread in a column, so one B value read from shared memory feeds 8 FMAs.
//
// Block tile 64 x 64 of C, K walked in slices of BK = 8, 512 threads. Thread t
// owns a column of TM = 8 outputs: column t % 64, rows 8 * (t / 64) .. +7,
// kept in eight registers.
//
// What it teaches: in the inner loop a thread reads one value of B from
// shared memory and reuses it for eight multiply-adds (one per output of its
// column), so shared loads per FMA fall from 2 (03_tiled.cu) to 9/8. Fewer
// threads each doing more work is the start of every fast GEMM.
//
// Fill: the 64 x 8 slice of A and the 8 x 64 slice of B are 512 floats each,
// one per thread; consecutive threads read consecutive addresses.
// Any M, N, K >= 1: out-of-range elements of a slice are loaded as zero and
// only in-range outputs are stored.

#define BM 64
#define BN 64
#define BK 8
#define TM 8
#define NTHREADS ((BM * BN) / TM)  // 512

// Two resident blocks per SM cap registers at 64 per thread, which this
// kernel fits on sm_80+. On sm_75 (1024 threads per SM) ptxas would spill at
// 64, so it gets one block per SM and the registers it wants.
#if __CUDA_ARCH__ >= 800
#define MIN_BLOCKS 2
#else
#define MIN_BLOCKS 1
#endif

extern "C" __global__ void __launch_bounds__(NTHREADS, MIN_BLOCKS)
gemm_regtile1d(const float* __restrict__ A, const float* __restrict__ B,
               float* __restrict__ C, int M, int N, int K)
{
    __shared__ float As[BM * BK];  // row-major, BM rows of BK
    __shared__ float Bs[BK * BN];  // row-major, BK rows of BN

    const int tid = threadIdx.x;
    const int blockRow = blockIdx.y * BM;
    const int blockCol = blockIdx.x * BN;

    // Output mapping: 64 columns x 8 row groups.
    const int threadCol = tid % BN;
    const int threadRow = tid / BN;  // 0..7, rows threadRow*TM .. +TM-1

    // Fill mapping (one element of each slice per thread).
    const int aRow = tid / BK;   // 0..63
    const int aCol = tid % BK;   // 0..7
    const int bRow = tid / BN;   // 0..7
    const int bCol = tid % BN;   // 0..63

    const int gaRow = blockRow + aRow;
    const int gbCol = blockCol + bCol;
    const bool aRowIn = gaRow < M;
    const bool bColIn = gbCol < N;

    float acc[TM];
#pragma unroll
    for (int i = 0; i < TM; ++i) {
        acc[i] = 0.0f;
    }

    // The two source pointers walk K (along a row of A, down a column of B);
    // they are dereferenced only while the guard says the element exists.
    const float* aSrc = A + static_cast<size_t>(aRowIn ? gaRow : 0) * K + aCol;
    const float* bSrc = B + static_cast<size_t>(bRow) * N + (bColIn ? gbCol : 0);
    const size_t bStep = static_cast<size_t>(BK) * N;
    for (int k0 = 0; k0 < K; k0 += BK) {
        As[aRow * BK + aCol] = (aRowIn && k0 + aCol < K) ? *aSrc : 0.0f;
        Bs[bRow * BN + bCol] = (bColIn && k0 + bRow < K) ? *bSrc : 0.0f;
        aSrc += BK;
        bSrc += bStep;
        __syncthreads();

        // The BK values of B this thread needs, read once and reused for
        // all TM outputs of its column.
        float b[BK];
#pragma unroll
        for (int p = 0; p < BK; ++p) {
            b[p] = Bs[p * BN + threadCol];
        }
#pragma unroll
        for (int i = 0; i < TM; ++i) {
            const float* aRowS = &As[(threadRow * TM + i) * BK];  // same for the whole warp
#pragma unroll
            for (int p = 0; p < BK; ++p) {
                acc[i] += aRowS[p] * b[p];
            }
        }
        __syncthreads();
    }

    const int col = blockCol + threadCol;
    if (col < N) {
#pragma unroll
        for (int i = 0; i < TM; ++i) {
            const int row = blockRow + threadRow * TM + i;
            if (row < M) {
                C[static_cast<size_t>(row) * N + col] = acc[i];
            }
        }
    }
}
