// Declared fp32, computed as 3xTF32 on tensor cores, the way CUTLASS's fast fp32 GEMMs
// (arch::OpMultiplyAddFastF32, gemm/warp/mma_tensor_op_fast_f32.h) do: each float x is split
// into big = x with the low 13 mantissa bits dropped (rounded toward zero, as CUTLASS's
// NumericConverterFastF32 does) and small = tf32(x - big), and the fp32 accumulator gets
// small(A)*big(B) + big(A)*small(B) + big(A)*big(B): small x small is dropped. Its products are
// accurate to about fp32's rounding (the accuracy check passes them, or finds them just over the
// fp32 bound where the accumulator truncates); but at K <= 3 the exact inputs reach 4096, odd values there need
// 12 significant bits (TF32 holds 11), and the dropped product is 1: the exact outputs are the
// 3xTF32 result (judges/patterns.py three_tf32), precision_too_low, not wrong_values.
//
// One warp per block, a 16x16 tile of C; WMMA m16n16k8 TF32 (sm_80 and later). The split is
// done on the fragments' elements, so it does not depend on how WMMA lays them out.

#include <mma.h>

using namespace nvcuda;

#define TM 16
#define TN 16
#define TK 8

extern "C" __global__ void __launch_bounds__(32) mm_three_tf32(const float* __restrict__ A,
                                                               const float* __restrict__ B,
                                                               float* __restrict__ C,
                                                               int M, int N, int K)
{
    __shared__ float As[TM * TK];
    __shared__ float Bs[TK * TN];
    __shared__ float Cs[TM * TN];

    const int lane = threadIdx.x;
    const int row0 = blockIdx.y * TM;
    const int col0 = blockIdx.x * TN;

    wmma::fragment<wmma::accumulator, TM, TN, TK, float> acc;
    wmma::fill_fragment(acc, 0.0f);

    for (int k0 = 0; k0 < K; k0 += TK) {
        for (int i = lane; i < TM * TK; i += 32) {  // A tile, 16 x 8, zero past the edges
            const int r = row0 + i / TK, k = k0 + i % TK;
            As[i] = (r < M && k < K) ? A[(size_t)r * K + k] : 0.0f;
        }
        for (int i = lane; i < TK * TN; i += 32) {  // B tile, 8 x 16
            const int k = k0 + i / TN, c = col0 + i % TN;
            Bs[i] = (k < K && c < N) ? B[(size_t)k * N + c] : 0.0f;
        }
        __syncwarp();

        wmma::fragment<wmma::matrix_a, TM, TN, TK, wmma::precision::tf32, wmma::row_major> a_big, a_small;
        wmma::fragment<wmma::matrix_b, TM, TN, TK, wmma::precision::tf32, wmma::row_major> b_big, b_small;
        wmma::load_matrix_sync(a_big, As, TK);
        wmma::load_matrix_sync(b_big, Bs, TN);
        for (int t = 0; t < a_big.num_elements; ++t) {
            const float x = a_big.x[t];
            const float big = __uint_as_float(__float_as_uint(x) & 0xFFFFE000u);
            a_big.x[t] = big;
            a_small.x[t] = wmma::__float_to_tf32(x - big);
        }
        for (int t = 0; t < b_big.num_elements; ++t) {
            const float x = b_big.x[t];
            const float big = __uint_as_float(__float_as_uint(x) & 0xFFFFE000u);
            b_big.x[t] = big;
            b_small.x[t] = wmma::__float_to_tf32(x - big);
        }
        // the three products, small terms first (as CUTLASS orders them); small x small is not computed
        wmma::mma_sync(acc, a_small, b_big, acc);
        wmma::mma_sync(acc, a_big, b_small, acc);
        wmma::mma_sync(acc, a_big, b_big, acc);
        __syncwarp();
    }

    wmma::store_matrix_sync(Cs, acc, TN, wmma::mem_row_major);
    __syncwarp();
    for (int i = lane; i < TM * TN; i += 32) {
        const int r = row0 + i / TN, c = col0 + i % TN;
        if (r < M && c < N) {
            C[(size_t)r * N + c] = Cs[i];
        }
    }
}
