// Rung 9, wmma-fp16 and wmma-bf16: tensor cores through WMMA, half-precision inputs, fp32 accumulate.
// Over rung 8 (08_warptile_256.cu): tensor cores, 16 x 16 x 16 products per warp instruction.
//
// Block tile 64 x 64 of C, K slices of BK = 32, 128 threads = 4 warps arranged
// 2 x 2; each warp owns a 32 x 32 sub-tile, i.e. 2 x 2 WMMA accumulator
// fragments of 16 x 16 (float). Per K slice a warp loads 2 A fragments and 2
// B fragments (16 x 16 x 16 each) from shared memory and issues 4 mma_sync.
//
// What it teaches: the tensor core multiplies 16 x 16 tiles in one warp-wide
// instruction, so the kernel's job becomes feeding it: the block stages A and
// B tiles through padded shared memory (16-byte global loads, zero fill at
// the edges) and every fragment is reused twice. The accumulators are written
// back through shared memory, which also makes partial edge tiles easy: the
// block stores the whole 64 x 64 tile to shared memory and then writes only
// the in-range part of it to C.
//
// Two entry points over one template: gemm_wmma_fp16 (__half inputs, sm_70+)
// and gemm_wmma_bf16 (__nv_bfloat16 inputs, sm_80+). Both read the inputs as
// raw 16-bit patterns for the copies (0x0000 is +0 in both formats).
// Any M, N, K >= 1. 16-byte global loads need K % 8 == 0, N % 8 == 0 and
// 16-byte aligned A and B; otherwise elements are loaded one at a time.

#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <mma.h>

#define BM 64
#define BN 64
#define BK 32
#define NTHREADS 128
#define A_LD (BK + 8)  // halves per shared row of A (pad: fewer bank conflicts, keeps 32-byte fragment alignment)
#define B_LD (BN + 8)  // halves per shared row of B
#define C_LD (BN + 4)  // floats per shared row of the C staging tile

typedef unsigned short u16;

static __device__ __forceinline__ bool aligned16(const void* p)
{
    return (reinterpret_cast<unsigned long long>(p) & 15ull) == 0;
}

// Eight 16-bit elements rowPtr[col .. col+7] packed in a uint4, zero wherever
// the row is out or col + q >= limit. With vec (limit % 8 == 0, aligned rows)
// the eight are wholly in or out.
static __device__ __forceinline__ uint4 load8_edge(const u16* rowPtr, int col, int limit, bool rowIn, bool vec)
{
    if (vec) {
        return (rowIn && col < limit) ? *reinterpret_cast<const uint4*>(rowPtr + col) : make_uint4(0u, 0u, 0u, 0u);
    }
    unsigned int w[4];
#pragma unroll
    for (int q = 0; q < 4; ++q) {
        const unsigned int lo = (rowIn && col + 2 * q < limit) ? rowPtr[col + 2 * q] : 0u;
        const unsigned int hi = (rowIn && col + 2 * q + 1 < limit) ? rowPtr[col + 2 * q + 1] : 0u;
        w[q] = lo | (hi << 16);
    }
    return make_uint4(w[0], w[1], w[2], w[3]);
}

