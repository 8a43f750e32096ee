// The FP32 candidates of bench/candidates: reference_kernels/08_warptile_256.cu (the rung
// warptile-256, built -DSG_BN=256 -DSG_BK=16 -DSG_FILL=0) with every fill the research used. FP32 SIMT GEMM, FFMA only (no tensor cores,
// no TF32). C = A @ B, all row-major float32. Any M, N, K >= 1.
//
// What the rung adds to warptile.cu: the same warp and lane layout (warps 2 x 4, lanes 8 x 4,
// 4 x 4 blocks of outputs 32 rows and 16 columns apart), widened to 8 x 16 outputs per lane on a
// 128 x 256 block tile (cuBLAS's own work per thread on this card), and a shared tile in two
// buffers, so one barrier per K slice instead of two: per lane and k, 6 float4 shared loads feed
// 128 FFMA (warptile: 4 per 64), and the FFMA share of the loop rises from 0.94 to 0.955. At
// 239 registers only 8 warps fit on an SM; the 128 independent accumulators, not more warps,
// hide the latency. Measured on an H200 at 0.97 of cuBLAS FP32 (warptile 0.905), NOTES.md.
//
// Parameters (-D, defaults in brackets):
//   SG_BM, SG_BN     block tile of C [128, 128]; SG_BM must be 128 (2 warp rows of 64)
//   SG_BK            K slice, 8 or 16 [16]
//   SG_FILL          0: register prefetch into a double-buffered shared tile
//                       (A stored transposed, as warptile.cu does);
//                    1: cp.async ring of SG_STAGES buffers (A stored as it is) [1]
//   SG_STAGES        cp.async ring depth, 2..4 (SG_FILL 1 only) [2]
//   SG_MIN_BLOCKS    second __launch_bounds__ argument [1]
// Shared memory is dynamic; its size is exported as gemm_sgemm_smem_bytes.
//
// Threads and outputs. 256 threads = 8 warps arranged 2 (rows) x 4 (columns),
// warp tile WM x WN = 64 x (BN / 4). The 32 lanes of a warp are 8 (rows) x 4
// (columns): laneRow = lane / 4, laneCol = lane % 4. Each lane owns TM x TN =
// 8 x (WN / 4) outputs (8 x 8 for BN = 128, 8 x 16 for BN = 256), as 4-wide
// column groups j = 0 .. TN/4-1 at columns
//     colOff + 16 j + 0..3,    colOff = warpCol * WN + laneCol * 4
// and 8 rows that depend on the fill:
//   SG_FILL 0 (A transposed, AsT[k][m]): rows rowOff + 32 i + 0..3, i = 0, 1,
//     rowOff = warpRow * 64 + laneRow * 4 (warptile.cu's layout). At each k a
//     lane reads two float4 of AsT row k (8 distinct float4 per warp, 128
//     contiguous bytes) and TN/4 float4 of Bs row k (4 distinct per instruction).
//   SG_FILL 1 (A as stored, As[m][k]): rows warpRow * 64 + laneRow + 8 r,
//     r = 0..7. For each group of 4 k a lane reads one float4 (4 k values) of
//     each of its 8 rows. One such load: the 8 lane rows are 8 consecutive rows
//     of As, whose pitch is BK + 4 floats = 80 B (BK 16) or 48 B (BK 8), an
//     odd number of 16-byte slots (5 or 3), so the 8 float4 land in 8 distinct
//     slots of a 128-byte wavefront: conflict-free, no transpose needed, and
//     the global -> shared copy is a plain 16-byte cp.async.
//
// Per lane and k: TM + TN = 16 or 24 shared floats for TM x TN = 64 or 128 FFMA.
//
// Fills.
//   SG_FILL 0: iteration kt stores slice kt from registers into shared buffer
//     kt % 2 (A transposed), one __syncthreads, starts the global loads of slice
//     kt+1 into registers (float4, coalesced) and computes slice kt while they
//     fly. One barrier per slice: the store into buffer kt % 2 is safe because
//     its last readers (slice kt-2) finished before the barrier of iteration kt-1.
//   SG_FILL 1: the protocol of pipeline.cu: the prologue commits STAGES-1
//     groups; iteration kt waits until at most STAGES-2 of this thread's groups
//     are pending (tile kt landed), one __syncthreads (everyone's tile kt landed,
//     everyone finished tile kt-1), issues tile kt+STAGES-1 into the stage tile
//     kt-1 used, commits (maybe an empty group), computes tile kt.
// Edges: 16-byte global accesses (cp.async, float4 loads and stores) need
// K % 4 == 0, N % 4 == 0 and 16-byte aligned A, B (and C for the stores);
// chunks outside A or B are zero (cp.async src-size 0, or a zero register);
// otherwise each float goes on its own (4-byte cp.async with zero fill, or a
// checked scalar load). Blocks wholly inside C take a path with no bounds
// checks for every full K slice. Only in-range outputs are stored.

