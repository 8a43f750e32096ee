"""Triton's tutorial 03 matmul with its autotuner, as tests/warmup's launchers reach it (the kernel
of examples/ecosystems/triton_matmul.py, with ``input_precision`` passed through to ``tl.dot``:
None as published, "ieee" for exact fp32 products). Imported by those launchers only when they
run, never at collection: the point is that pytest-gemm cannot see the autotuner by reading the
launcher's code, and must find the tuning while it happens (checks/warmup.py).
"""
import triton
import triton.language as tl


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
                  GROUP_SIZE_M: tl.constexpr, INPUT_PRECISION: tl.constexpr = None):
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
        accumulator = tl.dot(a, b, accumulator, input_precision=INPUT_PRECISION)
        a_ptrs += BLOCK_SIZE_K * stride_ak
        b_ptrs += BLOCK_SIZE_K * stride_bk
    c = accumulator.to(c_ptr.dtype.element_ty)

    offs_cm = pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
    offs_cn = pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
    c_ptrs = c_ptr + stride_cm * offs_cm[:, None] + stride_cn * offs_cn[None, :]
    c_mask = (offs_cm[:, None] < M) & (offs_cn[None, :] < N)
    tl.store(c_ptrs, c, mask=c_mask)


def launch(a, b, c, input_precision=None):
    """The tutorial's wrapper, writing into the caller's C on the caller's stream."""
    import cupy
    import torch

    M, K = a.shape
    N = b.shape[1]
    with torch.cuda.stream(torch.cuda.ExternalStream(cupy.cuda.get_current_stream().ptr)):
        a, b, c = (torch.as_tensor(x, device="cuda") for x in (a, b, c))
        grid = lambda META: (triton.cdiv(M, META["BLOCK_SIZE_M"]) * triton.cdiv(N, META["BLOCK_SIZE_N"]),)  # noqa: E731
        matmul_kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                            c.stride(0), c.stride(1), INPUT_PRECISION=input_precision)
