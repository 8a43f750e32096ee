// Rung 7, warptile: warp tiling, C = alpha * A @ B + beta * C.
// Over rung 6 (06_vectorized.cu): the warp as the unit of work, conflict-free shared reads, the next slice in registers.
//
// Block tile 128 x 128, K slices of BK = 16, 256 threads = 8 warps arranged
// 2 x 4 over the block tile, so each warp owns a 64 x 32 sub-tile of C. The
// 32 lanes of a warp are arranged 8 x 4 and each lane computes 2 x 2 blocks
// of 4 x 4 outputs (64 accumulators) spread over the warp tile:
//   rows  warpRow*64 + {0, 32} + laneRow*4 + 0..3
//   cols  warpCol*32 + {0, 16} + laneCol*4 + 0..3
//
// What it teaches: the micro-tile is the same 8 x 8 as 06_vectorized.cu, but the
// warp, not the thread, is the unit that owns a contiguous region. At each k a
// warp's float4 shared loads touch 8 consecutive float4 of A (lanes of one
// row group share a broadcast) and 4 consecutive float4 of B: no bank
// conflicts, where the per-thread layout of 06_vectorized.cu conflicts. The
// next K slice is fetched from global memory into registers while the
// current one is computed, so load latency hides behind the FMAs.
//
// Edges as in 06_vectorized.cu: float4 global traffic needs K % 4 == 0,
// N % 4 == 0 and 16-byte aligned A, B, C, else one float at a time; interior
// blocks load full K slices with no bounds checks; everything outside A and
// B is loaded as zero; only in-range outputs are stored. beta == 0 means C is
// not read (it may hold NaN).
// (bench/candidates/warptile.cu is this file with a -DGEMM_NO_EDGE build beside it, no edge
// handling at all: bench/edge_cost.py times the two to measure what the edges cost.)

#define BM 128
#define BN 128
#define BK 16
#define WM 64               // warp tile rows
#define WN 32               // warp tile cols
#define WARPS_N (BN / WN)   // 4 warps across, 2 down
#define NTHREADS 256
#define APAD 4              // pad of the transposed A rows (keeps float4 alignment)
#define AST (BM + APAD)     // row stride of AsT

static __device__ __forceinline__ bool aligned16(const void* p)
{
    return (reinterpret_cast<unsigned long long>(p) & 15ull) == 0;
}

// (load4_edge is also in 08_warptile_256.cu and 10_pipeline.cu: each rung is kept self-contained on
// purpose, one file a student reads top to bottom, so small helpers are copied, not shared.)
// rowPtr[col .. col+3] with zero wherever the row is out (rowIn false) or
// col + q >= limit. With vec (limit % 4 == 0, aligned rows) a float4 is
// wholly in or out, so one check covers it.
static __device__ __forceinline__ float4 load4_edge(const float* rowPtr, int col, int limit, bool rowIn, bool vec)
{
    if (vec) {
        return (rowIn && col < limit) ? *reinterpret_cast<const float4*>(rowPtr + col)
                                      : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    }
    float4 v;
    v.x = (rowIn && col + 0 < limit) ? rowPtr[col + 0] : 0.0f;
    v.y = (rowIn && col + 1 < limit) ? rowPtr[col + 1] : 0.0f;
    v.z = (rowIn && col + 2 < limit) ? rowPtr[col + 2] : 0.0f;
    v.w = (rowIn && col + 3 < limit) ? rowPtr[col + 3] : 0.0f;
    return v;
}

static __device__ __forceinline__ float blend(float acc, float old, float alpha, float beta)
{
    return fmaf(beta, old, alpha * acc);
}

// BLAS: with alpha == 0, A and B do not affect C (C = beta * C, C not read when beta == 0), even
// if they hold NaN. A path of its own, before the main one: folding it into the main loop (K = 0)
// changed that loop's register allocation and made it spill on sm_86 and sm_89.
static __device__ __noinline__ void scale_tile(float* __restrict__ C, int M, int N, int row0, int col0, float beta)
{
    for (int i = threadIdx.x; i < BM * BN; i += NTHREADS) {
        const int row = row0 + i / BN;
        const int col = col0 + i % BN;
        if (row < M && col < N) {
            float* p = C + static_cast<size_t>(row) * N + col;
            *p = beta == 0.0f ? 0.0f : beta * *p;
        }
    }
}

