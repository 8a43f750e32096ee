"""pytest-gemm: a pytest plugin and conformance suite for GPU matrix-multiplication kernels.

Importing this package never imports CuPy or touches CUDA.
"""
from __future__ import annotations

from .kernels.modules import module_kernel
from .model.contract import CudaKernel, GemmSpecError, PyKernel, kernel

__all__ = ["CudaKernel", "PyKernel", "kernel", "module_kernel", "GemmSpecError"]
__version__ = "0.1.0"