#ifndef SG_BM
#define SG_BM 128
#endif
#ifndef SG_BN
#define SG_BN 128
#endif
#ifndef SG_BK
#define SG_BK 16
#endif
#ifndef SG_FILL
#define SG_FILL 1
#endif
#ifndef SG_STAGES
#define SG_STAGES 2
#endif
#ifndef SG_MIN_BLOCKS
#define SG_MIN_BLOCKS 1
#endif

#define SG_THREADS 256

// Constants are enumerators, not constexpr variables: NVRTC would emit those as unused globals.
enum : int {
    BM = SG_BM,
    BN = SG_BN,
    BK = SG_BK,
    NTHREADS = SG_THREADS,
    WARPS_N = 4,
    WM = BM / 2,           // 64
    WN = BN / WARPS_N,     // 32 or 64
    TM = 8,                // rows per lane
    TN = WN / 4,           // columns per lane: 8 or 16
    TNV = TN / 4,          // float4 column groups per lane
};
#if SG_FILL == 0
enum : int {
    STAGES = 2,
    AST = BM + 4,          // row pitch of the transposed A tile AsT[BK][AST]
    A_STAGE = BK * AST,    // floats
};
#else
enum : int {
    STAGES = SG_STAGES,
    AS_LD = BK + 4,        // row pitch of As[BM][AS_LD]
    A_STAGE = BM * AS_LD,
};
#endif
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

static_assert(BM == 128, "SG_BM must be 128: 2 warp rows of 64 = 8 lane rows x 8");
static_assert(BN == 128 || BN == 256, "SG_BN must be 128 or 256");
static_assert(BK == 8 || BK == 16, "SG_BK must be 8 or 16");
static_assert(STAGES >= 2 && STAGES <= 4, "SG_STAGES must be 2..4");
static_assert(SG_FILL == 0 || SG_FILL == 1, "SG_FILL must be 0 or 1");
static_assert(NTHREADS % A_CHUNKS_ROW == 0 && BM % A_PASS == 0 && A_CHUNKS >= 1, "A chunks must spread evenly");
static_assert(NTHREADS % B_CHUNKS_ROW == 0 && BK % B_PASS == 0 && B_CHUNKS >= 1, "B chunks must spread evenly");
#if SG_FILL == 1
static_assert((AS_LD / 4) % 2 == 1, "As pitch must be an odd number of 16-byte slots");
#endif


// Exported so a test can compare it with the declaration's shared_mem.
extern "C" __constant__ int gemm_sgemm_smem_bytes = SMEM_BYTES;

static __device__ __forceinline__ bool aligned16(const void* p)
{
    return (reinterpret_cast<unsigned long long>(p) & 15ull) == 0;
}

#if SG_FILL == 0
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
#endif

#if SG_FILL == 1 && __CUDA_ARCH__ >= 800
static __device__ __forceinline__ void cp_async16(unsigned int dst, const void* src, int srcBytes)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(srcBytes) : "memory");
}

