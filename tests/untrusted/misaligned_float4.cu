// UNTRUSTED: reads each row of A four floats at a time through a float4
// pointer, but the row pointer is one float past the row start ("skipping a
// header" that is not there). A float4 access must be 16-byte aligned; the
// rows of A start 16-byte aligned (at K = 64, say), so A + 1 is 4 bytes off
// and the first 128-bit load dies with a misaligned address (category fault).
// One thread per output, no shared memory: the bug is the only interesting line.

#define TILE 16

extern "C" __global__ void mm_misaligned_float4(const float* __restrict__ A,
                                                const float* __restrict__ B,
                                                float* __restrict__ C,
                                                int M, int N, int K)
{
    const int row = blockIdx.y * TILE + threadIdx.y;
    const int col = blockIdx.x * TILE + threadIdx.x;
    if (row >= M || col >= N) {
        return;
    }
    const float* a_row = A + (size_t)row * K + 1;  // UNTRUSTED: + 1 breaks the float4 alignment
    const float4* a4 = reinterpret_cast<const float4*>(a_row);
    float acc = 0.0f;
    int p = 0;
    for (; p + 4 <= K; p += 4) {
        const float4 v = a4[p / 4];
        acc += v.x * B[(size_t)(p + 0) * N + col];
        acc += v.y * B[(size_t)(p + 1) * N + col];
        acc += v.z * B[(size_t)(p + 2) * N + col];
        acc += v.w * B[(size_t)(p + 3) * N + col];
    }
    for (; p < K; ++p) {
        acc += a_row[p] * B[(size_t)p * N + col];
    }
    C[(size_t)row * N + col] = acc;
}
