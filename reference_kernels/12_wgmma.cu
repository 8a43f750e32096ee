// Rung 12, wgmma-fp16 and wgmma-bf16, the Hopper rung: TMA + wgmma + an mbarrier pipeline,
// warp-specialised and persistent.
// Over rung 11 (11_mma_fp16.cu) and rung 10 (10_pipeline.cu): the copy engine (TMA) instead of
// threads' copies, and asynchronous tensor cores (wgmma) reading shared memory.
//
// C (M x N, fp32) = A (M x K) @ B (K x N), A and B row-major fp16 (or bf16 with -DWG_BF16=1),
// fp32 accumulate. Built for sm_90a only: wgmma and setmaxnreg exist on compute capability 9.0
// alone, so this rung is claimed there and skipped everywhere else.
//
// What it adds to the rung below (11_mma_fp16.cu: mma.sync m16n8k16 fed by ldmatrix from a
// cp.async ring that every thread fills and then waits for with __syncthreads):
//
//  1. The copy engine moves the tiles (TMA, cp.async.bulk.tensor). One thread asks for a whole
//     128 x 64 tile of A and four 64 x 64 tiles of B per K slice; the engine computes the
//     addresses, fills zeros where a tile hangs over the matrix edge (so ragged M, N, K need no
//     code here), and writes shared memory in the 128-byte swizzled layout that the tensor cores
//     read without bank conflicts. The tensor maps describing A and B are built on the host
//     (cuTensorMapEncodeTiled) and passed by value as __grid_constant__ parameters.
//  2. The tensor cores read their operands straight from shared memory (wgmma.mma_async, a
//     warpgroup of 4 warps computing 64 x 256 x 16 per instruction, described by 64-bit shared
//     memory descriptors): no ldmatrix, no operand registers, and the instruction is
//     asynchronous, so a warpgroup issues a K slice's four wgmma and then waits only for the
//     previous slice's.
//  3. mbarriers replace __syncthreads: each stage of the ring has a "full" barrier (the copy
//     engine completes it when the stage's bytes have landed: expect_tx / complete_tx) and an
//     "empty" barrier (each consumer warp arrives when its wgmma have read the stage).
//  4. Warp specialisation: warpgroup 0 is the producer (one thread issues every TMA copy), and
//     warpgroups 1 and 2 are consumers (64 rows of the 128 x 256 block tile each). setmaxnreg
//     moves registers from the producer (40) to the consumers (232), who hold 128 fp32
//     accumulators per thread.
//  5. Persistent tiles: one block per SM walks the tiles tile = blockIdx.x, + gridDim.x, ...,
//     numbered in groups of WG_GROUP_M tile rows so that the blocks working at the same time
//     share rows of A and columns of B in L2. The producer runs up to WG_STAGES slices ahead,
//     across tile boundaries, so the next tile's loads overlap this tile's epilogue.
//  6. The epilogue leaves through the copy engine too (WG_STORE_BUFFERS=2): each consumer writes
//     its 64 x 256 fp32 block into shared memory one 64 x 32 box at a time (two 8 KB buffers,
//     128-byte swizzled so a warp's stores hit every bank evenly) and one thread hands each box
//     to a TMA store (cp.async.bulk.tensor, shared -> global). The consumers then go straight
//     on to the next tile's wgmma while the copy engine writes C; before, every tile ended with
//     both consumers storing 128 KB from registers while the tensor cores idled. Measured on the
//     H200 (2026-12-02, the suite's speed check, cuBLAS of the same precision in the same test):
//     4096^3 0.964 -> 1.004 of cuBLAS fp16 and 0.966 -> 1.001 bf16; 8192^3 0.995 -> 1.006 fp16
//     and 0.993 -> 1.009 bf16; in a later ladder run 0.997 / 1.002 at 4096^3: level with cuBLAS,
//     within its run-to-run spread (bench/NOTES.md, "TMA-store epilogue").
//
// Shared memory layouts (both are what TMA's 128-byte swizzle writes and what wgmma's 128-byte
// swizzle mode reads; every stage buffer is 1024-byte aligned, the swizzle pattern's period):
//  - A stage: 128 rows (M) of 64 halves (K) = 128 bytes each, K-major. A wgmma reads 64 rows x
//    16 K; the next 16 K are 32 bytes further along the row (the hardware applies the XOR).
//    Descriptor: stride between 8-row groups (SBO) 1024 bytes.
//  - B stage: four 64 (K) x 64 (N) boxes of 8 KB, each 64 rows (K) of 128 bytes (N), N-major
//    ("transposed" B, imm-trans-b = 1: B is row-major K x N). Descriptor: 1024 bytes between
//    8-row (K) groups (SBO), 8192 bytes between the 64-column (N) boxes (LBO); the next 16 K
//    start 2048 bytes further.
//
// Requirements of the TMA path, checked by the launcher (wgmma.py): K and N multiples of 8
// (TMA wants 16-byte row strides) and 16-byte aligned A, B and C. Other shapes go to
// gemm_wgmma_tail below, a plain shared-memory tiled kernel that is correct for any shape.
//
// Parameters (-D): WG_BF16 (0: fp16, 1: bf16 inputs), WG_STAGES (K slices in the ring; four
// 48 KB stages fill 192 of the 227 KB a block may have), WG_GROUP_M (tile rows per group),
// WG_STORE_BUFFERS (0: C stored from the
// accumulators with float2 stores, no tensor map of C; N: the TMA-store epilogue through N 8 KB
// boxes a consumer; 4 stages leave room for 2, 3 stages for up to 5, no faster: NOTES.md).
//
// The one-wave build (WG_PINGPONG=1, WG_STAGES=5, WG_STORE_BUFFERS=0; the launcher runs it when
// the 128 x 256 tiles are at most one per SM, e.g. 2048^3 on 132 SMs; NOTES.md "Ping-pong
// consumers"): each consumer warpgroup gets a tile of its own, 64 x 256, instead of half of a
// shared 128 x 256 one: consumer 0 takes the block's work items 0, 2, 4, ..., consumer 1 items
// 1, 3, 5, ..., and their K loops take turns (an mbarrier per consumer says "your turn"), so
// while one consumer stores its finished tile from registers the other one's wgmma keep the
// tensor cores busy. With one tile a block nothing else could overlap the end of the tile: the
// TMA store above overlaps the *next* tile's wgmma, and there is none. A stage holds 64 rows of
// A (8 KB) and the 256 columns of B (32 KB); five stages fit. The price: each 64 x 256 tile
// reads all of B's 256 columns, so L2 -> SM traffic per flop is 5/3 of the shared tile's
// (clusters of two blocks multicasting B bring it back: bench/candidates/wgmma_clusters.cu, -DWG_CLUSTER=2,
// measured no faster). Measured on the H200
// (2026-12-02, against cuBLAS in the same process): 2048^3, one tile a block, 0.987 of cuBLAS
// fp16 (0.943 with the shared tile and stores from registers); 4096^3 0.90-0.92 (0.976 with
// the shared tile): once blocks have several tiles the extra B traffic costs more than the
// hidden epilogue saves, so big problems keep the shared 128 x 256 tile.
//
// Tried on the H200 and not kept (NOTES.md, "Issue 29", sixth and seventh): stream-K for the last
// wave (4096^3 is 3.88 waves of tiles; each cut tile computed in two pieces, the second to finish
// adding the first's sums): 1.7 % slower at 4096^3, and the schedule alone, with no fix-up at all,
// was worth only 0.6-0.8 %, since a block of the cut region ends two pieces instead of one tile;
// beginning the next tile's first K slices on each stored quarter of the accumulators; per-warp
// store boxes; a lag between the two consumers. None was faster.

