"""cuBLAS baselines: ``cublasGemmEx`` through CuPy, one launcher per precision.

Each launcher takes CuPy arrays ``(a, b, c)``: ``a`` (M, K) and ``b`` (K, N)
in the precision's storage dtype (float32; float16; bf16 as uint16 bit
patterns), ``c`` (M, N) float32, all C-contiguous, and writes ``a @ b`` into
``c`` on the current stream.

cuBLAS is column-major. A row-major (M, N) matrix occupies the same bytes as
the column-major (N, M) matrix of its transpose, so the row-major
``C = A @ B`` is computed as the column-major ``C^T = B^T @ A^T``: swap the
operands and swap m and n, with no transposition flag and no copy.

CuPy is imported inside the functions only, so importing this module never
touches CUDA. The ladder (``reference_kernels``) lists these baselines as its
top rungs; the speed check times them beside every kernel from here, so
pytest_gemm never imports the ladder package.
"""
from __future__ import annotations

from typing import Any

from ..model.contract import kernel
import numpy as np

# cudaDataType / cublasComputeType_t / cublasGemmAlgo_t values, used when the
# installed CuPy does not export the names.
_CONSTANTS = {
    "CUDA_R_32F": 0,
    "CUDA_R_16F": 2,
    "CUDA_R_16BF": 14,
    "CUBLAS_COMPUTE_32F": 68,
    "CUBLAS_COMPUTE_32F_FAST_TF32": 77,
    "CUBLAS_GEMM_DEFAULT": -1,
    "CUBLAS_OP_N": 0,
    "CUBLAS_POINTER_MODE_HOST": 0,
    "CUBLAS_DEFAULT_MATH": 0,
}

_STORAGE = {"fp32": "float32", "tf32": "float32", "fp16": "float16", "bf16": "uint16"}


def _const(module: Any, name: str) -> int:
    return int(getattr(module, name, _CONSTANTS[name]))


def _check_arrays(a: Any, b: Any, c: Any, precision: str) -> tuple[int, int, int]:
    want = _STORAGE[precision]
    if a.ndim != 2 or b.ndim != 2 or c.ndim != 2:
        raise ValueError(f"cuBLAS {precision} baseline: a, b, c must be 2-D, got {a.shape}, {b.shape}, {c.shape}")
    m, k = a.shape
    k2, n = b.shape
    if k2 != k or tuple(c.shape) != (m, n):
        raise ValueError(f"cuBLAS {precision} baseline: shapes {a.shape} @ {b.shape} -> {c.shape} do not match")
    if str(a.dtype) != want or str(b.dtype) != want or str(c.dtype) != "float32":
        raise ValueError(
            f"cuBLAS {precision} baseline: expects a, b as {want} and c as float32, "
            f"got {a.dtype}, {b.dtype}, {c.dtype}"
        )
    if not (a.flags.c_contiguous and b.flags.c_contiguous and c.flags.c_contiguous):
        raise ValueError(f"cuBLAS {precision} baseline: a, b and c must be C-contiguous")
    return m, n, k


def _gemm_ex(a: Any, b: Any, c: Any, precision: str, in_type: str, compute_type: str) -> None:
    """c = a @ b (row-major) with cublasGemmEx, alpha = 1, beta = 0."""
    import cupy  # lazy: CuPy (the plugin loads with no GPU)
    from cupy_backends.cuda.api import runtime  # lazy: CuPy (the plugin loads with no GPU)
    from cupy_backends.cuda.libs import cublas  # lazy: CuPy (the plugin loads with no GPU)

    m, n, k = _check_arrays(a, b, c, precision)
    if m == 0 or n == 0:
        return
    if k == 0:
        c.fill(0)
        return

    handle = cupy.cuda.device.get_cublas_handle()
    cublas.setStream(handle, cupy.cuda.get_current_stream().ptr)
    alpha = np.ones(1, dtype=np.float32)
    beta = np.zeros(1, dtype=np.float32)
    dtype_in = int(getattr(runtime, in_type, _CONSTANTS[in_type]))
    dtype_out = int(getattr(runtime, "CUDA_R_32F", _CONSTANTS["CUDA_R_32F"]))
    op_n = _const(cublas, "CUBLAS_OP_N")

    old_pointer_mode = cublas.getPointerMode(handle)
    has_math_mode = hasattr(cublas, "getMathMode") and hasattr(cublas, "setMathMode")
    old_math_mode = cublas.getMathMode(handle) if has_math_mode else None
    cublas.setPointerMode(handle, _const(cublas, "CUBLAS_POINTER_MODE_HOST"))
    if has_math_mode:
        # Default math: the compute type alone decides whether TF32 is allowed.
        cublas.setMathMode(handle, _const(cublas, "CUBLAS_DEFAULT_MATH"))
    try:
        # Column-major C^T (n x m) = B^T (n x k) @ A^T (k x m).
        cublas.gemmEx(
            handle, op_n, op_n, n, m, k,
            alpha.ctypes.data,
            b.data.ptr, dtype_in, n,
            a.data.ptr, dtype_in, k,
            beta.ctypes.data,
            c.data.ptr, dtype_out, n,
            _const(cublas, compute_type), _const(cublas, "CUBLAS_GEMM_DEFAULT"),
        )
    finally:
        if has_math_mode:
            cublas.setMathMode(handle, old_math_mode)
        cublas.setPointerMode(handle, old_pointer_mode)


@kernel(precision="fp32", min_cc=(7, 0), name="cublas-fp32")
def cublas_fp32(a: Any, b: Any, c: Any) -> None:
    """cublasGemmEx, float32 in and out, CUBLAS_COMPUTE_32F: the FP32 target."""
    _gemm_ex(a, b, c, "fp32", "CUDA_R_32F", "CUBLAS_COMPUTE_32F")


@kernel(precision="tf32", min_cc=(8, 0), name="cublas-tf32")
def cublas_tf32(a: Any, b: Any, c: Any) -> None:
    """cublasGemmEx, float32 in and out, CUBLAS_COMPUTE_32F_FAST_TF32 (TF32 tensor cores)."""
    _gemm_ex(a, b, c, "tf32", "CUDA_R_32F", "CUBLAS_COMPUTE_32F_FAST_TF32")


@kernel(precision="fp16", min_cc=(7, 0), name="cublas-fp16")
def cublas_fp16(a: Any, b: Any, c: Any) -> None:
    """cublasGemmEx, float16 in, float32 out, CUBLAS_COMPUTE_32F."""
    _gemm_ex(a, b, c, "fp16", "CUDA_R_16F", "CUBLAS_COMPUTE_32F")


@kernel(precision="bf16", min_cc=(8, 0), name="cublas-bf16")
def cublas_bf16(a: Any, b: Any, c: Any) -> None:
    """cublasGemmEx, bfloat16 in (uint16 bit patterns), float32 out, CUBLAS_COMPUTE_32F."""
    _gemm_ex(a, b, c, "bf16", "CUDA_R_16BF", "CUBLAS_COMPUTE_32F")


__all__ = ["cublas_fp32", "cublas_tf32", "cublas_fp16", "cublas_bf16"]


#: The cuBLAS baseline of each precision.
CUBLAS = {"fp32": cublas_fp32, "tf32": cublas_tf32, "fp16": cublas_fp16, "bf16": cublas_bf16}
