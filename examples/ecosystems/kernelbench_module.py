"""A KernelBench-style solution: a ``torch.nn.Module`` named ``ModelNew`` whose ``forward(A, B)``
returns the product, as KernelBench's level-1 matmul problems ask for. pytest-gemm wraps the
class itself; nothing in this file knows about pytest-gemm.

    pytest --gemm-kernel examples/ecosystems/kernelbench_module.py:ModelNew

pytest-gemm builds the module (with ``get_init_inputs()``) in the kernel's process, moves it to
the GPU, calls it on torch tensors sharing CuPy's memory, and copies the returned tensor into
C; that copy is inside each timed call, and the speed check says so (``result_copy``).

Stream: pytest-gemm makes CuPy's current stream torch's current stream while ``forward`` runs,
so ``torch.matmul`` (and anything launched on torch's current stream) keeps to it.
Needs ``pip install pytest-gemm[torch]``. TF32 stays off (torch's default for matmul), so the
fp32 product is exact where it must be.
"""
import torch


class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.matmul(A, B)


def get_inputs():
    N = 4096
    return [torch.rand(N, N), torch.rand(N, N)]


def get_init_inputs():
    return []
