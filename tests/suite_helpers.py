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
        return f"NVRTC cannot be loaded ({exc}); install pytest-gemm[cuda12] or pytest-gemm[cuda13]"
    return None


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
