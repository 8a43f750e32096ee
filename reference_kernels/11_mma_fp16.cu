// Rung 11, mma-fp16 (its defaults; its candidates are in bench/candidates): tensor cores through
// inline PTX, fp16 in, fp32 accumulate and out. C = A @ B, A (M x K) and B (K x N) row-major
// __half, C (M x N) row-major float. Any M, N, K >= 1.
// Over rung 10 (10_pipeline.cu) and rung 9 (09_wmma.cu): the tensor core without WMMA (fragments, ldmatrix), fed by rung 10's cp.async ring made deep.
//
// What it adds to 09_wmma.cu: the tensor core without WMMA's opaque fragments (the m16n8k16
// register layouts written out below, operands fetched by ldmatrix), a multistage cp.async
// ring into XOR-swizzled shared rows, and a main loop arranged so that the tensor cores wait as
// little as possible for shared memory, the copies or each other. What each step paid on an
// H200 (4096^3, fraction of cuBLAS fp16 in the same run; NOTES.md):
//   - swizzled unpadded rows, fragments one k16 step ahead, copies spread over three k16 steps:
//     0.575, level with CUTLASS's mma.sync kernel on the same tile (0.574);
//   - the ring guarded by mbarriers, no block barrier per K slice: a warp waits
//     only for the tile it reads and for the stage it overwrites, so warps that drift apart
//     no longer stall each other every slice: 0.590-0.592 (the barrier alone cost 17 us of
//     314 in a diagnostic build);
//   - C staged through shared memory and stored as float4 rows: 4x fewer
//     L2 write requests than float2 stores from the accumulators: 0.595-0.603 with both;
//   - the steady loop's copies issued at the start of their k16 step and, on sm_90, waits
//     with try_wait: every branch in the loop makes ptxas wait out
//     the mma.sync in flight (about 24 cycles), so the loop's encoded stalls are what its
//     branches and its runs of copies cost; these two took them from 872 to 835 cycles a K
//     slice of 128 mma.sync (6 cycles each at best) and the rung to 0.607-0.616 (0.598-0.602
//     before, same runs).
// CUTLASS's best sm_80 tile reaches 0.632-0.639 on the same card; mma.sync alone about 0.89.
//
// The build (bench/candidates/mma_fp16.cu keeps every knob the research tried, as -D options,
// and this rung is its build mma-fp16-256x128x64-s3-cs3-mbar-ce-tw-se; NOTES.md):
//   BM x BN          block tile of C, 256 x 128; WM x WN the warp tile, 64 x 64: 8 warps
//   BK               the K slice loaded per stage, 64 halves: one 128-byte shared row of A
//   STAGES           depth of the cp.async ring in shared memory, 3
//   SPREAD           the steady-state loop issues the next K slice's copies over its first 3
//                    k16 steps; each after the first at the start of its step, before its
//                    ldmatrix, rather than halfway through its mma.sync (ptxas then spreads them
//                    between mma.sync instead of issuing them in one run; NOTES.md, "Issue 29, fourth")
//   blocks inside C guard the ring with mbarriers (below), no cp.async groups and no
//   __syncthreads in the loop; on sm_90+ they wait with mbarrier.try_wait (the thread may be
//   suspended) instead of spinning on test_wait; each warp's lane 0 arrives on `empty`
//   blocks inside C, with C 16-byte aligned, store C through shared memory as float4 rows (the
//   epilogue below)
// Variants measured and not kept (bench/candidates/mma_fp16.cu has them): other tiles, K slices
// of 32, other ring depths; a lean loop (the partial K slice first, 32-bit copy strides; no
// faster on the H200), copies from a later k16 step, every thread arriving on `empty`.
// Tried later and not kept (none faster on the H200; branch mma-experiments, NOTES.md "Issue 29,
// later"): the last k16 step's mma.sync held after the slice barrier, an L2 prefetch on each
// cp.async, blocks launched in groups of tile columns, a fifth stage; and (NOTES.md, "Issue 29,
// fifth") one mbarrier a stage (no `empty`: one wait a slice, 5 % slower) and K slices of 128.
// Shared memory is dynamic: STAGES x (BM x BK + BK x BN) halves; the exact figure is also
// exported as the constant gemm_mma_fp16_smem_bytes so the Python declaration can be checked
// against it. Builds measured before 2026-12-01 with padded rows, other loops or K slices of
// 32 (NOTES.md) are in the history of this file, up to commit 7303d22.
//
// Instruction: mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 (sm_80+).
// Operand fragments come from shared memory through ldmatrix (A plain, B with
// .trans because B is stored k-major, n contiguous). Index mappings, from the
// PTX ISA figures for m16n8k16 with .f16 inputs (g = lane / 4 "groupID",
// t = lane % 4 "threadID_in_group"):
//
//   A fragment, 4 x .b32 registers, each 2 halves (low half = lower column):
//     a0 = A[g    ][2t, 2t+1]      a1 = A[g + 8][2t, 2t+1]
//     a2 = A[g    ][2t+8, 2t+9]    a3 = A[g + 8][2t+8, 2t+9]
//   B fragment, 2 x .b32 (low half = lower k):
//     b0 = B[2t, 2t+1][g]          b1 = B[2t+8, 2t+9][g]
//   C/D fragment, 4 x .f32:
//     c0, c1 = C[g][2t, 2t+1]      c2, c3 = C[g + 8][2t, 2t+1]
//
//   ldmatrix.m8n8.x4.b16: lanes 8j .. 8j+7 give the 16-byte row addresses of
//   8x8 matrix j (row r of matrix j from lane 8j + r); register j of lane l
//   receives row l/4, columns 2(l%4), 2(l%4)+1 of matrix j. With .trans it
//   receives the transpose: stored rows 2(l%4), 2(l%4)+1, column l/4.
//
//   A (16 x 16 at rows m0.., cols k0..): lane l points at
//       row m0 + (l % 16), col k0 + (l / 16) * 8
//     so matrix 0 = rows 0-7 / k 0-7   -> reg 0 = A[g][2t..]      = a0
//        matrix 1 = rows 8-15 / k 0-7  -> reg 1 = A[g+8][2t..]    = a1
//        matrix 2 = rows 0-7 / k 8-15  -> reg 2 = A[g][2t+8..]    = a2
//        matrix 3 = rows 8-15 / k 8-15 -> reg 3 = A[g+8][2t+8..]  = a3
//   B (16 k x 16 n at k0.., n0..), stored rows = k: lane l points at
//       k row k0 + (l % 16), col n0 + (l / 16) * 8, and with .trans
//        matrix 0 = k 0-7 / n 0-7   -> reg 0 = B[2t, 2t+1][g]     = b0 of n-tile n0
//        matrix 1 = k 8-15 / n 0-7  -> reg 1 = B[2t+8, 2t+9][g]   = b1 of n-tile n0
//        matrix 2 = k 0-7 / n 8-15  -> reg 2 = b0 of n-tile n0 + 8
//        matrix 3 = k 8-15 / n 8-15 -> reg 3 = b1 of n-tile n0 + 8
//
// Shared layout (per stage): As[BM][BK], Bs[BK][BN], no padding; rows are whole 128-byte lines
// and chunk c (16 bytes) of row r is stored at c ^ (r % 8) inside its aligned group of 8
// (swizzled() below). The 8 rows of one ldmatrix matrix read one logical chunk, so they hit 8
// different 16-byte slots: conflict-free. And the 8 (A) or 16 (B) copies of one row fill whole
// lines (with rows padded to an odd number of 16-byte slots, the other conflict-free layout,
// rows straddled lines and each cp.async of a warp was split: NOTES.md, 1.47x the L2 reads of
// the ideal, the rung 17 % slower).
//
// Global -> shared: 16-byte cp.async.cg copies (8 halves), zero-filled (src-size
// 0, nothing read) for chunks outside A or B; they need K % 8 == 0, N % 8 == 0
// and 16-byte aligned A and B, so that a chunk is wholly inside or outside.
// Otherwise ("scalar" fill) each half is loaded on its own with bounds checks
// and the chunk is stored with one 16-byte st.shared; that path is synchronous
// but uses the same ring and the same barriers.
//
// Pipeline (the protocol of 10_pipeline.cu): the prologue commits STAGES-1 groups
// (tiles 0 .. STAGES-2, a group may be empty). Iteration kt waits until at most
// STAGES-2 groups are pending (committed so far: STAGES-1+kt, tile g in group
// g, so tiles 0..kt have landed for this thread), then one __syncthreads makes
// every thread's copies of tile kt visible AND proves every warp finished
// computing tile kt-1, whose stage ((kt-1) % STAGES == (kt+STAGES-1) % STAGES)
// the copies of tile kt+STAGES-1 issued next overwrite; then it commits (maybe
// an empty group, keeping the count uniform) and computes tile kt. That is the loop of the edge
// and scalar fills; blocks inside C run a pipelined form of it (fragments one k16 step ahead,
// the wait and barrier inside the last k16 step of the previous tile: see the loop).
// Those blocks replace the groups and the barrier by two mbarriers per stage:
// `full` completes when every thread's copies into the stage have landed (each thread's
// cp.async.mbarrier.arrive.noinc), `empty` when every warp has issued its last ldmatrix of the
// tile there. A warp waits on `full` before reading a tile; each thread waits on `empty` of
// tile kt-1 before copying tile kt+STAGES-1 over it. No warp waits for the whole block.
//
// Epilogue straight from the accumulators: each lane writes float2 pairs
// C[row][2t, 2t+1] (8-byte stores, one 32-byte sector per 4 lanes) when N is
// even and C is 8-byte aligned, else single floats; every store is bounds-checked.
// Blocks inside C, C 16-byte aligned: each warp stages 16 rows of its tile
// in shared memory and stores whole rows as float4 (see the epilogue).

