// CUTLASS's own Ampere tensor-core GEMM (the 2.x device::Gemm on mma.sync.m16n8k16, ldmatrix,
// a cp.async multistage mainloop), built as a plain C function so that pytest-gemm can run it
// as somebody else's kernel (bench/cutlass_sm80/launchers.py). It answers one question for
// issue 18: how close to cuBLAS (wgmma) the best-known mma.sync code gets on this card.
//
// One build per tile configuration, chosen with -D (build.sh builds them all):
//   CS_BM, CS_BN, CS_BK   block tile and K slice;  CS_WM, CS_WN  warp tile;  CS_STAGES  ring depth
// C = A @ B: A (M x K), B (K x N) row-major half, C (M x N) row-major float, fp32 accumulate;
// the epilogue writes the accumulators unscaled (ScaleType::Nothing), so exact inputs give a
// bit-exact C. 16-byte accesses: K and N multiples of 8, A and B 16-byte aligned.

#include <cuda_runtime.h>

#include "cutlass/cutlass.h"
#include "cutlass/epilogue/thread/linear_combination.h"
#include "cutlass/gemm/device/gemm.h"

#define CS_CAT2(a, b) a##b
#define CS_CAT(a, b) CS_CAT2(a, b)
#define CS_NAME CS_CAT(gemm_cutlass_sm80_, CS_CONFIG)

using Gemm = cutlass::gemm::device::Gemm<
    cutlass::half_t, cutlass::layout::RowMajor,  // A
    cutlass::half_t, cutlass::layout::RowMajor,  // B
    float, cutlass::layout::RowMajor,            // C
    float,                                       // accumulator
    cutlass::arch::OpClassTensorOp, cutlass::arch::Sm80,
    cutlass::gemm::GemmShape<CS_BM, CS_BN, CS_BK>,
    cutlass::gemm::GemmShape<CS_WM, CS_WN, CS_BK>,
    cutlass::gemm::GemmShape<16, 8, 16>,
    cutlass::epilogue::thread::LinearCombination<float, 4, float, float,
                                                 cutlass::epilogue::thread::ScaleType::Nothing>,
    cutlass::gemm::threadblock::GemmIdentityThreadblockSwizzle<8>,
    CS_STAGES, 8, 8>;

// 0: launched; 1: CUTLASS cannot run this problem (alignment); 2: launch failed.
extern "C" int CS_NAME(const void* A, const void* B, void* C, int M, int N, int K, void* stream)
{
    using Half = cutlass::half_t;
    typename Gemm::Arguments args({M, N, K},
                                  {static_cast<const Half*>(A), K},
                                  {static_cast<const Half*>(B), N},
                                  {static_cast<float*>(C), N},
                                  {static_cast<float*>(C), N},
                                  {1.0f, 0.0f});
    Gemm gemm;
    if (gemm.can_implement(args) != cutlass::Status::kSuccess) {
        return 1;
    }
    if (gemm.initialize(args, nullptr, static_cast<cudaStream_t>(stream)) != cutlass::Status::kSuccess) {
        return 2;
    }
    return gemm(static_cast<cudaStream_t>(stream)) == cutlass::Status::kSuccess ? 0 : 2;
}
