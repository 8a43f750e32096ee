// Rung 8, warptile-256: FP32 SIMT GEMM, FFMA only (no
// tensor cores, no TF32). C = A @ B, all row-major float32. Any M, N, K >= 1.
// Over rung 7 (07_warptile.cu): more work per thread (8 x 16 outputs a lane) and a double-buffered
// shared tile, one barrier per K slice. Its candidates (other tiles, a cp.async fill) are in bench/candidates.
//
// What the rung adds to 07_warptile.cu: the same warp and lane layout (warps 2 x 4, lanes 8 x 4,
// 4 x 4 blocks of outputs 32 rows and 16 columns apart), widened to 8 x 16 outputs per lane on a
// 128 x 256 block tile (cuBLAS's own work per thread on this card), and a shared tile in two
// buffers, so one barrier per K slice instead of two: per lane and k, 6 float4 shared loads feed
// 128 FFMA (warptile: 4 per 64), and the FFMA share of the loop rises from 0.94 to 0.955. At
// 239 registers only 8 warps fit on an SM; the 128 independent accumulators, not more warps,
// hide the latency. Measured on an H200 at 0.97 of cuBLAS FP32 (warptile 0.905), NOTES.md.
//
// Shared memory is dynamic; its size is exported as gemm_sgemm_smem_bytes.
//
// Threads and outputs. 256 threads = 8 warps arranged 2 (rows) x 4 (columns),
// warp tile WM x WN = 64 x (BN / 4). The 32 lanes of a warp are 8 (rows) x 4
// (columns): laneRow = lane / 4, laneCol = lane % 4. Each lane owns TM x TN =
// 8 x (WN / 4) outputs (8 x 8 for BN = 128, 8 x 16 for BN = 256), as 4-wide
// column groups j = 0 .. TN/4-1 at columns
//     colOff + 16 j + 0..3,    colOff = warpCol * WN + laneCol * 4
// and 8 rows (A stored transposed, AsT[k][m], as 07_warptile.cu does):
//   rows rowOff + 32 i + 0..3, i = 0, 1,
//     rowOff = warpRow * 64 + laneRow * 4 (07_warptile.cu's layout). At each k a
//     lane reads two float4 of AsT row k (8 distinct float4 per warp, 128
//     contiguous bytes) and TN/4 float4 of Bs row k (4 distinct per instruction).
//
// Per lane and k: TM + TN = 16 or 24 shared floats for TM x TN = 64 or 128 FFMA.
//
// The fill (register prefetch into a double-buffered shared tile):
//   iteration kt stores slice kt from registers into shared buffer
//     kt % 2 (A transposed), one __syncthreads, starts the global loads of slice
//     kt+1 into registers (float4, coalesced) and computes slice kt while they
//     fly. One barrier per slice: the store into buffer kt % 2 is safe because
//     its last readers (slice kt-2) finished before the barrier of iteration kt-1.
// Edges: 16-byte global accesses (float4 loads and stores) need
// K % 4 == 0, N % 4 == 0 and 16-byte aligned A, B (and C for the stores);
// chunks outside A or B are zero (a zero register); otherwise each float goes
// on its own (a checked scalar load). Blocks wholly inside C take a path with no bounds
// checks for every full K slice. Only in-range outputs are stored.


#define SG_THREADS 256

// Constants are enumerators, not constexpr variables: NVRTC would emit those as unused globals.
enum : int {
    BM = 128,              // block tile of C: 128 x 256
    BN = 256,
    BK = 16,               // K slice
    NTHREADS = SG_THREADS,
    WARPS_N = 4,
    WM = BM / 2,           // 64
    WN = BN / WARPS_N,     // 32 or 64
    TM = 8,                // rows per lane
    TN = WN / 4,           // columns per lane: 8 or 16
    TNV = TN / 4,          // float4 column groups per lane
};
enum : int {
    STAGES = 2,
    AST = BM + 4,          // row pitch of the transposed A tile AsT[BK][AST]
    A_STAGE = BK * AST,    // floats
};
enum : int {
    B_STAGE = BK * BN,     // Bs[BK][BN], no pad: reads are 4 distinct float4 per instruction
    SMEM_BYTES = STAGES * (A_STAGE + B_STAGE) * 4,
};

