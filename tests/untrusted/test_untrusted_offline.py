"""The untrusted kernels, checked with no GPU: declarations consistent, every CUDA
kernel compiles for every architecture it claims, and the machine code really
holds the instruction its misbehaviour depends on (a 128-bit load at a +4 byte
offset, a volatile store in a loop, ``trap``, a store 2**45 bytes away), so a
compiler that "fixed" one would fail here rather than silently on the GPU.
Compile tests are skipped, with the reason, only where NVRTC is not installed.
"""
from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from typing import Any

import pytest
from suite_helpers import nvrtc_missing

from pytest_gemm.model.categories import ALL as CATEGORIES
from pytest_gemm.model.contract import CudaKernel, PyKernel

KERNELS_PY = Path(__file__).resolve().parent / "kernels.py"


def _load() -> Any:
    spec = importlib.util.spec_from_file_location("gemm_untrusted_kernels_offline", KERNELS_PY)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # declarations only: no CuPy, no CUDA
    return module


KERNELS = _load()
CUDA = {name: k for name, k in KERNELS.ALL.items() if isinstance(k, CudaKernel)}




needs_nvrtc = pytest.mark.skipif(nvrtc_missing() is not None, reason=str(nvrtc_missing()))


def test_declarations_are_consistent():
    assert set(KERNELS.UNTRUSTED).isdisjoint(KERNELS.CORRECT)
    for name, (kernel, category, check) in KERNELS.UNTRUSTED.items():
        assert isinstance(kernel, (CudaKernel, PyKernel)), name
        kernel.validate()
        assert category in CATEGORIES, (name, category)
        assert check in ("exact", "coverage", "guards", "deterministic", "accuracy", "speed"), (name, check)
    for name in KERNELS.ALL:
        assert name in (KERNELS.__doc__ or ""), f"{name} is missing from the table in kernels.py's docstring"


@needs_nvrtc
@pytest.mark.parametrize("name", sorted(CUDA))
def test_compiles_for_every_claimed_arch(name: str):
    from pytest_gemm.kernels.compiler import compile_for_arch

    kernel = CUDA[name]
    kernel.validate()
    for arch in kernel.claimed_arches():
        result = compile_for_arch(kernel, arch)
        assert result.code, (name, arch)
        assert result.resources.spills == 0, (name, arch, result.resources)


def _ptx(name: str) -> str:
    from pytest_gemm.kernels.compiler import compile_for_arch

    kernel = CUDA[name]
    kernel.validate()
    return compile_for_arch(kernel, "sm_80", output="ptx").code.decode()


@needs_nvrtc
def test_misaligned_float4_issues_vector_loads_off_by_four_bytes():
    ptx = _ptx("misaligned_float4")
    assert re.search(r"ld\.global(\.nc)?\.v4\.f32\s+\{[^}]*\},\s*\[%rd\d+\+4\]", ptx), ptx


@needs_nvrtc
def test_endless_loop_keeps_its_loop():
    ptx = _ptx("endless_loop")
    match = re.search(r"(\$L__BB\d+_\d+):\s*\n\s*st\.volatile\.global\.f32[^\n]*\n\s*bra\.uni\s+(\$L__BB\d+_\d+);", ptx)
    assert match and match.group(1) == match.group(2), ptx


@needs_nvrtc
def test_device_trap_traps():
    assert re.search(r"^\s*trap;", _ptx("device_trap"), re.M)


@needs_nvrtc
def test_illegal_address_stores_32_tib_away():
    assert str(1 << 45) in _ptx("illegal_address")


@needs_nvrtc
def test_writes_into_harness_has_a_second_store():
    assert len(re.findall(r"st\.global\.f32", _ptx("writes_into_harness"))) == 2


@needs_nvrtc
def test_faults_at_m1_offsets_its_store_by_2_43_floats_only_on_a_condition():
    ptx = _ptx("faults_at_m1")
    assert re.search(rf"selp\.b64\s+%rd\d+, {1 << 43}, 0,", ptx) and "st.global.f32" in ptx
