"""Triton: the matmul of Triton's tutorial 03-matrix-multiplication, with its autotuner.

Written from the tutorial (https://triton-lang.org/main/getting-started/tutorials/03-matrix-multiplication.html,
Triton's documentation, MIT licence): its published CUDA autotune configs (the eight for fp16
and the eight "good for fp8"), ``key=['M', 'N', 'K']``, grouped ordering of the output blocks
for L2 reuse, wrapped row and column offsets, and a K loop with masked loads. Changed: the
tutorial stores C as fp16 (its output tensor is fp16); here C is the contract's fp32, so the
accumulator is stored in C's own type (``c_ptr.dtype.element_ty``, which for an fp16 C is
exactly the tutorial's ``.to(tl.float16)``). Left out: its optional leaky-ReLU epilogue.

    pytest --gemm-kernel examples/ecosystems/triton_matmul.py:matmul_fp16   # passes
    pytest --gemm-kernel examples/ecosystems/triton_matmul.py:matmul_fp32   # precision_too_low

On fp32 inputs ``tl.dot`` rounds them to TF32 (its default input precision), so the fp32
kernel fails as ``precision_too_low``, as it should. pytest-gemm sees the autotuner and runs
the quick shape set (``--gemm-shapes full`` runs every shape, each one tuned), shares the
tuning between processes through Triton's autotuning cache, and reports the config it chose.

Stream: Triton launches on torch's current stream; the launcher makes CuPy's current stream
torch's for the call (``torch.cuda.ExternalStream``). Needs ``pip install pytest-gemm[triton]``.
"""
import triton
import triton.language as tl

from pytest_gemm import kernel


def get_cuda_autotune_config():
    def config(m, n, k, stages, warps):
        return triton.Config({"BLOCK_SIZE_M": m, "BLOCK_SIZE_N": n, "BLOCK_SIZE_K": k, "GROUP_SIZE_M": 8},
                             num_stages=stages, num_warps=warps)

    return [
        config(128, 256, 64, 3, 8), config(64, 256, 32, 4, 4), config(128, 128, 32, 4, 4),
        config(128, 64, 32, 4, 4), config(64, 128, 32, 4, 4), config(128, 32, 32, 4, 4),
        config(64, 32, 32, 5, 2), config(32, 64, 32, 5, 2),
        # good for fp8 inputs
        config(128, 256, 128, 3, 8), config(256, 128, 128, 3, 8), config(256, 64, 128, 4, 4),
        config(64, 256, 128, 4, 4), config(128, 128, 128, 4, 4), config(128, 64, 64, 4, 4),
        config(64, 128, 64, 4, 4), config(128, 32, 64, 4, 4),
    ]


@triton.autotune(configs=get_cuda_autotune_config(), key=["M", "N", "K"])
@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                  BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_K: tl.constexpr,
                  GROUP_SIZE_M: tl.constexpr):
    # Which block of C this program computes: grouped, GROUP_SIZE_M block-rows at a time.
    pid = tl.program_id(axis=0)
    num_pid_m = tl.cdiv(M, BLOCK_SIZE_M)
    num_pid_n = tl.cdiv(N, BLOCK_SIZE_N)
    num_pid_in_group = GROUP_SIZE_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_SIZE_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_SIZE_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m

    # Rows of A and columns of B wrap around (% M, % N): loads stay in bounds, the store is masked.
    offs_am = (pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)) % M
    offs_bn = (pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)) % N
    offs_k = tl.arange(0, BLOCK_SIZE_K)
    a_ptrs = a_ptr + (offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak)
    b_ptrs = b_ptr + (offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn)

    accumulator = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_SIZE_K)):
        a = tl.load(a_ptrs, mask=offs_k[None, :] < K - k * BLOCK_SIZE_K, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < K - k * BLOCK_SIZE_K, other=0.0)
        accumulator = tl.dot(a, b, accumulator)
        a_ptrs += BLOCK_SIZE_K * stride_ak
        b_ptrs += BLOCK_SIZE_K * stride_bk
    c = accumulator.to(c_ptr.dtype.element_ty)

    offs_cm = pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
    offs_cn = pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
    c_ptrs = c_ptr + stride_cm * offs_cm[:, None] + stride_cn * offs_cn[None, :]
    c_mask = (offs_cm[:, None] < M) & (offs_cn[None, :] < N)
    tl.store(c_ptrs, c, mask=c_mask)


def matmul(a, b, c):
    """The tutorial's wrapper, writing into the caller's C on the caller's stream."""
    import cupy
    import torch

    M, K = a.shape
    N = b.shape[1]
    with torch.cuda.stream(torch.cuda.ExternalStream(cupy.cuda.get_current_stream().ptr)):
        a, b, c = (torch.as_tensor(x, device="cuda") for x in (a, b, c))
        grid = lambda META: (triton.cdiv(M, META["BLOCK_SIZE_M"]) * triton.cdiv(N, META["BLOCK_SIZE_N"]),)  # noqa: E731
        matmul_kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                            c.stride(0), c.stride(1))


matmul_fp16 = kernel(matmul, precision="fp16", min_cc=(8, 0), name="triton_tutorial_fp16")
matmul_fp32 = kernel(matmul, precision="fp32", min_cc=(8, 0), name="triton_tutorial_fp32")