#ifndef WG_BF16
#define WG_BF16 0
#endif
#ifndef WG_STAGES
#define WG_STAGES 4
#endif
#ifndef WG_GROUP_M
#define WG_GROUP_M 16
#endif
#ifndef WG_PINGPONG
#define WG_PINGPONG 0
#endif
#ifndef WG_STORE_BUFFERS
#define WG_STORE_BUFFERS 2
#endif

#if WG_BF16
#define WG_TYPE "bf16"
#else
#define WG_TYPE "f16"
#endif

typedef unsigned int u32;
typedef unsigned long long u64;

constexpr int BM = WG_PINGPONG ? 64 : 128;  // tile rows: two consumer warpgroups of 64 (one in ping-pong)
constexpr int BN = 256;                  // block tile columns: one m64n256k16 per warpgroup
constexpr int BK = 64;                   // K slice: 64 halves = one 128-byte swizzle row
constexpr int CONSUMERS = 2;
constexpr int THREADS = 128 * (1 + CONSUMERS);
constexpr int B_BOX = 64;                // N columns per TMA box of B (128 bytes)
constexpr int A_STAGE_BYTES = BM * BK * 2;               // 16 KB
constexpr int B_BOX_BYTES = BK * B_BOX * 2;              // 8 KB
constexpr int B_STAGE_BYTES = BK * BN * 2;               // 32 KB
constexpr int STAGE_BYTES = A_STAGE_BYTES + B_STAGE_BYTES;
constexpr int B_BOXES_PER_BLOCK = BN / B_BOX;  // the boxes of B a block loads
#if WG_STORE_BUFFERS
// The TMA-store epilogue: each consumer stages its 64 x 256 fp32 block in boxes of 64 rows x 32
// columns (128 bytes a row: one swizzle row) through WG_STORE_BUFFERS buffers of its own.
constexpr int C_BOX_COLS = 32;
constexpr int C_BOX_BYTES = 64 * C_BOX_COLS * 4;         // 8 KB
constexpr int C_BUFFERS = WG_STORE_BUFFERS;
constexpr int C_STAGE_BYTES = CONSUMERS * C_BUFFERS * C_BOX_BYTES;  // after the stages
#endif
// Dynamic shared memory the launcher gives (wgmma.py): WG_STAGES * STAGE_BYTES, C_STAGE_BYTES, the
// 2 * WG_STAGES barriers of 8 bytes (2 more in ping-pong), and 1024 bytes of room to align the start.