#include <cuda_fp16.h>


#define MMA_THREADS 256  // (BM / WM) x (BN / WN) warps of 32

// Constants are enumerators, not constexpr variables: NVRTC would emit those as unused globals.
enum : int {
    BM = 256,
    BN = 128,
    BK = 64,
    WM = 64,
    WN = 64,
    STAGES = 3,
    KSTEPS = BK / 16,      // k16 steps per K slice
    WARPS_N = BN / WN,
    NTHREADS = MMA_THREADS,
    MI = WM / 16,          // m16 tiles per warp
    NI = WN / 8,           // n8 tiles per warp
    SPREAD = 3,   // k16 steps the copies of one K slice are spread over
    A_LD = BK,             // halves per shared row of A
    B_LD = BN,             // halves per shared row of B
    A_STAGE = BM * A_LD,   // halves per stage
    B_STAGE = BK * B_LD,
    RING_BYTES = STAGES * (A_STAGE + B_STAGE) * 2,
    NWARPS = NTHREADS / 32,
    SMEM_BYTES = RING_BYTES + 2 * STAGES * 8,  // + the full and empty mbarriers
    EP_LD = WN + 8,         // floats per staged C row: 8 mod 32 banks, so float2 writes of a half-warp are conflict-free
    EP_BYTES = NWARPS * 2 * 16 * EP_LD * 4,  // two 16-row buffers per warp
    A_CHUNKS_ROW = BK / 8,                  // 16-byte chunks per row of the A tile
    B_CHUNKS_ROW = BN / 8,                  // ... of the B tile
    A_PASS = NTHREADS / A_CHUNKS_ROW,        // A rows one pass of all threads covers
    B_PASS = NTHREADS / B_CHUNKS_ROW,        // B k rows one pass covers
    A_CHUNKS = BM / A_PASS,                  // chunks per thread per stage
    B_CHUNKS = BK / B_PASS,
    A_DST_STEP = A_PASS * A_LD * 2,  // shared bytes from chunk i to chunk i+1
    B_DST_STEP = B_PASS * B_LD * 2,
};

