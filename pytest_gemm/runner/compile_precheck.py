"""The offline compile before any test (the controller, or a run with no xdist): a CUDA kernel
that compiles for none of the architectures it claims costs its own kernel (its tests fail with
NVRTC's message, the others run), and the xdist workers are told which (``configure_node``), so
that they do not compile it again.
"""
from __future__ import annotations

from typing import Any

import pytest

from ..model.categories import COMPILE_ERROR
from ..model.contract import CudaKernel, GemmKernel
from .state import STATE


UNCOMPILABLE_KEY = "gemm_uncompilable"  # workerinput: {kernel name: message}, from the controller's compile


def first_compiling_arch(kernels: list[GemmKernel]) -> list[GemmKernel]:
    """Compile user CUDA kernels once, offline. A kernel that compiles for none of the
    architectures it claims (a wrong ``entry=``, a syntax error) costs its own kernel: it becomes
    a ``BadDeclaration`` whose tests fail with NVRTC's message, and the others run; when no
    kernel is left to test, the first message ends the run (``pytest.UsageError``). A kernel that
    compiles for some of them runs: the others are its own compile_error tests. Without NVRTC
    nothing changes (the compile checks say so)."""
    try:
        # lazy: a test replaces compile_for_arch on its module, and NVRTC stays out of the plugin's load
        from ..kernels.compiler import GemmCompileError, GemmToolchainError, compile_for_arch
        # lazy: keeps kernels.declared out of the plugin's load
        from ..kernels.declared import is_bad, uncompilable
    except ImportError:  # pragma: no cover
        return kernels
    out = list(kernels)
    for index, k in enumerate(kernels):
        if not isinstance(k, CudaKernel):
            continue
        first: GemmCompileError | None = None
        for arch in k.claimed_arches() or ("sm_80",):
            try:
                compile_for_arch(k, arch, output="ptx")
                first = None
                break
            except GemmToolchainError:
                return kernels
            except GemmCompileError as exc:
                first = first or exc
        if first is not None:
            spec = (getattr(k, "origin_spec", None) or (None,))[0]
            out[index] = uncompilable(k, f"--gemm-kernel {spec}: {first}" if spec else str(first))
    if out and all(is_bad(k) for k in out):
        raise pytest.UsageError(next(k.message for k, was in zip(out, kernels) if k is not was))
    return out


def configure_node(node: Any) -> None:
    """pytest-xdist: tell a worker which kernels the controller found compiling for no
    architecture, so that its tests fail with the same message without compiling again."""
    st = node.config.stash.get(STATE, None)
    if st is None:
        return
    from ..kernels.declared import is_bad  # lazy: keeps kernels.declared out of the plugin's load

    node.workerinput[UNCOMPILABLE_KEY] = {str(k.name): k.message for k in st.kernels
                                          if is_bad(k) and k.category == COMPILE_ERROR}


def mark_uncompilable(config: pytest.Config, kernels: list[GemmKernel]) -> list[GemmKernel]:
    """In an xdist worker: the kernels the controller found compiling for no architecture."""
    found = dict(getattr(config, "workerinput", {}).get(UNCOMPILABLE_KEY) or {})
    if not found:
        return kernels
    from ..kernels.declared import uncompilable  # lazy: keeps kernels.declared out of the plugin's load

    return [uncompilable(k, found[str(k.name)]) if str(k.name) in found else k for k in kernels]