// A CUtensorMap is 128 opaque bytes, 64-byte aligned (cuda.h is not needed for that).
struct alignas(64) TensorMap {
    u64 opaque[16];
};

// ---------------------------------------------------------------------------------------------
// PTX wrappers

__device__ __forceinline__ u32 smem_addr(const void* p) {
    return static_cast<u32>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void mbar_init(u32 bar, u32 count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(bar), "r"(count) : "memory");
}

// The producer announces how many bytes the copy engine will deliver to this stage.
__device__ __forceinline__ void mbar_expect_bytes(u32 bar, u32 bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(bar), "r"(bytes) : "memory");
}

__device__ __forceinline__ void mbar_arrive(u32 bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" :: "r"(bar) : "memory");
}

// Wait until the barrier's phase with this parity has completed.
__device__ __forceinline__ void mbar_wait(u32 bar, u32 parity) {
    u32 done;
    do {
        asm volatile(
            "{\n"
            ".reg .pred p;\n"
            "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
            "selp.u32 %0, 1, 0, p;\n"
            "}\n"
            : "=r"(done) : "r"(bar), "r"(parity) : "memory");
    } while (!done);
}

// One 2-D TMA copy: the box at element coordinates (c0 innermost, c1) of the tensor map into
// shared memory at dst, completing `bytes` on the barrier.
__device__ __forceinline__ void tma_load(u32 dst, const TensorMap* map, int c0, int c1, u32 bar) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
        " [%0], [%1, {%2, %3}], [%4];"
        :: "r"(dst), "l"(reinterpret_cast<u64>(map)), "r"(c0), "r"(c1), "r"(bar) : "memory");
}

#if WG_STORE_BUFFERS
// The epilogue's TMA store: a box of fp32 from shared memory to C at (c0 innermost, c1). The
// copy engine clips the box at C's edges, so ragged M and N write nothing outside C.
__device__ __forceinline__ void tma_store(const TensorMap* map, u32 src, int c0, int c1) {
    asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];"
                 :: "l"(reinterpret_cast<u64>(map)), "r"(c0), "r"(c1), "r"(src) : "memory");
    asm volatile("cp.async.bulk.commit_group;" ::: "memory");
}

