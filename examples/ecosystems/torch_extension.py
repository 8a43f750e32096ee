"""A torch CUDA extension: CUDA C built with ``torch.utils.cpp_extension.load_inline`` (nvcc and
ninja), called from a Python launcher on torch tensors that share CuPy's memory.

    pytest --gemm-kernel examples/ecosystems/torch_extension.py:matmul

The extension is built when this module is imported (about a minute the first time, then
loaded from torch's extension cache, ``TORCH_EXTENSIONS_DIR``), so the build is never part of
a check's time.

Stream: the extension launches on ``at::cuda::getCurrentCUDAStream()``; the launcher makes
CuPy's current stream torch's for the call (``torch.cuda.ExternalStream``).
Needs ``pip install pytest-gemm[torch]`` and nvcc.
"""
from pathlib import Path

import torch
from torch.utils.cpp_extension import load_inline

from pytest_gemm import kernel

_ext = load_inline(name="pytest_gemm_example_mm", cpp_sources="void mm_into(torch::Tensor a, torch::Tensor b, torch::Tensor c);",
                   cuda_sources=(Path(__file__).parent / "torch_ext_mm.cu").read_text(), functions=["mm_into"],
                   extra_include_paths=[str(Path(__file__).parent.parent)])  # for examples/tiled.cu


@kernel(precision="fp32", name="torch_extension")
def matmul(a, b, c):
    import cupy

    with torch.cuda.stream(torch.cuda.ExternalStream(cupy.cuda.get_current_stream().ptr)):
        _ext.mm_into(*(torch.as_tensor(x, device="cuda") for x in (a, b, c)))
