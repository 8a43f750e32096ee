// Rung 10, pipeline-sync and cpasync2/3/4 (-DSTAGES): one register-tiled GEMM, its shared-memory
// tiles filled two ways.
// Over rung 9 (09_wmma.cu): the asynchronous copy (sm_80) on its own, back on a small FP32 GEMM to
// isolate it: filled by plain loads and by a cp.async ring of 2, 3 or 4 stages, bit-identical.
//
// Block tile 64 x 64 of C, K slices of BK = 16, 256 threads, a 4 x 4
// micro-tile per thread (rows 4 * (t / 16) .., columns 4 * (t % 16) ..).
//
//   gemm_pipeline_sync     every thread loads one float4 of the A slice and
//                          one of the B slice into registers, stores them to
//                          shared memory, the block waits, then computes.
//   gemm_pipeline_cpasync  (built with -DSTAGES=2, 3 or 4; sm_80+) the same
//                          float4s travel global -> shared through cp.async,
//                          never touching a register, into a ring of STAGES
//                          buffers: while the block computes slice kt, slices
//                          kt+1 .. kt+STAGES-1 are in flight.
//
// Both call the same compute_tile() on shared tiles holding the same values
// (zero outside A and B, written by the zero-filling form of cp.async or by
// the register path), in the same order, so their outputs are bit-identical.
//
// What it teaches: the fill is the only difference, so the ratio of the two
// timings measures exactly what asynchronous copies buy (or cost) for this
// tile shape; and the cp.async protocol itself: commit groups, wait_group
// STAGES-2, and the single barrier that both publishes slice kt and frees the
// buffer slice kt+STAGES-1 overwrites.
//
// Any M, N, K >= 1. 16-byte copies need K % 4 == 0, N % 4 == 0 and 16-byte
// aligned A and B; otherwise every float is copied on its own (4-byte
// cp.async, or a scalar load). Interior blocks fill full K slices with no
// bounds checks. Only in-range outputs are stored.

#define BM 64
#define BN 64
#define BK 16
#define TM 4
#define TN 4
#define NTHREADS ((BM / TM) * (BN / TN))  // 256
#define AS_LD (BK + 4)                    // floats per shared row of A: 16-byte rows, rows 4 banks apart
#define A_TILE (BM * AS_LD)
#define B_TILE (BK * BN)

static __device__ __forceinline__ bool aligned16(const void* p)
{
    return (reinterpret_cast<unsigned long long>(p) & 15ull) == 0;
}

// What both fills agree on, per thread.
struct FillMap {
    const float* aRowPtr;  // start of the row of A this thread copies from (row 0 if out of range)
    bool aRowIn;
    int aRow, aK;          // destination: As[aRow][aK .. aK+3]
    int bRow, bCol;        // destination: Bs[bRow][bCol .. bCol+3]
    int gbCol;             // global column of B
    bool vec;              // 16-byte copies are legal
    bool fast;             // vec and the block tile lies inside C
};

static __device__ __forceinline__ FillMap make_fill_map(const float* A, const float* B, int M, int N, int K)
{
    FillMap f;
    const int tid = threadIdx.x;
    const int blockRow = blockIdx.y * BM;
    const int blockCol = blockIdx.x * BN;
    f.aRow = tid / (BK / 4);        // 0..63
    f.aK = (tid % (BK / 4)) * 4;    // 0, 4, 8, 12
    f.bRow = tid / (BN / 4);        // 0..15
    f.bCol = (tid % (BN / 4)) * 4;  // 0..60
    const int gaRow = blockRow + f.aRow;
    f.aRowIn = gaRow < M;
    f.aRowPtr = A + static_cast<size_t>(f.aRowIn ? gaRow : 0) * K;
    f.gbCol = blockCol + f.bCol;
    f.vec = (K % 4 == 0) && (N % 4 == 0) && aligned16(A) && aligned16(B);
    f.fast = f.vec && blockRow + BM <= M && blockCol + BN <= N;
    return f;
}