extern "C" __global__ void __launch_bounds__(NTHREADS, 2)
gemm_warptile(const float* __restrict__ A, const float* __restrict__ B,
              float* __restrict__ C, int M, int N, int K,
              float alpha, float beta)
{
    if (alpha == 0.0f) {
        scale_tile(C, M, N, blockIdx.y * BM, blockIdx.x * BN, beta);
        return;
    }
    __shared__ __align__(16) float AsT[BK * AST];  // transposed: AsT[k * AST + row]
    __shared__ __align__(16) float Bs[BK * BN];    // row-major:  Bs[k * BN + col]

    const int tid = threadIdx.x;
    const int lane = tid % 32;
    const int warp = tid / 32;
    const int blockRow = blockIdx.y * BM;
    const int blockCol = blockIdx.x * BN;

    // Where this lane's outputs sit inside the block tile.
    const int rowOff = (warp / WARPS_N) * WM + (lane / 4) * 4;  // + {0, 32} + 0..3
    const int colOff = (warp % WARPS_N) * WN + (lane % 4) * 4;  // + {0, 16} + 0..3

    // Fill mapping: two float4 of A (rows aRow, aRow + 64; k aK..aK+3) and two
    // float4 of B (k rows bRow, bRow + 8; columns bCol..bCol+3) per slice.
    const int aRow = tid / (BK / 4);        // 0..63
    const int aK = (tid % (BK / 4)) * 4;    // 0, 4, 8, 12
    const int bRow = tid / (BN / 4);        // 0..7
    const int bCol = (tid % (BN / 4)) * 4;  // 0..124

    const bool vec = (K % 4 == 0) && (N % 4 == 0) && aligned16(A) && aligned16(B) && aligned16(C);
    const bool fullMN = vec && blockRow + BM <= M && blockCol + BN <= N;

    const int gaRow0 = blockRow + aRow;
    const int gaRow1 = gaRow0 + 64;
    const bool aIn0 = gaRow0 < M;
    const bool aIn1 = gaRow1 < M;
    const float* aPtr0 = A + static_cast<size_t>(aIn0 ? gaRow0 : 0) * K;
    const float* aPtr1 = A + static_cast<size_t>(aIn1 ? gaRow1 : 0) * K;
    const int gbCol = blockCol + bCol;

    float4 aReg[2];
    float4 bReg[2];
    // Fetch the K slice starting at k0 into aReg / bReg.
    auto fetch = [&](int k0) {
        if (fullMN && k0 + BK <= K) {
            aReg[0] = *reinterpret_cast<const float4*>(aPtr0 + k0 + aK);
            aReg[1] = *reinterpret_cast<const float4*>(aPtr1 + k0 + aK);
            bReg[0] = *reinterpret_cast<const float4*>(B + static_cast<size_t>(k0 + bRow) * N + gbCol);
            bReg[1] = *reinterpret_cast<const float4*>(B + static_cast<size_t>(k0 + bRow + 8) * N + gbCol);
        } else {
            aReg[0] = load4_edge(aPtr0, k0 + aK, K, aIn0, vec);
            aReg[1] = load4_edge(aPtr1, k0 + aK, K, aIn1, vec);
            const int kb0 = k0 + bRow;
            const int kb1 = kb0 + 8;
            const bool kIn0 = kb0 < K;
            const bool kIn1 = kb1 < K;
            bReg[0] = load4_edge(B + static_cast<size_t>(kIn0 ? kb0 : 0) * N, gbCol, N, kIn0, vec);
            bReg[1] = load4_edge(B + static_cast<size_t>(kIn1 ? kb1 : 0) * N, gbCol, N, kIn1, vec);
        }
    };

    float acc[8][8];
#pragma unroll
    for (int i = 0; i < 8; ++i) {
#pragma unroll
        for (int j = 0; j < 8; ++j) {
            acc[i][j] = 0.0f;
        }
    }

    fetch(0);
    for (int k0 = 0; k0 < K; k0 += BK) {
        // Registers -> shared (A transposed). The barrier at the end of the
        // previous iteration guarantees nobody still reads these tiles.
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int r = aRow + h * 64;
            AsT[(aK + 0) * AST + r] = aReg[h].x;
            AsT[(aK + 1) * AST + r] = aReg[h].y;
            AsT[(aK + 2) * AST + r] = aReg[h].z;
            AsT[(aK + 3) * AST + r] = aReg[h].w;
            *reinterpret_cast<float4*>(&Bs[(bRow + h * 8) * BN + bCol]) = bReg[h];
        }
        __syncthreads();

        // Start the next slice's global loads; they complete during the FMAs.
        if (k0 + BK < K) {
            fetch(k0 + BK);
        }

#pragma unroll
        for (int p = 0; p < BK; ++p) {
            const float4 a0 = *reinterpret_cast<const float4*>(&AsT[p * AST + rowOff]);
            const float4 a1 = *reinterpret_cast<const float4*>(&AsT[p * AST + rowOff + 32]);
            const float4 b0 = *reinterpret_cast<const float4*>(&Bs[p * BN + colOff]);
            const float4 b1 = *reinterpret_cast<const float4*>(&Bs[p * BN + colOff + 16]);
            const float regM[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
            const float regN[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
#pragma unroll
            for (int i = 0; i < 8; ++i) {
#pragma unroll
                for (int j = 0; j < 8; ++j) {
                    acc[i][j] += regM[i] * regN[j];
                }
            }
        }
        __syncthreads();
    }

    // Epilogue. acc[i][j]: i = mi*4 + r (row rowOff + mi*32 + r),
    //                      j = ni*4 + c (col colOff + ni*16 + c).
    const bool readC = beta != 0.0f;
#pragma unroll
    for (int i = 0; i < 8; ++i) {
        const int row = blockRow + rowOff + (i / 4) * 32 + (i % 4);
        float* cRow = C + static_cast<size_t>(row < M ? row : 0) * N;
#pragma unroll
        for (int ni = 0; ni < 2; ++ni) {
            const int col = blockCol + colOff + ni * 16;
            const float* a = &acc[i][ni * 4];
            if (fullMN) {
                float4* cp = reinterpret_cast<float4*>(cRow + col);
                float4 v;
                if (readC) {
                    const float4 old = *cp;
                    v = make_float4(blend(a[0], old.x, alpha, beta), blend(a[1], old.y, alpha, beta),
                                    blend(a[2], old.z, alpha, beta), blend(a[3], old.w, alpha, beta));
                } else {
                    v = make_float4(alpha * a[0], alpha * a[1], alpha * a[2], alpha * a[3]);
                }
                *cp = v;
            } else if (row < M) {
#pragma unroll
                for (int c = 0; c < 4; ++c) {
                    if (col + c < N) {
                        cRow[col + c] = readC ? blend(a[c], cRow[col + c], alpha, beta) : alpha * a[c];
                    }
                }
            }
        }
    }
}
