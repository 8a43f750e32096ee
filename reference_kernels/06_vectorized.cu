// Rung 6, vectorized: 2D register tiling with float4 memory traffic and a transposed A
// tile, C = alpha * A @ B + beta * C.
// Over rung 5 (05_regtile2d.cu): vector memory instructions, float4 global and shared accesses.
//
// The shape of 05_regtile2d.cu: block tile 128 x 128, BK = 8, 256 threads, an
// 8 x 8 micro-tile per thread. What changes is how data moves:
//   - global loads are float4: each thread fetches 4 consecutive floats of A
//     and 4 of B per slice (one 16-byte load each instead of four);
//   - the A slice is stored TRANSPOSED in shared memory (AsT[k][row]), so the
//     8 values of A a thread needs at step k are contiguous and come in as two
//     float4 shared loads, like the 8 values of B;
//   - C is written with float4 stores.
// What it teaches: the same arithmetic with a quarter of the load and store
// instructions; shared loads per FMA fall from 16/64 to 4/64.
//
// Edges. float4 needs K % 4 == 0, N % 4 == 0 and 16-byte aligned A, B and C;
// when any fails the kernel loads and stores one float at a time. A block
// whose 128 x 128 tile lies inside C takes a path with no bounds checks at
// all for every full K slice; edge blocks and the last partial K slice check
// each float4 (or each float) and load zero outside A and B.
// beta == 0 means C is not read (it may hold NaN), the BLAS convention.
// (bench/candidates/vectorized.cu is this file with a -DGEMM_NO_EDGE build beside it, no edge
// handling at all: bench/edge_cost.py times the two to measure what the edges cost.)

#define BM 128
#define BN 128
#define BK 8
#define TM 8
#define TN 8
#define NTHREADS ((BM / TM) * (BN / TN))  // 256

static __device__ __forceinline__ bool aligned16(const void* p)
{
    return (reinterpret_cast<unsigned long long>(p) & 15ull) == 0;
}

// alpha * acc + beta * old, written once so every path rounds the same way.
static __device__ __forceinline__ float blend(float acc, float old, float alpha, float beta)
{
    return fmaf(beta, old, alpha * acc);
}

// One BK slice: store this thread's float4 of A (transposed) and of B into
// shared memory, then accumulate the slice's outer products. Both K loops below
// call it, so the interior and the edge slices round identically.
static __device__ __forceinline__ void slice(float* AsT, float* Bs, float4 av, float4 bv,
                                             int aRow, int aK, int bRow, int bCol,
                                             int threadRow, int threadCol, float (&acc)[TM][TN])
{
    AsT[(aK + 0) * BM + aRow] = av.x;
    AsT[(aK + 1) * BM + aRow] = av.y;
    AsT[(aK + 2) * BM + aRow] = av.z;
    AsT[(aK + 3) * BM + aRow] = av.w;
    *reinterpret_cast<float4*>(&Bs[bRow * BN + bCol]) = bv;
    __syncthreads();

#pragma unroll
    for (int p = 0; p < BK; ++p) {
        const float4 m0 = *reinterpret_cast<const float4*>(&AsT[p * BM + threadRow * TM]);
        const float4 m1 = *reinterpret_cast<const float4*>(&AsT[p * BM + threadRow * TM + 4]);
        const float4 n0 = *reinterpret_cast<const float4*>(&Bs[p * BN + threadCol * TN]);
        const float4 n1 = *reinterpret_cast<const float4*>(&Bs[p * BN + threadCol * TN + 4]);
        const float regM[TM] = {m0.x, m0.y, m0.z, m0.w, m1.x, m1.y, m1.z, m1.w};
        const float regN[TN] = {n0.x, n0.y, n0.z, n0.w, n1.x, n1.y, n1.z, n1.w};
#pragma unroll
        for (int i = 0; i < TM; ++i) {
#pragma unroll
            for (int j = 0; j < TN; ++j) {
                acc[i][j] += regM[i] * regN[j];
            }
        }
    }
    __syncthreads();
}

