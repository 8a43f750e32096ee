"""Compiles for every architecture it claims (no GPU needed)."""
from __future__ import annotations

import pytest


def _arch_cases(config):
    from pytest_gemm.model.contract import CudaKernel
    from pytest_gemm.runner.state import kernels_under_test, state

    wanted = state(config).arches
    cases = []
    for kernel in kernels_under_test(config):
        if not isinstance(kernel, CudaKernel):
            continue
        claimed = kernel.claimed_arches()
        for arch in (wanted or claimed):
            cases.append((kernel, arch, arch in claimed))
    return cases


def pytest_generate_tests(metafunc):
    if "gemm_kernel_arch" in metafunc.fixturenames:
        from pytest_gemm.model.contract import short_id

        cases = _arch_cases(metafunc.config)
        values = []
        for kernel, arch, claimed in cases:
            marks = [] if claimed else [pytest.mark.skip(
                reason=f"kernel {kernel.name!r} does not claim {arch} (min_cc={tuple(kernel.min_cc)})")]
            values.append(pytest.param((kernel, arch), id=f"compile-{short_id(str(kernel.name))}-{arch}", marks=marks))
        if not values:
            values = [pytest.param(None, id="compile-none", marks=pytest.mark.skip(reason="no CUDA C kernel under test"))]
        metafunc.parametrize("gemm_kernel_arch", values)


@pytest.mark.gemm_offline
def test_compiles_offline(gemm_kernel_arch, gemm_record):
    """NVRTC compiles the kernel for the architecture with no GPU; ptxas reports its resources."""
    pytest.importorskip("cuda.bindings", reason="NVRTC not installed: install pytest-gemm[cuda12] or [cuda13]")
    from pytest_gemm.checks.compile import run_offline

    kernel, arch = gemm_kernel_arch
    print(run_offline(kernel, arch, gemm_record))