static_assert(BM % WM == 0 && BN % WN == 0, "the warp tile must divide the block tile");
static_assert(WM % 16 == 0 && WN % 16 == 0, "warp tile: 16-row A fragments, B loaded 16 columns per ldmatrix.x4");
static_assert(SPREAD >= 1 && SPREAD <= KSTEPS - 1, "SPREAD spreads the copies over 1 .. BK/16 - 1 k16 steps");
static_assert(KSTEPS % 2 == 0, "the pipelined loop alternates two fragment buffers: BK / 16 must be even");
static_assert(NTHREADS % A_CHUNKS_ROW == 0 && BM % A_PASS == 0 && A_CHUNKS >= 1, "A tile chunks must spread evenly");
static_assert(NTHREADS % B_CHUNKS_ROW == 0 && BK % B_PASS == 0 && B_CHUNKS >= 1, "B tile chunks must spread evenly");
static_assert((BK % 64 == 0 || BK == 32) && BN % 64 == 0 && WN % 64 == 0 && A_PASS % 8 == 0 && B_PASS % 8 == 0,
              "the swizzle needs whole 128-byte rows of B (BN a multiple of 64) and of A (BK a multiple of 64) "
              "or pairs of 64-byte rows of A (BK 32), warp columns on 128-byte boundaries (WN a multiple of 64) "
              "and each thread's chunks 8 rows apart");
static_assert(EP_BYTES <= RING_BYTES, "the staged C tiles must fit in the ring");

typedef unsigned short u16;


// Exported so a test can compare it with the declaration's shared_mem.
extern "C" __constant__ int gemm_mma_fp16_smem_bytes = SMEM_BYTES;

#if __CUDA_ARCH__ >= 800

static __device__ __forceinline__ bool aligned16(const void* p)
{
    return (reinterpret_cast<unsigned long long>(p) & 15ull) == 0;
}

static __device__ __forceinline__ unsigned int smem_u32(const void* p)
{
    return static_cast<unsigned int>(__cvta_generic_to_shared(p));
}

// (The cp.async helpers below are also in 10_pipeline.cu, which introduces them: each rung is
// kept self-contained on purpose.)
// 16 bytes global -> shared; bytes [srcBytes, 16) of the destination are zero
// (srcBytes == 0: nothing is read).
static __device__ __forceinline__ void cp_async16(unsigned int dst, const void* src, int srcBytes)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(srcBytes) : "memory");
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

static __device__ __forceinline__ void ldmatrix_x4(unsigned int (&r)[4], unsigned int addr)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr)
                 : "memory");
}

static __device__ __forceinline__ void ldmatrix_x4_trans(unsigned int (&r)[4], unsigned int addr)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr)
                 : "memory");
}

