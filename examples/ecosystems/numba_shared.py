"""Numba CUDA: the shared-memory matmul of Numba's documentation ("CUDA Kernel API, matrix
multiplication": square TPB x TPB tiles of A and B staged in shared memory, one thread per
element of C), written from its description.

    pytest --gemm-kernel examples/ecosystems/numba_shared.py:matmul

Changed from the documentation's version: its loop runs over gridDim.x tiles, which covers K
only for square matrices; here it runs over K's own tiles, so any M, N, K works.

Stream: the launch names Numba's view of CuPy's current stream
(``numba.cuda.external_stream``), and the arrays are taken without a synchronisation
(``as_cuda_array(..., sync=False)``): the kernel is ordered on that stream, as it must be.
Needs ``pip install pytest-gemm[numba]`` (NumPy 2.5 removed ``np.row_stack``, which numba-cuda
up to 0.30 still refers to; the extra keeps NumPy below 2.5).
"""
import functools

from pytest_gemm import kernel

TPB = 16  # threads per block along each side: one TPB x TPB tile of C per block


@functools.cache
def _kernel():
    from numba import cuda, float32

    @cuda.jit
    def fast_matmul(A, B, C):
        sA = cuda.shared.array(shape=(TPB, TPB), dtype=float32)
        sB = cuda.shared.array(shape=(TPB, TPB), dtype=float32)
        x, y = cuda.grid(2)  # x: column of C, y: row of C
        tx = cuda.threadIdx.x
        ty = cuda.threadIdx.y
        tmp = float32(0.0)
        for i in range((A.shape[1] + TPB - 1) // TPB):  # over K's tiles
            sA[ty, tx] = 0
            sB[ty, tx] = 0
            if y < A.shape[0] and tx + i * TPB < A.shape[1]:
                sA[ty, tx] = A[y, tx + i * TPB]
            if x < B.shape[1] and ty + i * TPB < B.shape[0]:
                sB[ty, tx] = B[ty + i * TPB, x]
            cuda.syncthreads()
            for j in range(TPB):
                tmp += sA[ty, j] * sB[j, tx]
            cuda.syncthreads()
        if y < C.shape[0] and x < C.shape[1]:
            C[y, x] = tmp

    return fast_matmul


@kernel(precision="fp32", name="numba_shared")
def matmul(a, b, c):
    import cupy
    from numba import cuda

    stream = cuda.external_stream(cupy.cuda.get_current_stream().ptr)
    A, B, C = (cuda.as_cuda_array(x, sync=False) for x in (a, b, c))
    m, n = c.shape
    grid = ((n + TPB - 1) // TPB, (m + TPB - 1) // TPB)
    _kernel()[grid, (TPB, TPB), stream](A, B, C)
