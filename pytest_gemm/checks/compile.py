"""The offline compile check: NVRTC compiles a CUDA C kernel for one architecture it
claims, with no GPU, and ptxas reports its resources. Run in-process by
``conformance/test_compile.py`` (no sandbox: nothing is launched).

Without a working NVRTC nothing can be compiled: where no GPU is usable either (a
compile-only job) that fails the check with what to install, so a job that could test
nothing does not pass; on a GPU machine it is skipped with that reason (the GPU checks
compile the kernel for this GPU through CuPy)."""
from __future__ import annotations

import re
from typing import Any, Callable

from ..model.categories import COMPILE_ERROR, GemmCheckFailure
from ..model.contract import GemmKernel

NO_NVRTC = "cannot compile without NVRTC"


def _no_toolchain(message: str) -> None:
    import pytest  # lazy: pytest stays out of the sandbox child

    from ..kernels.device import probe  # lazy: a test replaces probe on its module

    found = probe()
    if isinstance(found, str):
        pytest.fail(f"{NO_NVRTC}, and {found}: nothing could be tested. {message}", pytrace=False)
    pytest.skip(f"{NO_NVRTC}: {message} (the GPU checks compile it for this {found.name} through CuPy)")


def other_than_this_gpu(compile_arches: str, wanted: list[str] | None, arch: str) -> str | None:
    """Why the compile check for ``arch`` is skipped under ``gemm_compile_arches = device``: on a
    machine with a GPU only that GPU's architecture is compiled (the GPU checks run there; the
    others cost a grader seconds per student for optimised kernels and say nothing about this
    GPU), or None when it runs: ``claimed``, compile-only mode (``--gemm-arch``: ``wanted``
    given), no usable GPU (then nothing else compile-checks the kernel), or this GPU's arch."""
    if compile_arches != "device" or wanted:
        return None
    from ..kernels.device import probe  # lazy: a test replaces probe on its module

    found = probe()
    if isinstance(found, str) or arch.rstrip("a") == found.arch:
        return None
    return (f"gemm_compile_arches = device: compile-checked for this GPU's {found.arch} only; a run with no GPU, "
            f"or with gemm_compile_arches = claimed, checks {arch} too")


def run_offline(kernel: GemmKernel, arch: str, record: Callable[[dict[str, Any]], None]) -> str:
    """Compile ``kernel`` for ``arch``; record its resources and return a one-line summary."""
    # lazy: a test replaces compile_for_arch on its module
    from ..kernels.compiler import GemmCompileError, GemmToolchainError, compile_for_arch

    missing: str | None = None
    try:
        result = compile_for_arch(kernel, arch)  # type: ignore[arg-type]
    except GemmCompileError as exc:
        raise compile_failure(kernel, arch, exc) from None
    except GemmToolchainError as exc:
        missing = str(exc)
    if missing is not None:  # outside the except block: no chained traceback under the message
        _no_toolchain(missing)  # fails or skips
    res = result.resources
    record({"resources": {
        "registers": res.registers, "spill_stores": res.spill_stores, "spill_loads": res.spill_loads,
        "stack_frame": res.stack_frame, "shared_static": res.shared_static}})
    return (f"{kernel.name} {arch}: {res.registers} registers, {res.spills} spill bytes, "
            f"{res.stack_frame} stack bytes, {res.shared_static} static shared bytes")


#: The compile logs this process has shown in full: (kernel, file, log without its arch) -> the arch.
_SHOWN: dict[tuple[str, str, str], str] = {}
_ARCH = re.compile(r"\b(?:sm|compute)_\d+a?\b")


def compile_failure(kernel: GemmKernel, arch: str, exc: Any) -> GemmCheckFailure:
    """The failure of ``kernel``'s compile for ``arch``, naming its ``--gemm-kernel`` spec. The
    first error line joins the one-line summary (the table and ``-q --tb=no`` show it); a log
    already shown for another architecture (one syntax error under ``--gemm-arch all``) is not
    shown again: the summary says which architecture's shows it."""
    spec = (getattr(kernel, "origin_spec", None) or (None,))[0]
    head = str(exc).splitlines()[0].rstrip(":") + (f" (--gemm-kernel {spec})" if spec else "")
    first = next((line.strip() for line in exc.log.splitlines() if "error" in line), "")
    summary = f"{head}: {first}" if first and first not in head else head
    shown = _SHOWN.setdefault((str(kernel.name), str(exc.filename), _ARCH.sub("", exc.log)), arch)
    if shown != arch:  # the summary as the first one's (the verdict's diagnosis is theirs), no log
        return GemmCheckFailure(COMPILE_ERROR, summary, [f"the same errors as for {shown}: its log is shown there"])
    hint = getattr(exc, "hint", None)  # a header NVRTC lacks: what to do (kernels/compile_hints.py)
    return GemmCheckFailure(COMPILE_ERROR, summary, exc.log.strip().splitlines() + ([hint] if hint else []))