// The inner product both kernels share: acc += As(64 x 16) * Bs(16 x 64)
// restricted to this thread's 4 x 4 micro-tile, k in ascending order.
static __device__ __forceinline__ void compute_tile(const float* __restrict__ As, const float* __restrict__ Bs,
                                                    int threadRow, int threadCol, float acc[TM][TN])
{
#pragma unroll
    for (int p4 = 0; p4 < BK; p4 += 4) {
        float4 a[TM];
#pragma unroll
        for (int i = 0; i < TM; ++i) {
            a[i] = *reinterpret_cast<const float4*>(&As[(threadRow * TM + i) * AS_LD + p4]);
        }
#pragma unroll
        for (int q = 0; q < 4; ++q) {
            const float4 b = *reinterpret_cast<const float4*>(&Bs[(p4 + q) * BN + threadCol * TN]);
#pragma unroll
            for (int i = 0; i < TM; ++i) {
                const float av = q == 0 ? a[i].x : q == 1 ? a[i].y : q == 2 ? a[i].z : a[i].w;
                acc[i][0] += av * b.x;
                acc[i][1] += av * b.y;
                acc[i][2] += av * b.z;
                acc[i][3] += av * b.w;
            }
        }
    }
}

// The epilogue both kernels share.
static __device__ __forceinline__ void store_tile(float* __restrict__ C, int M, int N, int threadRow, int threadCol,
                                                  const float acc[TM][TN])
{
    const int row0 = blockIdx.y * BM + threadRow * TM;
    const int col = blockIdx.x * BN + threadCol * TN;
    const bool whole = (N % 4 == 0) && aligned16(C) && blockIdx.y * BM + BM <= M && blockIdx.x * BN + BN <= N;
#pragma unroll
    for (int i = 0; i < TM; ++i) {
        const int row = row0 + i;
        if (whole) {
            *reinterpret_cast<float4*>(C + static_cast<size_t>(row) * N + col) =
                make_float4(acc[i][0], acc[i][1], acc[i][2], acc[i][3]);
        } else if (row < M) {
#pragma unroll
            for (int j = 0; j < TN; ++j) {
                if (col + j < N) {
                    C[static_cast<size_t>(row) * N + col + j] = acc[i][j];
                }
            }
        }
    }
}

// (load4_edge as in 07_warptile.cu and 08_warptile_256.cu: each rung is kept self-contained on
// purpose, one file a student reads top to bottom, so small helpers are copied, not shared.)
// rowPtr[col .. col+3], zero outside (see FillMap.vec for the float4 case).
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

extern "C" __global__ void __launch_bounds__(NTHREADS)
gemm_pipeline_sync(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                   int M, int N, int K)
{
    __shared__ __align__(16) float As[A_TILE];
    __shared__ __align__(16) float Bs[B_TILE];

    const FillMap f = make_fill_map(A, B, M, N, K);
    const int threadRow = threadIdx.x / (BN / TN);
    const int threadCol = threadIdx.x % (BN / TN);

    float acc[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; ++i) {
#pragma unroll
        for (int j = 0; j < TN; ++j) {
            acc[i][j] = 0.0f;
        }
    }

    for (int k0 = 0; k0 < K; k0 += BK) {
        float4 av;
        float4 bv;
        if (f.fast && k0 + BK <= K) {
            av = *reinterpret_cast<const float4*>(f.aRowPtr + k0 + f.aK);
            bv = *reinterpret_cast<const float4*>(B + static_cast<size_t>(k0 + f.bRow) * N + f.gbCol);
        } else {
            av = load4_edge(f.aRowPtr, k0 + f.aK, K, f.aRowIn, f.vec);
            const int kb = k0 + f.bRow;
            const bool kIn = kb < K;
            bv = load4_edge(B + static_cast<size_t>(kIn ? kb : 0) * N, f.gbCol, N, kIn, f.vec);
        }
        *reinterpret_cast<float4*>(&As[f.aRow * AS_LD + f.aK]) = av;
        *reinterpret_cast<float4*>(&Bs[f.bRow * BN + f.bCol]) = bv;
        __syncthreads();
        compute_tile(As, Bs, threadRow, threadCol, acc);
        __syncthreads();
    }

    store_tile(C, M, N, threadRow, threadCol, acc);
}

// The cp.async twin exists only when STAGES is given, so the synchronous
// build contains no cp.async instruction at all.
#if defined(STAGES)

#if STAGES < 2 || STAGES > 4
#error "STAGES must be 2, 3 or 4"
#endif

// (These cp.async helpers are copied into 11_mma_fp16.cu: each rung is kept self-contained on
// purpose.)
#if __CUDA_ARCH__ >= 800
// 16 bytes global -> shared; bytes [srcBytes, 16) of the destination are
// zero-filled (srcBytes == 0: nothing is read, all 16 bytes are zero).
static __device__ __forceinline__ void cp_async16(float* dst, const float* src, int srcBytes)
{
    const unsigned int d = static_cast<unsigned int>(__cvta_generic_to_shared(dst));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src), "r"(srcBytes) : "memory");
}