// Wait until at most N of this thread's stores still read their shared-memory source.
template <int N>
__device__ __forceinline__ void tma_store_wait_read() {
    asm volatile("cp.async.bulk.wait_group.read %0;" :: "n"(N) : "memory");
}

// Wait until every store of this thread has written C.
__device__ __forceinline__ void tma_store_wait_all() { asm volatile("cp.async.bulk.wait_group 0;" ::: "memory"); }

// The 128 threads of consumer c only (named barrier 1 + c; 0 is __syncthreads').
__device__ __forceinline__ void consumer_sync(int c) {
    asm volatile("bar.sync %0, 128;" :: "r"(1 + c) : "memory");
}

__device__ __forceinline__ void st_shared_f2(u32 addr, float x, float y) {
    asm volatile("st.shared.v2.f32 [%0], {%1, %2};" :: "r"(addr), "f"(x), "f"(y) : "memory");
}
#endif

// wgmma shared-memory matrix descriptor: start address, leading and stride byte offsets (all
// in 16-byte units) and the swizzle mode (1 = 128-byte swizzle) in bits 62-63.
__device__ __forceinline__ u64 smem_desc(u32 addr, u32 lbo, u32 sbo) {
    return static_cast<u64>((addr & 0x3FFFF) >> 4) | (static_cast<u64>(lbo >> 4) << 16)
         | (static_cast<u64>(sbo >> 4) << 32) | (1ull << 62);
}

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wgmma_wait() { asm volatile("wgmma.wait_group.sync.aligned %0;" :: "n"(N) : "memory"); }

// Keep the compiler from moving accumulator reads or writes across a wgmma wait or fence.
__device__ __forceinline__ void fence_acc(float (&d)[128]) {
#pragma unroll
    for (int i = 0; i < 128; ++i) asm volatile("" : "+f"(d[i]) :: "memory");
}

// d (64 x 256 fp32, 128 registers a thread) = A (64 x 16, K-major) @ B (16 x 256, N-major)
// + (accumulate ? d : 0). Register d[4j + 2h + c] of thread (warp w, lane l) of the warpgroup
// holds row 16w + l/4 + 8h, column 8j + 2(l%4) + c.
__device__ __forceinline__ void wgmma_64x256x16(float (&d)[128], u64 desc_a, u64 desc_b, int accumulate) {
    asm volatile(
        "{\n"
        ".reg .pred p;\n"
        "setp.ne.b32 p, %130, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n256k16.f32." WG_TYPE "." WG_TYPE "\n"
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31,"
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47,"
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63,"
        "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79,"
        "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95,"
        "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111,"
        "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127},\n"
        "%128, %129, p, 1, 1, 0, 1;\n"  // scale-d, scale-a, scale-b, A K-major (0), B N-major (1)
        "}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
          "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
          "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
          "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
          "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),
          "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),
          "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]),
          "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]),
          "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]),
          "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]),
          "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]),
          "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]),
          "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
        : "l"(desc_a), "l"(desc_b), "r"(accumulate));
}

// Work item (a tile) -> its first row and first column. Work items are numbered down groups of
// WG_GROUP_M tile rows, then across.
__device__ __forceinline__ void tile_origin(int item, int items_m, int tiles_n, int& m0, int& n0) {
    constexpr int group = WG_GROUP_M;
    const int per_group = group * tiles_n;
    const int first_m = (item / per_group) * group;
    const int rows = min(items_m - first_m, group);
    const int in_group = item % per_group;
    m0 = (first_m + in_group % rows) * BM;
    n0 = (in_group / rows) * BN;
}

#if WG_PINGPONG
// Ping-pong: move a consumer's place in the ring past the other consumer's tile (n slices).
__device__ __forceinline__ void skip_slices(int n, int& stage, u32& phase) {
    stage += n % WG_STAGES;
    phase ^= (n / WG_STAGES) & 1;
    if (stage >= WG_STAGES) { stage -= WG_STAGES; phase ^= 1; }
}
#endif

