"""Helpers shared by the tests: importing a file by path (kernels of ours, the tools), and the
ids and keys of the conformance suite run on kernels of ours (tests/test_broken_kernels.py,
tests/test_untrusted_kernels.py)."""
from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any


def load_declarations(path: Path, module_name: str) -> Any:
    """Import a Python file by path as ``module_name`` (a kernels.py: declarations only, no CuPy,
    no CUDA; or a script under tools/)."""
    spec = importlib.util.spec_from_file_location(module_name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def nvrtc_missing() -> str | None:
    """None when NVRTC compiles here; else why not (no cuda.bindings, or libnvrtc does not load)."""
    try:
        from cuda.bindings import nvrtc
    except ImportError:
        return "NVRTC is not installed (no cuda.bindings); install pytest-gemm[cuda12] or pytest-gemm[cuda13]"
    try:
        nvrtc.nvrtcVersion()
    except Exception as exc:  # the wheel is there but libnvrtc cannot be loaded
        why = " ".join(str(exc).split())  # one line: cuda-pathfinder's message ends in a newline
        return f"NVRTC cannot be loaded ({why}); install pytest-gemm[cuda12] or pytest-gemm[cuda13]"
    return None


def ci_toolchain_problem(env: dict[str, str], missing: Any = nvrtc_missing) -> str | None:
    """Under CI (``CI`` set true, as .ci/run and CI services do) NVRTC must load: without it every
    compile test skips and the ``gemm_nvrtc`` step would go green untested. None when fine."""
    if env.get("CI", "").strip().lower() not in ("1", "true", "yes"):
        return None
    why = missing()
    return (f"CI: {why}: every compile test would be skipped and the job would pass untested; fix the "
            "environment (the cuda12 extra brings NVRTC)") if why else None


def load_registered(path: Path, module_name: str) -> Any:
    """``load_declarations``, with the module in ``sys.modules`` (a dataclass in it resolves its
    annotations there): tools/ecosystems.py."""
    import sys

    spec = importlib.util.spec_from_file_location(module_name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module


def test_id(check: str, name: str, rest: str) -> str:
    """The conformance test id of a check on a kernel: ``exact-<name>-17x33x65``."""
    return f"{check}-{name}-{rest}" if rest else f"{check}-{name}"


def case_key(record: dict[str, Any]) -> str:
    """``"exact-17x33x65"``, ``"accuracy-256x256x16-distuniform"``: GemmCase.id without the kernel."""
    shape = record.get("shape")
    text = record["check"] + ("-" + "x".join(str(d) for d in shape) if shape else "")
    return text + "".join(f"-{k}{v}" for k, v in (record.get("params") or {}).items())


test_id.__test__ = False  # type: ignore[attr-defined]  # a helper, not a test


def compile_fresh(kernel: Any, arch: str, output: str = "cubin") -> Any:
    """compile_for_arch on the kernel's source plus one unused ``__device__`` variable with a
    fresh name. Where a driver is installed, compiles are cached by their PTX and a cache hit
    prints no ptxas report; the extra symbol makes every PTX new without touching the kernel."""
    import dataclasses
    import uuid

    from pytest_gemm.kernels.compiler import compile_for_arch

    kernel.validate()
    text, _ = kernel.source_text()
    fresh = dataclasses.replace(kernel, source=f"{text}\n__device__ int pytest_gemm_fresh_{uuid.uuid4().hex};\n")
    fresh.validate()
    return compile_for_arch(fresh, arch, output=output)


#: ptxas does not allocate registers the same way every time at a kernel's register limit: warptile
#: for sm_75 (128 registers, the cap of __launch_bounds__(256, 2)) spilled 54/60 bytes in 1 of 60
#: compiles of one source in fresh processes here (NVRTC 12.9.86), and CI met that one at 4851f68.
SPILL_COMPILES = 3


def compile_spill_free(kernel: Any, arch: str) -> tuple[Any, list[Any]]:
    """Compile ``kernel`` fresh up to SPILL_COMPILES times, stopping at the first build with no
    spills: (that build, or the last one, and every build's resources). A kernel that spills
    every time still fails; one ptxas run in a hundred that spills does not fail CI."""
    tried = []
    for _ in range(SPILL_COMPILES):
        result = compile_fresh(kernel, arch)
        tried.append(result.resources)
        if result.resources.spills == 0:
            break
    return result, tried