// One float global -> shared, zero-filled when srcBytes == 0.
static __device__ __forceinline__ void cp_async4(float* dst, const float* src, int srcBytes)
{
    const unsigned int d = static_cast<unsigned int>(__cvta_generic_to_shared(dst));
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(d), "l"(src), "r"(srcBytes) : "memory");
}

static __device__ __forceinline__ void cp_async_commit()
{
    asm volatile("cp.async.commit_group;\n" ::: "memory");
}

// Wait until at most `pending` of this thread's committed groups are still in flight.
template <int pending>
static __device__ __forceinline__ void cp_async_wait()
{
    asm volatile("cp.async.wait_group %0;\n" ::"n"(pending) : "memory");
}

// Issue the copies of K slice kt into ring buffer `stage`.
static __device__ __forceinline__ void fill_async(const FillMap& f, const float* A, const float* B, int N, int K,
                                                  int kt, float* As, float* Bs)
{
    const int k0 = kt * BK;
    float* aDst = &As[f.aRow * AS_LD + f.aK];
    float* bDst = &Bs[f.bRow * BN + f.bCol];
    if (f.fast && k0 + BK <= K) {
        cp_async16(aDst, f.aRowPtr + k0 + f.aK, 16);
        cp_async16(bDst, B + static_cast<size_t>(k0 + f.bRow) * N + f.gbCol, 16);
        return;
    }
    const int ka = k0 + f.aK;
    const int kb = k0 + f.bRow;
    const bool kIn = kb < K;
    const float* bRowPtr = B + static_cast<size_t>(kIn ? kb : 0) * N;
    if (f.vec) {
        // K and N are multiples of 4: each 16-byte chunk is wholly in or out.
        const bool aIn = f.aRowIn && ka < K;
        const bool bIn = kIn && f.gbCol < N;
        cp_async16(aDst, aIn ? f.aRowPtr + ka : A, aIn ? 16 : 0);
        cp_async16(bDst, bIn ? bRowPtr + f.gbCol : B, bIn ? 16 : 0);
    } else {
#pragma unroll
        for (int q = 0; q < 4; ++q) {
            const bool aIn = f.aRowIn && ka + q < K;
            const bool bIn = kIn && f.gbCol + q < N;
            cp_async4(aDst + q, aIn ? f.aRowPtr + ka + q : A, aIn ? 4 : 0);
            cp_async4(bDst + q, bIn ? bRowPtr + f.gbCol + q : B, bIn ? 4 : 0);
        }
    }
}
#endif  // __CUDA_ARCH__ >= 800

extern "C" __global__ void __launch_bounds__(NTHREADS)
gemm_pipeline_cpasync(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                      int M, int N, int K)
{
#if __CUDA_ARCH__ >= 800
    __shared__ __align__(16) float As[STAGES * A_TILE];
    __shared__ __align__(16) float Bs[STAGES * B_TILE];

    const FillMap f = make_fill_map(A, B, M, N, K);
    const int threadRow = threadIdx.x / (BN / TN);
    const int threadCol = threadIdx.x % (BN / TN);

    float acc[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; ++i) {
#pragma unroll
        for (int j = 0; j < TN; ++j) {
            acc[i][j] = 0.0f;
        }
    }

    const int kTiles = (K + BK - 1) / BK;

    // Prologue: slices 0 .. STAGES-2 in flight, one commit group each (a
    // group may be empty when K is short; the counting stays uniform).
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        if (s < kTiles) {
            fill_async(f, A, B, N, K, s, As + s * A_TILE, Bs + s * B_TILE);
        }
        cp_async_commit();
    }

    for (int kt = 0; kt < kTiles; ++kt) {
        // Groups committed so far: STAGES-1+kt; slice kt is group kt, so
        // letting the newest STAGES-2 stay in flight means slice kt landed.
        cp_async_wait<STAGES - 2>();
        // Everyone's part of slice kt is now visible, and everyone finished
        // computing slice kt-1, whose buffer the next fill reuses.
        __syncthreads();

        const int next = kt + STAGES - 1;
        if (next < kTiles) {
            const int s = next % STAGES;
            fill_async(f, A, B, N, K, next, As + s * A_TILE, Bs + s * B_TILE);
        }
        cp_async_commit();

        const int s = kt % STAGES;
        compute_tile(As + s * A_TILE, Bs + s * B_TILE, threadRow, threadCol, acc);
    }
    cp_async_wait<0>();  // only empty groups remain; leave nothing in flight

    store_tile(C, M, N, threadRow, threadCol, acc);
#endif
    // Below sm_80 there is no cp.async; min_cc (8, 0) keeps this entry from
    // being launched there.
}

#endif  // defined(STAGES)