extern "C" __global__ void __launch_bounds__(NTHREADS, 2)
gemm_vectorized(const float* __restrict__ A, const float* __restrict__ B,
                float* __restrict__ C, int M, int N, int K,
                float alpha, float beta)
{
    if (alpha == 0.0f) {
        K = 0;  // BLAS: with alpha == 0, A and B do not affect C (C = beta * C), even if they hold NaN
    }
    __shared__ __align__(16) float AsT[BK * BM];  // transposed: AsT[k * BM + row]
    __shared__ __align__(16) float Bs[BK * BN];   // row-major:  Bs[k * BN + col]

    const int tid = threadIdx.x;
    const int blockRow = blockIdx.y * BM;
    const int blockCol = blockIdx.x * BN;

    const int threadRow = tid / (BN / TN);  // 0..15
    const int threadCol = tid % (BN / TN);  // 0..15

    // Fill mapping: one float4 of A (row aRow, k aK..aK+3) and one float4 of
    // B (k bRow, columns bCol..bCol+3) per thread per slice.
    const int aRow = tid / (BK / 4);        // 0..127
    const int aK = (tid % (BK / 4)) * 4;    // 0 or 4
    const int bRow = tid / (BN / 4);        // 0..7
    const int bCol = (tid % (BN / 4)) * 4;  // 0..124

    const bool vec = (K % 4 == 0) && (N % 4 == 0) && aligned16(A) && aligned16(B) && aligned16(C);
    const bool fullMN = vec && blockRow + BM <= M && blockCol + BN <= N;

    const int gaRow = blockRow + aRow;
    const bool aRowIn = gaRow < M;
    const float* aPtr = A + static_cast<size_t>(aRowIn ? gaRow : 0) * K;
    const int gbCol = blockCol + bCol;

    float acc[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; ++i) {
#pragma unroll
        for (int j = 0; j < TN; ++j) {
            acc[i][j] = 0.0f;
        }
    }

    // Interior blocks run their whole K slices in a loop with no checks at all
    // (a test inside one shared loop cost about 5% on aligned shapes); the last
    // partial slice, and every slice of an edge block, take the checked loop.
    int k0 = 0;
    if (fullMN) {
        const int kFull = K - K % BK;
        for (; k0 < kFull; k0 += BK) {
            const float4 av = *reinterpret_cast<const float4*>(aPtr + k0 + aK);
            const float4 bv = *reinterpret_cast<const float4*>(B + static_cast<size_t>(k0 + bRow) * N + gbCol);
            slice(AsT, Bs, av, bv, aRow, aK, bRow, bCol, threadRow, threadCol, acc);
        }
    }
    for (; k0 < K; k0 += BK) {
        float4 av;
        float4 bv;
        const int ka = k0 + aK;
        const int kb = k0 + bRow;
        const bool kbIn = kb < K;
        const float* bPtr = B + static_cast<size_t>(kbIn ? kb : 0) * N;
        if (vec) {
            // K and N are multiples of 4, so a float4 is wholly in or out.
            av = (aRowIn && ka < K) ? *reinterpret_cast<const float4*>(aPtr + ka)
                                    : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            bv = (kbIn && gbCol < N) ? *reinterpret_cast<const float4*>(bPtr + gbCol)
                                     : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        } else {
            av.x = (aRowIn && ka + 0 < K) ? aPtr[ka + 0] : 0.0f;
            av.y = (aRowIn && ka + 1 < K) ? aPtr[ka + 1] : 0.0f;
            av.z = (aRowIn && ka + 2 < K) ? aPtr[ka + 2] : 0.0f;
            av.w = (aRowIn && ka + 3 < K) ? aPtr[ka + 3] : 0.0f;
            bv.x = (kbIn && gbCol + 0 < N) ? bPtr[gbCol + 0] : 0.0f;
            bv.y = (kbIn && gbCol + 1 < N) ? bPtr[gbCol + 1] : 0.0f;
            bv.z = (kbIn && gbCol + 2 < N) ? bPtr[gbCol + 2] : 0.0f;
            bv.w = (kbIn && gbCol + 3 < N) ? bPtr[gbCol + 3] : 0.0f;
        }
        slice(AsT, Bs, av, bv, aRow, aK, bRow, bCol, threadRow, threadCol, acc);
    }

    // Epilogue: C = alpha * acc + beta * C, C read only when beta != 0.
    const bool readC = beta != 0.0f;
    const int colBase = blockCol + threadCol * TN;
#pragma unroll
    for (int i = 0; i < TM; ++i) {
        const int row = blockRow + threadRow * TM + i;
        float* cRow = C + static_cast<size_t>(row < M ? row : 0) * N;
        if (fullMN) {
#pragma unroll
            for (int j = 0; j < TN; j += 4) {
                float4* cp = reinterpret_cast<float4*>(cRow + colBase + j);
                float4 v;
                if (readC) {
                    const float4 old = *cp;
                    v = make_float4(blend(acc[i][j + 0], old.x, alpha, beta),
                                    blend(acc[i][j + 1], old.y, alpha, beta),
                                    blend(acc[i][j + 2], old.z, alpha, beta),
                                    blend(acc[i][j + 3], old.w, alpha, beta));
                } else {
                    v = make_float4(alpha * acc[i][j + 0], alpha * acc[i][j + 1],
                                    alpha * acc[i][j + 2], alpha * acc[i][j + 3]);
                }
                *cp = v;
            }
        } else if (row < M) {
#pragma unroll
            for (int j = 0; j < TN; ++j) {
                const int col = colBase + j;
                if (col < N) {
                    cRow[col] = readC ? blend(acc[i][j], cRow[col], alpha, beta) : alpha * acc[i][j];
                }
            }
        }
    }
}