// ---------------------------------------------------------------------------------------------
// The TMA + wgmma kernel. Grid: min(work items, blocks that fit at once) blocks
// of THREADS threads (the launcher sizes it), with the dynamic shared memory above. tensor_a: dims (K, M), box (BK, BM); tensor_b: dims (N, K), box
// (B_BOX, BK); both 128-byte swizzled, zero fill out of bounds.


extern "C" __global__ void __launch_bounds__(THREADS, 1)
gemm_wgmma(const __grid_constant__ TensorMap tensor_a, const __grid_constant__ TensorMap tensor_b,
#if WG_STORE_BUFFERS
           const __grid_constant__ TensorMap tensor_c,
#endif
           float* __restrict__ C, int M, int N, int K)
{
    extern __shared__ unsigned char smem_raw[];
    const u32 base = (smem_addr(smem_raw) + 1023) & ~1023u;
    const u32 a_tiles = base;                                   // WG_STAGES x A_STAGE_BYTES
    const u32 b_tiles = base + WG_STAGES * A_STAGE_BYTES;       // WG_STAGES x B_STAGE_BYTES
#if WG_STORE_BUFFERS
    const u32 c_stage = base + WG_STAGES * STAGE_BYTES;         // C_STAGE_BYTES: the epilogue's boxes
    const u32 full_bar = c_stage + C_STAGE_BYTES;               // WG_STAGES x 8 bytes
#else
    const u32 full_bar = base + WG_STAGES * STAGE_BYTES;        // WG_STAGES x 8 bytes
#endif
    const u32 empty_bar = full_bar + WG_STAGES * 8;             // WG_STAGES x 8 bytes
#if WG_PINGPONG
    const u32 turn_bar = empty_bar + WG_STAGES * 8;             // 2 x 8 bytes: consumer c's turn
#endif

    const int items_m = (M + BM - 1) / BM;
    const int tiles_n = (N + BN - 1) / BN;
    const int items = items_m * tiles_n;
    const int k_slices = (K + BK - 1) / BK;
    const int warpgroup = threadIdx.x / 128;
    const int first_item = blockIdx.x, item_step = gridDim.x;

    if (threadIdx.x == 0) {
        for (int s = 0; s < WG_STAGES; ++s) {
            mbar_init(full_bar + 8 * s, 1);                     // the producer's expect_tx
            mbar_init(empty_bar + 8 * s, (WG_PINGPONG ? 1 : CONSUMERS) * 4);  // each consumer warp
        }
#if WG_PINGPONG
        mbar_init(turn_bar, 1);
        mbar_init(turn_bar + 8, 1);
#endif
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    __syncthreads();  // the barriers are ready before anyone copies or arrives

    if (warpgroup == 0) {
        // ---- producer: one thread issues every copy ----
        asm volatile("setmaxnreg.dec.sync.aligned.u32 40;");
        if (threadIdx.x == 0) {
            int stage = 0;
            u32 phase = 0;
            for (int item = first_item; item < items; item += item_step) {
                int m0, n0;
                tile_origin(item, items_m, tiles_n, m0, n0);
                for (int ks = 0; ks < k_slices; ++ks) {
                    mbar_wait(empty_bar + 8 * stage, phase ^ 1);  // a fresh ring starts empty
                    const u32 bar = full_bar + 8 * stage;
                    mbar_expect_bytes(bar, STAGE_BYTES);          // out-of-bounds zeros count too
                    tma_load(a_tiles + stage * A_STAGE_BYTES, &tensor_a, ks * BK, m0, bar);
#pragma unroll
                    for (int j = 0; j < B_BOXES_PER_BLOCK; ++j) {
                        tma_load(b_tiles + stage * B_STAGE_BYTES + j * B_BOX_BYTES, &tensor_b,
                                 n0 + j * B_BOX, ks * BK, bar);
                    }
                    if (++stage == WG_STAGES) { stage = 0; phase ^= 1; }
                }
            }
        }
    } else {
        // ---- consumers: warpgroup c computes rows 64c .. 64c + 63 of each block tile ----
        asm volatile("setmaxnreg.inc.sync.aligned.u32 232;");
        const int c = warpgroup - 1;
        const int warp = (threadIdx.x / 32) % 4;
        const int lane = threadIdx.x % 32;
        float d[128];
        int stage = 0;
        u32 phase = 0;
#if WG_PINGPONG
        // Consumer c takes every other work item of the block's walk, starting with the c-th;
        // the ring holds both consumers' slices in walk order, so each skips the other's.
        u32 turns = 0;  // tiles this consumer has taken
        if (c == 1) skip_slices(k_slices, stage, phase);
        for (int item = first_item + c * item_step; item < items; item += 2 * item_step) {
#else
        for (int item = first_item; item < items; item += item_step) {
#endif
            int m0, n0;
            tile_origin(item, items_m, tiles_n, m0, n0);
#if WG_PINGPONG
            // Our turn comes when the other consumer has issued every wgmma of the tile before
            // ours. This also keeps us at most one ring phase ahead of the producer, which the
            // parity waits below need.
            if (c == 1 || turns > 0) mbar_wait(turn_bar + 8 * c, (turns + c + 1) & 1);
#endif
            int previous = 0;
            for (int ks = 0; ks < k_slices; ++ks) {
                mbar_wait(full_bar + 8 * stage, phase);
                const u32 a = a_tiles + stage * A_STAGE_BYTES + (WG_PINGPONG ? 0 : c * 64 * 128);
                const u32 b = b_tiles + stage * B_STAGE_BYTES;
                wgmma_fence();
#pragma unroll
                for (int k = 0; k < BK / 16; ++k)
                    wgmma_64x256x16(d, smem_desc(a + 32 * k, 16, 1024), smem_desc(b + 2048 * k, B_BOX_BYTES, 1024),
                                    ks > 0 || k > 0);
                wgmma_commit();
                if (ks > 0) {
                    // The previous slice's wgmma are done: hand its stage back to the producer.
                    wgmma_wait<1>();
                    if (lane == 0) mbar_arrive(empty_bar + 8 * previous);
                }
                previous = stage;
                if (++stage == WG_STAGES) { stage = 0; phase ^= 1; }
            }
#if WG_PINGPONG
            // Every wgmma of this tile is issued: the other consumer's K loop may start while
            // ours drain and we store.
            if (threadIdx.x % 128 == 0) mbar_arrive(turn_bar + 8 * (1 - c));
            ++turns;
#endif
            wgmma_wait<0>();
            fence_acc(d);
            if (lane == 0) mbar_arrive(empty_bar + 8 * previous);

#if WG_STORE_BUFFERS
            // Epilogue through shared memory: the consumer's 64 x 256 block leaves in 8 boxes of
            // 64 x 32, each written into a staging buffer in the 128-byte swizzled layout (row r's
            // 16-byte chunk i sits at chunk i ^ (r % 8): a warp's float2 stores hit every bank
            // evenly) and stored by the copy engine, which then writes C while the consumers go on
            // to the next tile's wgmma. Only the last boxes of the last tile are waited for.
            {
                const u32 buffers = c_stage + c * C_BUFFERS * C_BOX_BYTES;
                const int r0 = warp * 16 + lane / 4;   // this thread's rows in the box: r0, r0 + 8
#pragma unroll
                for (int box = 0; box < BN / C_BOX_COLS; ++box) {
                    const u32 buf = buffers + (box % C_BUFFERS) * C_BOX_BYTES;
                    // The store that used this buffer C_BUFFERS boxes ago has read it.
                    if (threadIdx.x % 128 == 0) tma_store_wait_read<C_BUFFERS - 1>();
                    consumer_sync(c);
#pragma unroll
                    for (int jj = 0; jj < C_BOX_COLS / 8; ++jj) {
                        const int j = box * (C_BOX_COLS / 8) + jj;
#pragma unroll
                        for (int h = 0; h < 2; ++h) {
                            const int r = r0 + 8 * h;
                            const u32 chunk = static_cast<u32>(2 * jj + (lane % 4) / 2) ^ static_cast<u32>(r % 8);
                            st_shared_f2(buf + r * 128 + chunk * 16 + 8 * (lane % 2), d[4 * j + 2 * h],
                                         d[4 * j + 2 * h + 1]);
                        }
                    }
                    // Our stores must be visible to the copy engine (the async proxy) before it reads.
                    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
                    consumer_sync(c);
                    if (threadIdx.x % 128 == 0)
                        tma_store(&tensor_c, buf, n0 + box * C_BOX_COLS, m0 + (WG_PINGPONG ? 0 : c * 64));
                }
            }
#else
            // Epilogue: each thread writes float2 pairs straight from its accumulators.
            const int row = m0 + (WG_PINGPONG ? 0 : c * 64) + warp * 16 + lane / 4;
            const int col0 = n0 + 2 * (lane % 4);
            const bool inside = m0 + BM <= M && n0 + BN <= N;
#pragma unroll
            for (int j = 0; j < BN / 8; ++j) {
                const int col = col0 + 8 * j;
#pragma unroll
                for (int h = 0; h < 2; ++h) {
                    const int r = row + 8 * h;
                    if (inside || (r < M && col < N))  // N is even here, so col < N covers col + 1
                        *reinterpret_cast<float2*>(C + static_cast<long long>(r) * N + col) =
                            make_float2(d[4 * j + 2 * h], d[4 * j + 2 * h + 1]);
                }
            }
#endif
#if WG_PINGPONG
            skip_slices(k_slices, stage, phase);  // the other consumer's next tile
#endif
        }
#if WG_STORE_BUFFERS
        // Shared memory must outlive the copies that read it, and C be written when we finish.
        if (threadIdx.x % 128 == 0) tma_store_wait_all();
#endif
    }
}

// ---------------------------------------------------------------------------------------------
// The tail path: any M, N, K and any alignment (TMA needs 16-byte row strides, so K or N not a
// multiple of 8 comes here). 64 x 64 block tiles, 16 x 16 threads of 4 x 4 outputs, K slices of
// 16 through shared memory; fp32 accumulation in K order. Grid: (ceil(N/64), ceil(M/64)).

__device__ __forceinline__ float to_float(unsigned short bits) {
#if WG_BF16
    return __uint_as_float(static_cast<u32>(bits) << 16);
#else
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(bits));
    return f;
#endif
}

extern "C" __global__ void __launch_bounds__(256)
gemm_wgmma_tail(const unsigned short* __restrict__ A, const unsigned short* __restrict__ B,
                float* __restrict__ C, int M, int N, int K)
{
    __shared__ float As[16][64 + 1];
    __shared__ float Bs[16][64];
    const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
    const int m0 = blockIdx.y * 64, n0 = blockIdx.x * 64;
    float acc[4][4] = {};
    for (int k0 = 0; k0 < K; k0 += 16) {
        for (int i = threadIdx.x; i < 64 * 16; i += 256) {
            const int r = i / 16, kk = i % 16;          // A: 64 rows x 16 K
            const int gr = m0 + r, gk = k0 + kk;
            As[kk][r] = (gr < M && gk < K) ? to_float(A[static_cast<long long>(gr) * K + gk]) : 0.0f;
            const int kb = i / 64, cc = i % 64;         // B: 16 K x 64 columns
            const int bk = k0 + kb, bc = n0 + cc;
            Bs[kb][cc] = (bk < K && bc < N) ? to_float(B[static_cast<long long>(bk) * N + bc]) : 0.0f;
        }
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < 16; ++kk) {
            float a[4], b[4];
#pragma unroll
            for (int i = 0; i < 4; ++i) a[i] = As[kk][ty + 16 * i];
#pragma unroll
            for (int j = 0; j < 4; ++j) b[j] = Bs[kk][tx + 16 * j];
#pragma unroll
            for (int i = 0; i < 4; ++i)
#pragma unroll
                for (int j = 0; j < 4; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const int r = m0 + ty + 16 * i, col = n0 + tx + 16 * j;
            if (r < M && col < N) C[static_cast<long long>(r) * N + col] = acc[i][j];
        }
}