template <typename T>
static __device__ __forceinline__ void wmma_gemm(const u16* __restrict__ A, const u16* __restrict__ B,
                                                 float* __restrict__ C, int M, int N, int K)
{
    using namespace nvcuda;

    struct InTiles {
        u16 a[BM * A_LD];
        u16 b[BK * B_LD];
    };
    union Smem {
        InTiles in;          // the K-slice tiles, during the main loop
        float c[BM * C_LD];  // the finished block tile, in the epilogue
    };
    __shared__ __align__(128) Smem sm;

    const int tid = threadIdx.x;
    const int warp = tid / 32;
    const int warpRow = (warp / 2) * 32;
    const int warpCol = (warp % 2) * 32;
    const int blockRow = blockIdx.y * BM;
    const int blockCol = blockIdx.x * BN;

    // Fill mapping: 8-element chunks. A slice: 64 rows x 4 chunks, rows aRow
    // and aRow + 32. B slice: 32 rows x 8 chunks, rows bRow and bRow + 16.
    const int aRow = tid / (BK / 8);        // 0..31
    const int aCol = (tid % (BK / 8)) * 8;  // 0, 8, 16, 24
    const int bRow = tid / (BN / 8);        // 0..15
    const int bCol = (tid % (BN / 8)) * 8;  // 0..56

    const bool vec = (K % 8 == 0) && (N % 8 == 0) && aligned16(A) && aligned16(B);
    const bool fullMN = blockRow + BM <= M && blockCol + BN <= N;
    const bool fast = vec && fullMN;

    const int gaRow0 = blockRow + aRow;
    const int gaRow1 = gaRow0 + 32;
    const bool aIn0 = gaRow0 < M;
    const bool aIn1 = gaRow1 < M;
    const u16* aPtr0 = A + static_cast<size_t>(aIn0 ? gaRow0 : 0) * K;
    const u16* aPtr1 = A + static_cast<size_t>(aIn1 ? gaRow1 : 0) * K;
    const int gbCol = blockCol + bCol;

    uint4 aReg[2];
    uint4 bReg[2];
    auto fetch = [&](int k0) {
        if (fast && k0 + BK <= K) {
            aReg[0] = *reinterpret_cast<const uint4*>(aPtr0 + k0 + aCol);
            aReg[1] = *reinterpret_cast<const uint4*>(aPtr1 + k0 + aCol);
            bReg[0] = *reinterpret_cast<const uint4*>(B + static_cast<size_t>(k0 + bRow) * N + gbCol);
            bReg[1] = *reinterpret_cast<const uint4*>(B + static_cast<size_t>(k0 + bRow + 16) * N + gbCol);
        } else {
            aReg[0] = load8_edge(aPtr0, k0 + aCol, K, aIn0, vec);
            aReg[1] = load8_edge(aPtr1, k0 + aCol, K, aIn1, vec);
            const int kb0 = k0 + bRow;
            const int kb1 = kb0 + 16;
            const bool kIn0 = kb0 < K;
            const bool kIn1 = kb1 < K;
            bReg[0] = load8_edge(B + static_cast<size_t>(kIn0 ? kb0 : 0) * N, gbCol, N, kIn0, vec);
            bReg[1] = load8_edge(B + static_cast<size_t>(kIn1 ? kb1 : 0) * N, gbCol, N, kIn1, vec);
        }
    };

    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[2][2];
#pragma unroll
    for (int i = 0; i < 2; ++i) {
#pragma unroll
        for (int j = 0; j < 2; ++j) {
            wmma::fill_fragment(acc[i][j], 0.0f);
        }
    }

    fetch(0);
    for (int k0 = 0; k0 < K; k0 += BK) {
        *reinterpret_cast<uint4*>(&sm.in.a[aRow * A_LD + aCol]) = aReg[0];
        *reinterpret_cast<uint4*>(&sm.in.a[(aRow + 32) * A_LD + aCol]) = aReg[1];
        *reinterpret_cast<uint4*>(&sm.in.b[bRow * B_LD + bCol]) = bReg[0];
        *reinterpret_cast<uint4*>(&sm.in.b[(bRow + 16) * B_LD + bCol]) = bReg[1];
        __syncthreads();

        if (k0 + BK < K) {
            fetch(k0 + BK);  // next slice in flight during the MMAs
        }

        const T* as = reinterpret_cast<const T*>(sm.in.a);
        const T* bs = reinterpret_cast<const T*>(sm.in.b);
#pragma unroll
        for (int kk = 0; kk < BK; kk += 16) {
            wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> fa[2];
            wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::row_major> fb[2];
#pragma unroll
            for (int i = 0; i < 2; ++i) {
                wmma::load_matrix_sync(fa[i], as + (warpRow + i * 16) * A_LD + kk, A_LD);
            }
#pragma unroll
            for (int j = 0; j < 2; ++j) {
                wmma::load_matrix_sync(fb[j], bs + kk * B_LD + warpCol + j * 16, B_LD);
            }
#pragma unroll
            for (int i = 0; i < 2; ++i) {
#pragma unroll
                for (int j = 0; j < 2; ++j) {
                    wmma::mma_sync(acc[i][j], fa[i], fb[j], acc[i][j]);
                }
            }
        }
        __syncthreads();  // also guards the union: sm.c overwrites sm.in below
    }

    // Epilogue through shared memory: fragments -> sm.c -> in-range part of C.
#pragma unroll
    for (int i = 0; i < 2; ++i) {
#pragma unroll
        for (int j = 0; j < 2; ++j) {
            wmma::store_matrix_sync(&sm.c[(warpRow + i * 16) * C_LD + warpCol + j * 16], acc[i][j], C_LD,
                                    wmma::mem_row_major);
        }
    }
    __syncthreads();

    if (fullMN && N % 4 == 0 && aligned16(C)) {
        // Whole tile inside C: float4 stores, a row of 64 floats is 16 float4.
#pragma unroll
        for (int idx = tid; idx < BM * BN / 4; idx += NTHREADS) {
            const int r = idx / (BN / 4);
            const int c = (idx % (BN / 4)) * 4;
            *reinterpret_cast<float4*>(C + static_cast<size_t>(blockRow + r) * N + blockCol + c) =
                *reinterpret_cast<const float4*>(&sm.c[r * C_LD + c]);
        }
    } else {
        for (int idx = tid; idx < BM * BN; idx += NTHREADS) {
            const int r = idx / BN;
            const int c = idx % BN;
            const int row = blockRow + r;
            const int col = blockCol + c;
            if (row < M && col < N) {
                C[static_cast<size_t>(row) * N + col] = sm.c[r * C_LD + c];
            }
        }
    }
}

extern "C" __global__ void __launch_bounds__(NTHREADS)
gemm_wmma_fp16(const __half* __restrict__ A, const __half* __restrict__ B, float* __restrict__ C,
               int M, int N, int K)
{
    wmma_gemm<__half>(reinterpret_cast<const u16*>(A), reinterpret_cast<const u16*>(B), C, M, N, K);
}

extern "C" __global__ void __launch_bounds__(NTHREADS)
gemm_wmma_bf16(const __nv_bfloat16* __restrict__ A, const __nv_bfloat16* __restrict__ B,
               float* __restrict__ C, int M, int N, int K)
{
#if __CUDA_ARCH__ >= 800
    wmma_gemm<__nv_bfloat16>(reinterpret_cast<const u16*>(A), reinterpret_cast<const u16*>(B), C, M, N, K);
#endif
    // Below sm_80 there are no bf16 tensor-core fragments; the declaration's
    // min_cc (8, 0) keeps this entry from being launched there.
}