static __device__ __forceinline__ void cp_async4(unsigned int dst, const void* src, int srcBytes)
{
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(src), "r"(srcBytes) : "memory");
}

static __device__ __forceinline__ void cp_async_commit()
{
    asm volatile("cp.async.commit_group;\n" ::: "memory");
}

template <int pending>
static __device__ __forceinline__ void cp_async_wait()
{
    asm volatile("cp.async.wait_group %0;\n" ::"n"(pending) : "memory");
}
#endif

extern "C" __global__ void __launch_bounds__(SG_THREADS, SG_MIN_BLOCKS)
gemm_sgemm(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C, int M, int N, int K)
{
#if SG_FILL == 1 && __CUDA_ARCH__ < 800
    // cp.async needs sm_80; min_cc (8, 0) keeps this build from being launched below it.
#else
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
#if SG_FILL == 0
    const int rowOff = warpRow + laneRow * 4;  // rows rowOff + 32 i + 0..3
#else
    const int rowOff = warpRow + laneRow;      // rows rowOff + 8 r
#endif
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

#if SG_FILL == 0
    // ---------------- register prefetch, double-buffered shared tiles ----------
    float4 aReg[A_CHUNKS];
    float4 bReg[B_CHUNKS];
    auto fetch_next = [&]() {
        const int k0 = kNext;
        if (interior && k0 + BK <= K) {
            // Addresses from k0 (like warptile.cu), not from running pointers:
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

#else
    // ---------------- cp.async ring --------------------------------------------
    const bool bColIn = bCol < N;
    // Chunk 0 of the next slice to load (k0 = kNext); may point outside A or B,
    // dereferenced only when in range.
    const float* aNext = A + static_cast<size_t>(blockRow + aRow) * K + aK;
    const float* bNext = B + static_cast<size_t>(bRow) * N + bCol;
    const size_t aPass = static_cast<size_t>(A_PASS) * K;  // floats from chunk i to chunk i+1
    const size_t bPass = static_cast<size_t>(B_PASS) * N;
    const size_t bTile = static_cast<size_t>(BK) * N;      // floats from one B slice to the next
    const unsigned int aSmem = static_cast<unsigned int>(__cvta_generic_to_shared(As));
    const unsigned int bSmem = static_cast<unsigned int>(__cvta_generic_to_shared(Bs));
    const unsigned int aDst = static_cast<unsigned int>((aRow * AS_LD + aK) * 4);   // + i * A_PASS * AS_LD * 4
    const unsigned int bDst = static_cast<unsigned int>((bRow * BN + bColL) * 4);   // + i * B_PASS * BN * 4
    constexpr unsigned int A_DST_STEP = A_PASS * AS_LD * 4;
    constexpr unsigned int B_DST_STEP = B_PASS * BN * 4;

    auto load_next = [&](int stage) {
        const int k0 = kNext;
        const unsigned int aStage = aSmem + static_cast<unsigned int>(stage * A_STAGE * 4) + aDst;
        const unsigned int bStage = bSmem + static_cast<unsigned int>(stage * B_STAGE * 4) + bDst;
        if (interior && k0 + BK <= K) {
#pragma unroll
            for (int i = 0; i < A_CHUNKS; ++i) {
                cp_async16(aStage + i * A_DST_STEP, aNext + i * aPass, 16);
            }
#pragma unroll
            for (int i = 0; i < B_CHUNKS; ++i) {
                cp_async16(bStage + i * B_DST_STEP, bNext + i * bPass, 16);
            }
        } else if (vec) {
            // K % 4 == 0, N % 4 == 0: each chunk wholly in or out; out -> zero-filled.
#pragma unroll
            for (int i = 0; i < A_CHUNKS; ++i) {
                const bool in = blockRow + aRow + i * A_PASS < M && k0 + aK < K;
                cp_async16(aStage + i * A_DST_STEP, in ? static_cast<const void*>(aNext + i * aPass) : A, in ? 16 : 0);
            }
#pragma unroll
            for (int i = 0; i < B_CHUNKS; ++i) {
                const bool in = bColIn && k0 + bRow + i * B_PASS < K;
                cp_async16(bStage + i * B_DST_STEP, in ? static_cast<const void*>(bNext + i * bPass) : B, in ? 16 : 0);
            }
        } else {
            // One float at a time, 4-byte cp.async, zero-filled outside.
#pragma unroll
            for (int i = 0; i < A_CHUNKS; ++i) {
                const int row = blockRow + aRow + i * A_PASS;
                const bool rowIn = row < M;
                const float* rowPtr = A + static_cast<size_t>(rowIn ? row : 0) * K;
#pragma unroll
                for (int q = 0; q < 4; ++q) {
                    const bool in = rowIn && k0 + aK + q < K;
                    cp_async4(aStage + i * A_DST_STEP + 4 * q, in ? rowPtr + k0 + aK + q : A, in ? 4 : 0);
                }
            }
#pragma unroll
            for (int i = 0; i < B_CHUNKS; ++i) {
                const int kr = k0 + bRow + i * B_PASS;
                const bool kIn = kr < K;
                const float* rowPtr = B + static_cast<size_t>(kIn ? kr : 0) * N;
#pragma unroll
                for (int q = 0; q < 4; ++q) {
                    const bool in = kIn && bCol + q < N;
                    cp_async4(bStage + i * B_DST_STEP + 4 * q, in ? rowPtr + bCol + q : B, in ? 4 : 0);
                }
            }
        }
        aNext += BK;
        bNext += bTile;
        kNext += BK;
    };

    auto compute = [&](int stage) {
        const float* aS = As + stage * A_STAGE;
        const float* bS = Bs + stage * B_STAGE;
#pragma unroll
        for (int p4 = 0; p4 < BK; p4 += 4) {
            float4 a4[TM];  // a4[r] = As[rowOff + 8 r][p4 .. p4+3]
#pragma unroll
            for (int r = 0; r < TM; ++r) {
                a4[r] = *reinterpret_cast<const float4*>(&aS[(rowOff + 8 * r) * AS_LD + p4]);
            }
#pragma unroll
            for (int q = 0; q < 4; ++q) {
                float b[TN];
#pragma unroll
                for (int j = 0; j < TNV; ++j) {
                    const float4 v = *reinterpret_cast<const float4*>(&bS[(p4 + q) * BN + colOff + 16 * j]);
                    b[4 * j + 0] = v.x;
                    b[4 * j + 1] = v.y;
                    b[4 * j + 2] = v.z;
                    b[4 * j + 3] = v.w;
                }
#pragma unroll
                for (int r = 0; r < TM; ++r) {
                    const float av = q == 0 ? a4[r].x : q == 1 ? a4[r].y : q == 2 ? a4[r].z : a4[r].w;
#pragma unroll
                    for (int j = 0; j < TN; ++j) {
                        acc[r][j] = fmaf(av, b[j], acc[r][j]);
                    }
                }
            }
        }
    };

#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        if (s < kTiles) {
            load_next(s);  // tile s
        }
        cp_async_commit();
    }
    int readStage = 0;            // kt % STAGES
    int writeStage = STAGES - 1;  // (kt + STAGES - 1) % STAGES
    for (int kt = 0; kt < kTiles; ++kt) {
        cp_async_wait<STAGES - 2>();  // this thread's part of tile kt landed
        __syncthreads();              // everyone's did; everyone finished tile kt-1
        if (kt + STAGES - 1 < kTiles) {
            load_next(writeStage);    // tile kt + STAGES - 1, into the stage tile kt-1 used
        }
        cp_async_commit();
        compute(readStage);
        readStage = readStage + 1 == STAGES ? 0 : readStage + 1;
        writeStage = writeStage + 1 == STAGES ? 0 : writeStage + 1;
    }
    cp_async_wait<0>();  // only empty groups can remain
    // Row of output r: rowOff + 8 r.
#define SG_OUT_ROW(i) (rowOff + 8 * (i))
#endif

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
#endif
}
