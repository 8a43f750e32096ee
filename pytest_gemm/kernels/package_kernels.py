"""The harness's own CUDA kernels (``.cu`` files shipped in this package), compiled for a device."""
from __future__ import annotations

from typing import Any, Sequence
import importlib.resources
from pathlib import Path
from .compiler import GemmToolchainError, compile_for_arch
from .cubin import load_cubin_function
from ..model.contract import CudaKernel


def package_function(arch: str, filename: str, entry: str, options: Sequence[str] = (),
                     block: tuple[int, ...] = (1,), package: str = "pytest_gemm.measure") -> Any:
    """``entry`` of the package's ``filename`` as a CuPy function for ``arch`` (e.g. ``sm_90``):
    NVRTC through compiler.py, else CuPy's own compiler (it has a device here)."""

    import cupy  # lazy: CuPy (the plugin loads with no GPU)


    source = importlib.resources.files(package).joinpath(filename)
    with importlib.resources.as_file(source) as path:
        kernel = CudaKernel(source=str(path), entry=entry, block=block, tile=(1, 1), options=tuple(options),
                            name=entry)
        try:
            compiled = compile_for_arch(kernel, arch)
        except GemmToolchainError:
            module = cupy.RawModule(code=Path(path).read_text(), options=tuple(options))
            return module.get_function(entry)
    return load_cubin_function(compiled.code, compiled.lowered_name)