// Fill mapping: 16-byte chunks (4 floats), chunk c = tid + i * NTHREADS.
enum : int {
    A_CHUNKS_ROW = BK / 4,                 // per row of the A tile (along k)
    B_CHUNKS_ROW = BN / 4,                 // per k row of the B tile
    A_PASS = NTHREADS / A_CHUNKS_ROW,      // A rows one pass of all threads covers
    B_PASS = NTHREADS / B_CHUNKS_ROW,      // B k rows one pass covers
    A_CHUNKS = BM / A_PASS,                // chunks per thread per slice
    B_CHUNKS = BK / B_PASS,
};

static_assert(NTHREADS % A_CHUNKS_ROW == 0 && BM % A_PASS == 0 && A_CHUNKS >= 1, "A chunks must spread evenly");
static_assert(NTHREADS % B_CHUNKS_ROW == 0 && BK % B_PASS == 0 && B_CHUNKS >= 1, "B chunks must spread evenly");


// Exported so a test can compare it with the declaration's shared_mem.
extern "C" __constant__ int gemm_sgemm_smem_bytes = SMEM_BYTES;

static __device__ __forceinline__ bool aligned16(const void* p)
{
    return (reinterpret_cast<unsigned long long>(p) & 15ull) == 0;
}

// (load4_edge as in 07_warptile.cu and 10_pipeline.cu: each rung is kept self-contained on purpose,
// one file a student reads top to bottom, so small helpers are copied, not shared.)
// rowPtr[col .. col+3], zero where the row is out or col + q >= limit; with
// vec (limit % 4 == 0, aligned rows) the float4 is wholly in or out.
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

