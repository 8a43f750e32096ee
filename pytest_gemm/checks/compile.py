"""The offline compile check: NVRTC compiles a CUDA C kernel for one architecture it
claims, with no GPU, and ptxas reports its resources. Run in-process by
``conformance/test_compile.py`` (no sandbox: nothing is launched)."""
from __future__ import annotations

from typing import Any, Callable

from ..model.categories import COMPILE_ERROR, GemmCheckFailure
from ..model.contract import GemmKernel


def run_offline(kernel: GemmKernel, arch: str, record: Callable[[dict[str, Any]], None]) -> str:
    """Compile ``kernel`` for ``arch``; record its resources and return a one-line summary."""
    from ..kernels.compiler import GemmCompileError, compile_for_arch

    try:
        result = compile_for_arch(kernel, arch)  # type: ignore[arg-type]
    except GemmCompileError as exc:
        raise GemmCheckFailure(COMPILE_ERROR, str(exc).splitlines()[0], exc.log.strip().splitlines()) from None
    res = result.resources
    record({"resources": {
        "registers": res.registers, "spill_stores": res.spill_stores, "spill_loads": res.spill_loads,
        "stack_frame": res.stack_frame, "shared_static": res.shared_static}})
    return (f"{kernel.name} {arch}: {res.registers} registers, {res.spills} spill bytes, "
            f"{res.stack_frame} stack bytes, {res.shared_static} static shared bytes")