// d += a * b for one m16n8k16 tile.
static __device__ __forceinline__ void mma_16816(float (&d)[4], const unsigned int (&a)[4], unsigned int b0,
                                                 unsigned int b1)
{
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// mbarriers (sm_80+): the ring of blocks inside C. test_wait.parity(p) is true once the phase of
// parity p has completed, so a fresh barrier (phase 0 running) passes a wait for parity 1 at
// once: the first write into each stage waits for nothing.
static __device__ __forceinline__ void mbar_init(unsigned int bar, unsigned int count)
{
    asm volatile("mbarrier.init.shared.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}

static __device__ __forceinline__ void mbar_arrive(unsigned int bar)
{
    asm volatile("{\n\t.reg .b64 st;\n\tmbarrier.arrive.shared.b64 st, [%0];\n\t}\n" ::"r"(bar) : "memory");
}

// Arrives on `bar` once every cp.async this thread issued before has landed (the barrier was
// initialised with one arrival per thread: .noinc does not add to its pending count).
static __device__ __forceinline__ void cp_async_mbar_arrive(unsigned int bar)
{
    asm volatile("cp.async.mbarrier.arrive.noinc.shared.b64 [%0];\n" ::"r"(bar) : "memory");
}

// sm_90's try_wait may suspend the thread until the phase completes, so a waiting
// warp would not take issue slots from the warps still computing; test_wait (sm_80+) spins.
#if __CUDA_ARCH__ >= 900
#define MMA_MBAR_WAIT_OP "mbarrier.try_wait.parity.shared::cta.b64"
#else
#define MMA_MBAR_WAIT_OP "mbarrier.test_wait.parity.shared.b64"
#endif

static __device__ __forceinline__ void mbar_wait(unsigned int bar, unsigned int parity)
{
    asm volatile(
        "{\n\t.reg .pred done;\n"
        "WAIT_%=:\n\t" MMA_MBAR_WAIT_OP " done, [%0], %1;\n\t"
        "@!done bra WAIT_%=;\n\t}\n" ::"r"(bar),
        "r"(parity)
        : "memory");
}

// Eight halves rowPtr[col .. col+7] as a uint4 (low half = lower column), zero
// where the row is out or col + q >= limit. rowPtr is only dereferenced in range.
static __device__ __forceinline__ uint4 load8_scalar(const u16* rowPtr, int col, int limit, bool rowIn)
{
    unsigned int w[4];
#pragma unroll
    for (int q = 0; q < 4; ++q) {
        const unsigned int lo = (rowIn && col + 2 * q < limit) ? rowPtr[col + 2 * q] : 0u;
        const unsigned int hi = (rowIn && col + 2 * q + 1 < limit) ? rowPtr[col + 2 * q + 1] : 0u;
        w[q] = lo | (hi << 16);
    }
    return make_uint4(w[0], w[1], w[2], w[3]);
}

// How a block fills its shared tiles; chosen once per block, each an instantiation of
// gemm_body of its own so that the checks (and registers) of one fill stay out of the
// others' main loops (with every fill in one loop, the pipelined fragments spilled).
enum Fill : int {
    FILL_INNER = 0,   // cp.async; the block tile lies inside C: only the last K slice is checked
    FILL_EDGE = 1,    // cp.async, every 16-byte chunk checked (wholly in or out, zero-filled)
    FILL_SCALAR = 2,  // K or N not a multiple of 8, or A/B not 16-byte aligned: half by half
};

// Where this block's C tile starts: row and column of its top-left element. `volatile`
// reads the block index afresh (the epilogue calls it again, so that nothing of it has to
// stay live through the K loop: at 255 registers such values were spilled).
static __device__ __forceinline__ void block_origin(int& blockRow, int& blockCol)
{
    unsigned int x, y;
    asm volatile("mov.u32 %0, %%ctaid.x;" : "=r"(x));
    asm volatile("mov.u32 %0, %%ctaid.y;" : "=r"(y));
    blockRow = static_cast<int>(y) * BM;
    blockCol = static_cast<int>(x) * BN;
}

// Where 16-byte chunk `chunk` of shared row `row` is stored, in chunks from the row's start:
// inside each aligned group of 8 chunks, chunk c of row r sits at c ^ (r % 8). The 8 rows an
// ldmatrix phase reads (8 rows, one logical chunk) lie in 8 different 16-byte slots, and a
// row's 16-byte copies fill one aligned 128-byte line.
static __device__ __forceinline__ int swizzled(int chunk, int row)
{
    return chunk ^ (row & 7);
}

// The same for A's rows of BK halves. With BK = 32 a row is 4 chunks (64 bytes) and two rows
// share a 128-byte line: chunk c of row r sits at c ^ ((r / 2) % 4). The 8 rows an ldmatrix
// phase reads (rows 8j .. 8j+7, one logical chunk) then lie in 8 different 16-byte slots (row
// parity picks the half line, (r / 2) % 4 the slot in it), and a warp's copies of 8 whole rows
// fill 4 whole lines. Rows 8 apart share the swizzle, as with swizzled().
static __device__ __forceinline__ int swizzle_a(int chunk, int row)
{
    if constexpr (BK == 32) {
        return chunk ^ ((row >> 1) & 3);
    } else {
        return swizzled(chunk, row);
    }
}

template <int FILL>
static __device__ __forceinline__ void gemm_body(const u16* __restrict__ A, const u16* __restrict__ B,
                                                 float* __restrict__ C, int M, int N, int K,
                                                 int blockRow, int blockCol)
{
    extern __shared__ __align__(128) unsigned char smem[];
    u16* As = reinterpret_cast<u16*>(smem);  // STAGES x [BM][A_LD]
    u16* Bs = As + STAGES * A_STAGE;         // STAGES x [BK][B_LD]

    const int tid = threadIdx.x;
    const int lane = tid & 31;
    const int warp = tid >> 5;
    const int warpRow = (warp / WARPS_N) * WM;  // warp tile origin inside the block tile
    const int warpCol = (warp % WARPS_N) * WN;
    const int kTiles = (K + BK - 1) / BK;


    // ---- fill mapping ----------------------------------------------------------
    // Chunk c = tid + i * NTHREADS of a tile (16 bytes = 8 halves). Because
    // NTHREADS is a multiple of the chunks per row, chunk i of a thread is chunk 0
    // moved down by i * (rows per pass): same column, rows + i * A_PASS / B_PASS.
    //   A tile (BM x BK):  row aRow + i*A_PASS, halves aK .. aK+7 of the K slice
    //   B tile (BK x BN):  k row bRow + i*B_PASS, columns bCol .. bCol+7
    const int aRow = tid / A_CHUNKS_ROW;
    const int aK = (tid % A_CHUNKS_ROW) * 8;
    const int bRow = tid / B_CHUNKS_ROW;
    const int bCol = blockCol + (tid % B_CHUNKS_ROW) * 8;  // global column
    const bool bColIn = bCol < N;                           // N % 8 == 0 (vec): the chunk is all in or all out
    // Shared destinations (+ i * A_DST_STEP / B_DST_STEP: the rows move by a multiple of 8, the
    // swizzle stays the same).
    const unsigned int aDst = static_cast<unsigned int>((aRow * A_LD + swizzle_a(tid % A_CHUNKS_ROW, aRow) * 8) * 2);
    const unsigned int bDst = static_cast<unsigned int>((bRow * B_LD + swizzled(tid % B_CHUNKS_ROW, bRow) * 8) * 2);
    const size_t aPass = static_cast<size_t>(A_PASS) * K;   // elements from chunk i to chunk i+1 in A
    const size_t bPass = static_cast<size_t>(B_PASS) * N;   // ... in B
    const size_t bTile = static_cast<size_t>(BK) * N;       // ... from one K slice to the next in B
    // Chunk 0 of the next K slice to be loaded. These pointers may
    // point outside A or B (rows past M, k past K); they are dereferenced only
    // when the chunk is in range.
    const u16* aNext = A + static_cast<size_t>(blockRow + aRow) * K + aK;
    const u16* bNext = B + static_cast<size_t>(bRow) * N + bCol;

    const unsigned int aSmem = smem_u32(As);
    const unsigned int bSmem = smem_u32(Bs);

    // Issue the copies of the next K slice, tile `tile` (tiles are loaded in order 0, 1,
    // 2, ...), into ring stage `stage`, then advance to the slice after it.
    auto load_next = [&](int stage, int tile) {
        const int k0 = tile * BK;
        const unsigned int aStage = aSmem + static_cast<unsigned int>(stage * A_STAGE * 2) + aDst;
        const unsigned int bStage = bSmem + static_cast<unsigned int>(stage * B_STAGE * 2) + bDst;
        if (FILL == FILL_INNER && k0 + BK <= K) {
            // Every chunk in range: the common case of a large aligned problem.
#pragma unroll
            for (int i = 0; i < A_CHUNKS; ++i) {
                cp_async16(aStage + i * A_DST_STEP, aNext + i * aPass, 16);
            }
#pragma unroll
            for (int i = 0; i < B_CHUNKS; ++i) {
                cp_async16(bStage + i * B_DST_STEP, bNext + i * bPass, 16);
            }
        } else if constexpr (FILL != FILL_SCALAR) {
            // K % 8 == 0 and N % 8 == 0: each chunk is wholly in or out; out -> zero-filled.
            // Inside C (FILL_INNER) rows and columns are in range: only k is checked.
#pragma unroll
            for (int i = 0; i < A_CHUNKS; ++i) {
                const bool in = (FILL == FILL_INNER || blockRow + aRow + i * A_PASS < M) &&
                                k0 + aK < K;
                cp_async16(aStage + i * A_DST_STEP, in ? static_cast<const void*>(aNext + i * aPass) : A, in ? 16 : 0);
            }
#pragma unroll
            for (int i = 0; i < B_CHUNKS; ++i) {
                const bool in = (FILL == FILL_INNER || bColIn) &&
                                k0 + bRow + i * B_PASS < K;
                cp_async16(bStage + i * B_DST_STEP, in ? static_cast<const void*>(bNext + i * bPass) : B, in ? 16 : 0);
            }
        } else {
            // Unaligned K or N (or pointers): one half at a time, zero outside, then
            // a 16-byte st.shared. Synchronous, but in the same ring and protocol.
            unsigned char* aDstPtr = smem + stage * A_STAGE * 2 + aDst;
            unsigned char* bDstPtr = smem + (STAGES * A_STAGE + stage * B_STAGE) * 2 + bDst;
            // (Fully unrolled, written unroll(A_CHUNKS): a bare unroll yields other code for sm_100+.)
#pragma unroll(A_CHUNKS)
            for (int i = 0; i < A_CHUNKS; ++i) {
                const int row = blockRow + aRow + i * A_PASS;
                const bool rowIn = row < M;
                const u16* rowPtr = A + static_cast<size_t>(rowIn ? row : 0) * K;
                *reinterpret_cast<uint4*>(aDstPtr + i * A_DST_STEP) = load8_scalar(rowPtr, k0 + aK, K, rowIn);
            }
#pragma unroll(B_CHUNKS)
            for (int i = 0; i < B_CHUNKS; ++i) {
                const int kr = k0 + bRow + i * B_PASS;
                const bool kIn = kr < K;
                const u16* rowPtr = B + static_cast<size_t>(kIn ? kr : 0) * N;
                *reinterpret_cast<uint4*>(bDstPtr + i * B_DST_STEP) = load8_scalar(rowPtr, bCol, N, kIn);
            }
        }
        aNext += BK;
        bNext += bTile;
    };

    // ---- per-lane ldmatrix addresses (bytes, stage 0, kk = 0) --------------
    // A: row warpRow + mi*16 + (lane % 16), col (lane / 16) * 8; + mi*16*A_LD*2, + kk*16*2.
    // B: k row (lane % 16), col warpCol + nj*16 + (lane / 16) * 8; + nj*16*2, + kk*16*B_LD*2.
    // The lane's rows are = lane % 8 (mod 8) whatever mi and kk: its chunk is
    // (lane / 16) ^ (lane % 8) plus the step's chunk, and since every row, stage and block
    // offset is a multiple of 128 bytes, the step's chunk c < 8 is applied to the address as
    // a XOR of c * 16 (frag_addr below).
    const unsigned int aFrag = static_cast<unsigned int>(
        ((warpRow + (lane & 15)) * A_LD + swizzle_a(lane >> 4, lane & 7) * 8) * 2);
    const unsigned int bFrag = static_cast<unsigned int>(
        ((lane & 15) * B_LD + warpCol + swizzled(lane >> 4, lane & 7) * 8) * 2);
    // Byte address of chunk `chunk` (of 16 bytes, along the row) from a lane's address `base`
    // of chunk 0, plus `rows` bytes (a multiple of 128).
    auto frag_addr = [](unsigned int base, int chunk, int rows) -> unsigned int {
        return (base ^ static_cast<unsigned int>((chunk & 7) * 16)) + static_cast<unsigned int>((chunk >> 3) * 128 + rows);
    };

    float acc[MI][NI][4];
#pragma unroll
    for (int mi = 0; mi < MI; ++mi) {
#pragma unroll
        for (int ni = 0; ni < NI; ++ni) {
#pragma unroll
            for (int q = 0; q < 4; ++q) {
                acc[mi][ni][q] = 0.0f;
            }
        }
    }

    // Blocks inside C: per stage a `full` mbarrier (one arrival per thread, made by
    // the hardware when that thread's copies into the stage have landed) and an `empty` one
    // (one arrival per warp, after the warp's last ldmatrix of the stage). A warp waits for the
    // tile it reads and for the stage it overwrites, never for the whole block.
    constexpr bool mbar = FILL == FILL_INNER;
    const unsigned int fullBar = smem_u32(smem + RING_BYTES);   // + stage * 8
    const unsigned int emptyBar = fullBar + STAGES * 8;         // + stage * 8
    if constexpr (mbar) {
        if (tid == 0) {
#pragma unroll
            for (int s = 0; s < STAGES; ++s) {
                mbar_init(fullBar + s * 8, NTHREADS);
                mbar_init(emptyBar + s * 8, NWARPS);
            }
        }
        __syncthreads();  // the barriers are initialised before anyone arrives
    }

    // ---- prologue: tiles 0 .. STAGES-2, one group each ----------------------
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        if (s < kTiles) {
            load_next(s, s);
            if constexpr (mbar) {
                cp_async_mbar_arrive(fullBar + s * 8);
            }
        }
        cp_async_commit();
    }

    // Fragments of k16 step kk of the K slice in ring stage `stage` -> af, bf.
    auto load_frags = [&](unsigned int (&af)[MI][4], unsigned int (&bf)[NI][2], int stage, int kk) {
        const unsigned int aStage = aSmem + static_cast<unsigned int>(stage * A_STAGE * 2) + aFrag;
        const unsigned int bStage = bSmem + static_cast<unsigned int>(stage * B_STAGE * 2) + bFrag;
#pragma unroll
        for (int mi = 0; mi < MI; ++mi) {
            ldmatrix_x4(af[mi], frag_addr(aStage, kk * 2, mi * 16 * A_LD * 2));
        }
#pragma unroll
        for (int nj = 0; nj < NI / 2; ++nj) {
            unsigned int r[4];
            ldmatrix_x4_trans(r, frag_addr(bStage, nj * 2, kk * 16 * B_LD * 2));
            bf[2 * nj][0] = r[0];
            bf[2 * nj][1] = r[1];
            bf[2 * nj + 1][0] = r[2];
            bf[2 * nj + 1][1] = r[3];
        }
    };
    // mma.sync of one k16 step, m16 rows [miBegin, miEnd) of the warp tile.
    auto mma_step = [&](const unsigned int (&af)[MI][4], const unsigned int (&bf)[NI][2], int miBegin = 0,
                        int miEnd = MI) {
#pragma unroll
        for (int mi = miBegin; mi < miEnd; ++mi) {
#pragma unroll
            for (int ni = 0; ni < NI; ++ni) {
                mma_16816(acc[mi][ni], af[mi], bf[ni][0], bf[ni][1]);
            }
        }
    };

    int readStage = 0;             // kt % STAGES
    int writeStage = STAGES - 1;   // (kt + STAGES - 1) % STAGES
    if constexpr (FILL == FILL_INNER) {
        // Software-pipelined fragments (two buffers): step kk's mma.sync are issued after the
        // ldmatrix of step kk + 1, so shared-memory latency hides behind tensor-core work. The
        // wait for the next slice sits in the last k16 step of each slice, after its fragments
        // were read and before its mma.sync: a warp waits there while its previous step's
        // mma.sync still run, and the next slice's first fragments are loaded right after it.
        // Same k16 steps in the same order per accumulator as the plain loop: bit for bit its
        // result. The copies are kept cheap and off the barrier: iterations whose next tile
        // lies wholly inside K (all but the last STAGES-1 or so) issue their copies with no
        // checks, spread over the first SPREAD k16 steps (iteration(kt, true)); the rest check
        // k and issue them at step 0 (iteration(kt, false)). Two loops, one body each, so that
        // neither carries the other's checks (ptxas put about 120 instructions of checked copy
        // issue between each slice barrier and the first mma.sync when they shared one).
        //   The mbarriers: no groups and no block barrier. Tile j sits in stage j % STAGES and
        //   completes phase j / STAGES of both barriers of that stage; a warp waits on `full`
        //   for the tile it reads next, arrives on `empty` after its last ldmatrix of a tile,
        //   and each thread waits on `empty` for tile kt-1 before copying tile kt+STAGES-1
        //   over it (parities tracked as bits that flip when the stage index wraps).
        unsigned int af[2][MI][4];
        unsigned int bf[2][NI][2];
        unsigned int readParity = 0;    // phase parity of the tile in readStage
        int writeTo = STAGES - 1;       // the stage of tile kt-1 (kt + STAGES - 1 is copied into it)
        unsigned int writeParity = 1;   // phase parity of tile kt-1 there (1 at kt = 0: passes at once)
        mbar_wait(fullBar, 0);
        load_frags(af[0], bf[0], 0, 0);
        enum : int { CHUNKS = A_CHUNKS + B_CHUNKS };
        // The steady loop's copies of k16 step kk (chunk c, A's first, then B's, is issued in step
        // c * SPREAD / CHUNKS), and after the last of them the arrival on `full`.
        auto issue_copies = [&](int kk) {
            const unsigned int aStage = aSmem + static_cast<unsigned int>(writeTo * A_STAGE * 2) + aDst;
            const unsigned int bStage = bSmem + static_cast<unsigned int>(writeTo * B_STAGE * 2) + bDst;
#pragma unroll
            for (int c = 0; c < CHUNKS; ++c) {
                if (c * SPREAD / CHUNKS == kk) {
                    if (c < A_CHUNKS) {
                        cp_async16(aStage + c * A_DST_STEP, aNext + c * aPass, 16);
                    } else {
                        const int i = c - A_CHUNKS;
                        cp_async16(bStage + i * B_DST_STEP, bNext + i * bPass, 16);
                    }
                }
            }
            if (kk == SPREAD - 1) {
                aNext += BK;
                bNext += bTile;
                cp_async_mbar_arrive(fullBar + writeTo * 8);
            }
        };
        // Whether the steady loop issues step kk's copies at the start of the step (every copy
        // step after the first) rather than among its mma.sync; `front` and `back` each take the
        // steps the other leaves.
        auto copies_early = [](int kk) { return kk != 0; };
        // One k16 step kk of iteration kt in two halves: `front` (early copies, then the ldmatrix of
        // the next step: in the last step after the wait for tile kt+1) and `back` (this step's
        // mma.sync, with the wait on `empty` and the copies among them).
        auto front = [&](int kt, bool full, int kk) {
            if (full && copies_early(kk)) {
                // Issued before the step's ldmatrix: ptxas spreads them between the mma.sync.
                issue_copies(kk);
            }
            if (kk == KSTEPS - 1) {
                readStage = readStage + 1 == STAGES ? 0 : readStage + 1;
                readParity ^= readStage == 0 ? 1u : 0u;
                // The last tile has no successor to wait for (the steady loop always has).
                if (full || kt + 1 < kTiles) {
                    mbar_wait(fullBar + readStage * 8, readParity);  // everyone's copies of tile kt+1
                }
                load_frags(af[0], bf[0], readStage, 0);  // after the last tile: read, unused
            } else {
                load_frags(af[(kk + 1) & 1], bf[(kk + 1) & 1], readStage, kk + 1);
                if (kk == KSTEPS - 2) {
                    // This warp's last ldmatrix of tile kt was just issued: release its stage.
                    __syncwarp();
                    if (lane == 0) {
                        mbar_arrive(emptyBar + readStage * 8);
                    }
                }
            }
        };
        auto back = [&](int kt, bool full, int kk) {
            mma_step(af[kk & 1], bf[kk & 1], 0, MI / 2);
            if (kk == 0 && (full || kt + STAGES - 1 < kTiles)) {
                mbar_wait(emptyBar + writeTo * 8, writeParity);  // every warp has read tile kt-1
            }
            if (full) {
                if (!copies_early(kk)) {
                    issue_copies(kk);
                }
            } else if (kk == 0) {
                if (kt + STAGES - 1 < kTiles) {
                    load_next(writeTo, kt + STAGES - 1);
                    cp_async_mbar_arrive(fullBar + writeTo * 8);
                }
                cp_async_commit();
            }
            mma_step(af[kk & 1], bf[kk & 1], MI / 2, MI);
        };
        // `full` is a constant at both calls: inlined, each loop keeps only its own branch.
        auto iteration = [&](int kt, bool full) {
#pragma unroll
            for (int kk = 0; kk < KSTEPS; ++kk) {
                front(kt, full, kk);
                back(kt, full, kk);
            }
            writeTo = writeTo + 1 == STAGES ? 0 : writeTo + 1;
            writeParity ^= writeTo == 0 ? 1u : 0u;
        };
        // Tile j is whole when (j + 1) * BK <= K; iteration kt loads tile kt + STAGES - 1.
        const int steady = max(0, min(kTiles, K / BK - STAGES + 1));
        int kt = 0;
        for (; kt < steady; ++kt) {
            iteration(kt, true);
        }
        for (; kt < kTiles; ++kt) {
            iteration(kt, false);
        }
    } else {
        // One k16 step at a time (the edge and scalar fills always: with their checks in the
        // loop, the pipelined fragments spilled).
        for (int kt = 0; kt < kTiles; ++kt) {
            cp_async_wait<STAGES - 2>();  // this thread's copies of tile kt have landed
            __syncthreads();              // everyone's have, and everyone is done with tile kt-1

            if (kt + STAGES - 1 < kTiles) {
                load_next(writeStage, kt + STAGES - 1);
            }
            cp_async_commit();

#pragma unroll
            for (int kk = 0; kk < KSTEPS; ++kk) {
                unsigned int af[MI][4];
                unsigned int bf[NI][2];
                load_frags(af, bf, readStage, kk);
                mma_step(af, bf);
            }

            readStage = readStage + 1 == STAGES ? 0 : readStage + 1;
            writeStage = writeStage + 1 == STAGES ? 0 : writeStage + 1;
        }
    }
    cp_async_wait<0>();  // only empty groups can remain; leave nothing in flight

    // ---- epilogue: acc[mi][ni] = C[r0 + g, r0 + g + 8][c0 + 2t, c0 + 2t + 1] --
    // The block's and the thread's place are read again (volatile: not folded into the
    // values computed before the K loop), so nothing of them has to stay live through the
    // loop: at 255 registers such values were spilled.
    unsigned int tidAgain;
    asm volatile("mov.u32 %0, %%tid.x;" : "=r"(tidAgain));
    int eRow, eCol;
    block_origin(eRow, eCol);
    const int eWarp = static_cast<int>(tidAgain >> 5);
    eRow += (eWarp / WARPS_N) * WM;  // the warp tile's origin in C
    eCol += (eWarp % WARPS_N) * WN;
    const int g = (tidAgain & 31) >> 2;
    const int t = tidAgain & 3;
    if constexpr (FILL == FILL_INNER) {
        // Blocks inside C (every element in range), C 16-byte aligned: each
        // warp stages 16 rows of its tile at a time in shared memory (two buffers, so one
        // __syncwarp per 16 rows) and stores them as whole rows of float4, 2 rows of 64 floats
        // per instruction: 4 full 128-byte lines, where a float2 store from the accumulators
        // writes 32 bytes into each of 8 lines (4x the L2 write requests).
        if (aligned16(C)) {
            const int eLane = static_cast<int>(tidAgain & 31);
            __syncthreads();  // every warp has read the ring for the last time
            float* stage = reinterpret_cast<float*>(smem) + eWarp * (2 * 16 * EP_LD);
#pragma unroll
            for (int mi = 0; mi < MI; ++mi) {
                float* buf = stage + (mi & 1) * (16 * EP_LD);
#pragma unroll
                for (int h = 0; h < 2; ++h) {
#pragma unroll
                    for (int ni = 0; ni < NI; ++ni) {
                        *reinterpret_cast<float2*>(buf + (g + 8 * h) * EP_LD + ni * 8 + 2 * t) =
                            make_float2(acc[mi][ni][2 * h], acc[mi][ni][2 * h + 1]);
                    }
                }
                __syncwarp();
                enum : int { ROW_F4 = WN / 4 };  // float4 per staged row
#pragma unroll
                for (int p = 0; p < 16 * ROW_F4 / 32; ++p) {
                    const int r = (p * 32 + eLane) / ROW_F4;
                    const int c4 = (p * 32 + eLane) % ROW_F4;
                    const float4 v = *reinterpret_cast<const float4*>(buf + r * EP_LD + c4 * 4);
                    *reinterpret_cast<float4*>(C + static_cast<size_t>(eRow + mi * 16 + r) * N + eCol + c4 * 4) = v;
                }
                // Buffer (mi & 1) is written again at mi + 2, after every lane passed the
                // __syncwarp of mi + 1, which follows its reads here.
            }
            return;
        }
    }
    const bool pairs = (N % 2 == 0) && ((reinterpret_cast<unsigned long long>(C) & 7ull) == 0);
#pragma unroll
    for (int mi = 0; mi < MI; ++mi) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int row = eRow + mi * 16 + g + h * 8;
            if (row >= M) {
                continue;
            }
            float* cRow = C + static_cast<size_t>(row) * N;
#pragma unroll
            for (int ni = 0; ni < NI; ++ni) {
                const int col = eCol + ni * 8 + 2 * t;
                const float v0 = acc[mi][ni][2 * h];
                const float v1 = acc[mi][ni][2 * h + 1];
                if (pairs) {
                    if (col < N) {  // col even, N even: col + 1 < N too
                        *reinterpret_cast<float2*>(cRow + col) = make_float2(v0, v1);
                    }
                } else {
                    if (col < N) {
                        cRow[col] = v0;
                    }
                    if (col + 1 < N) {
                        cRow[col + 1] = v1;
                    }
                }
            }
        }
    }
}

#endif  // __CUDA_ARCH__ >= 800

extern "C" __global__ void __launch_bounds__(MMA_THREADS, 1)
gemm_mma_fp16(const __half* __restrict__ Ah, const __half* __restrict__ Bh, float* __restrict__ C,
              int M, int N, int K)
{
#if __CUDA_ARCH__ >= 800
    const u16* A = reinterpret_cast<const u16*>(Ah);
    const u16* B = reinterpret_cast<const u16*>(Bh);
    int blockRow, blockCol;
    block_origin(blockRow, blockCol);
    if ((K % 8 != 0) || (N % 8 != 0) || !aligned16(A) || !aligned16(B)) {
        gemm_body<FILL_SCALAR>(A, B, C, M, N, K, blockRow, blockCol);
    } else if (blockRow + BM <= M && blockCol + BN <= N) {
        gemm_body<FILL_INNER>(A, B, C, M, N, K, blockRow, blockCol);
    } else {
        gemm_body<FILL_EDGE>(A, B, C, M, N, K, blockRow, blockCol);
    }
#endif
    // Below sm_80 there is no mma.m16n8k16 / cp.async; min_cc (8, 0) keeps this
    // entry from being launched there.
}