extern "C" __global__ void __launch_bounds__(SG_THREADS, 1)
gemm_sgemm(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C, int M, int N, int K)
{
    extern __shared__ __align__(128) float smem[];
    float* As = smem;                      // STAGES x A_STAGE
    float* Bs = smem + STAGES * A_STAGE;   // STAGES x [BK][BN]

    const int tid = threadIdx.x;
    const int lane = tid & 31;
    const int warp = tid >> 5;
    const int laneRow = lane >> 2;
    const int laneCol = lane & 3;
    const int warpRow = (warp / WARPS_N) * WM;
    const int warpCol = (warp % WARPS_N) * WN;
    const int colOff = warpCol + laneCol * 4;
    const int rowOff = warpRow + laneRow * 4;  // rows rowOff + 32 i + 0..3
    const int blockRow = blockIdx.y * BM;
    const int blockCol = blockIdx.x * BN;
    const int kTiles = (K + BK - 1) / BK;

    const bool vec = (K % 4 == 0) && (N % 4 == 0) && aligned16(A) && aligned16(B);
    const bool interior = vec && blockRow + BM <= M && blockCol + BN <= N;

    // Fill mapping (both fills): A chunk i = row aRow + i*A_PASS, k aK..aK+3 of the
    // slice; B chunk i = k row bRow + i*B_PASS, columns bCol..bCol+3 (global).
    const int aRow = tid / A_CHUNKS_ROW;
    const int aK = (tid % A_CHUNKS_ROW) * 4;
    const int bRow = tid / B_CHUNKS_ROW;
    const int bColL = (tid % B_CHUNKS_ROW) * 4;
    const int bCol = blockCol + bColL;
    int kNext = 0;  // k0 of the next slice to load (slices are loaded in order)

    float acc[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; ++i) {
#pragma unroll
        for (int j = 0; j < TN; ++j) {
            acc[i][j] = 0.0f;
        }
    }

    // ---------------- register prefetch, double-buffered shared tiles ----------
    float4 aReg[A_CHUNKS];
    float4 bReg[B_CHUNKS];
    auto fetch_next = [&]() {
        const int k0 = kNext;
        if (interior && k0 + BK <= K) {
            // Addresses from k0 (like 07_warptile.cu), not from running pointers:
            // fewer live 64-bit registers in the main loop.
#pragma unroll
            for (int i = 0; i < A_CHUNKS; ++i) {
                aReg[i] = *reinterpret_cast<const float4*>(
                    A + static_cast<size_t>(blockRow + aRow + i * A_PASS) * K + k0 + aK);
            }
#pragma unroll
            for (int i = 0; i < B_CHUNKS; ++i) {
                bReg[i] = *reinterpret_cast<const float4*>(B + static_cast<size_t>(k0 + bRow + i * B_PASS) * N + bCol);
            }
        } else {
#pragma unroll
            for (int i = 0; i < A_CHUNKS; ++i) {
                const int row = blockRow + aRow + i * A_PASS;
                const bool rowIn = row < M;
                aReg[i] = load4_edge(A + static_cast<size_t>(rowIn ? row : 0) * K, k0 + aK, K, rowIn, vec);
            }
#pragma unroll
            for (int i = 0; i < B_CHUNKS; ++i) {
                const int kr = k0 + bRow + i * B_PASS;
                const bool kIn = kr < K;
                bReg[i] = load4_edge(B + static_cast<size_t>(kIn ? kr : 0) * N, bCol, N, kIn, vec);
            }
        }
        kNext += BK;
    };
    // Registers -> shared buffer `buf`: A transposed (AsT[k][m]), B as is.
    auto store_regs = [&](int buf) {
        float* aT = As + buf * A_STAGE;
        float* bS = Bs + buf * B_STAGE;
#pragma unroll
        for (int i = 0; i < A_CHUNKS; ++i) {
            const int r = aRow + i * A_PASS;
            aT[(aK + 0) * AST + r] = aReg[i].x;
            aT[(aK + 1) * AST + r] = aReg[i].y;
            aT[(aK + 2) * AST + r] = aReg[i].z;
            aT[(aK + 3) * AST + r] = aReg[i].w;
        }
#pragma unroll
        for (int i = 0; i < B_CHUNKS; ++i) {
            *reinterpret_cast<float4*>(&bS[(bRow + i * B_PASS) * BN + bColL]) = bReg[i];
        }
    };
    auto compute = [&](int buf) {
        const float* aT = As + buf * A_STAGE;
        const float* bS = Bs + buf * B_STAGE;
#pragma unroll
        for (int p = 0; p < BK; ++p) {
            float a[TM];
            float b[TN];
#pragma unroll
            for (int i = 0; i < TM / 4; ++i) {
                const float4 v = *reinterpret_cast<const float4*>(&aT[p * AST + rowOff + 32 * i]);
                a[4 * i + 0] = v.x;
                a[4 * i + 1] = v.y;
                a[4 * i + 2] = v.z;
                a[4 * i + 3] = v.w;
            }
#pragma unroll
            for (int j = 0; j < TNV; ++j) {
                const float4 v = *reinterpret_cast<const float4*>(&bS[p * BN + colOff + 16 * j]);
                b[4 * j + 0] = v.x;
                b[4 * j + 1] = v.y;
                b[4 * j + 2] = v.z;
                b[4 * j + 3] = v.w;
            }
#pragma unroll
            for (int i = 0; i < TM; ++i) {
#pragma unroll
                for (int j = 0; j < TN; ++j) {
                    acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
                }
            }
        }
    };

    fetch_next();  // slice 0
    for (int kt = 0; kt < kTiles; ++kt) {
        const int buf = kt & 1;
        // Slice kt: registers -> buffer kt % 2. Its last readers computed slice
        // kt-2 and have all passed the barrier of iteration kt-1.
        store_regs(buf);
        __syncthreads();  // slice kt visible to all
        if (kt + 1 < kTiles) {
            fetch_next();  // global loads of slice kt+1 in flight during the FFMAs
        }
        compute(buf);
    }
    // Row of output i: rowOff + 32 (i / 4) + i % 4.
#define SG_OUT_ROW(i) (rowOff + 32 * ((i) / 4) + ((i) % 4))


    // ---------------- epilogue: acc[i][4 j + c] -> C[SG_OUT_ROW(i)][colOff + 16 j + c]
    const bool store4 = (N % 4 == 0) && aligned16(C);
#pragma unroll
    for (int i = 0; i < TM; ++i) {
        const int row = blockRow + SG_OUT_ROW(i);
        if (row >= M) {
            continue;
        }
        float* cRow = C + static_cast<size_t>(row) * N;
#pragma unroll
        for (int j = 0; j < TNV; ++j) {
            const int col = blockCol + colOff + 16 * j;
            if (store4) {
                if (col < N) {  // col % 4 == 0 and N % 4 == 0: col + 3 < N too
                    *reinterpret_cast<float4*>(cRow + col) =
                        make_float4(acc[i][4 * j + 0], acc[i][4 * j + 1], acc[i][4 * j + 2], acc[i][4 * j + 3]);
                }
            } else {
#pragma unroll
                for (int c = 0; c < 4; ++c) {
                    if (col + c < N) {
                        cRow[col + c] = acc[i][4 * j + c];
                    }
                }
            }
        }
    }
#undef SG_OUT_ROW
}
