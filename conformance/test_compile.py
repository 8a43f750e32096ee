"""Compiles for every architecture it claims (no GPU needed).

With ``--gemm-arch`` (the compile-only mode) every requested architecture is its own test
per kernel: one that does not compile fails as ``compile_error`` beside the ones that do;
one the kernel does not claim is skipped with the true cause (``min_cc``, its declared
``arches``, an arch-specific target it did not declare).
"""
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

        values = []
        for kernel, arch, claimed in _arch_cases(metafunc.config):
            marks = [] if claimed else [pytest.mark.skip(reason=kernel.not_claimed_reason(arch))]
            values.append(pytest.param((kernel, arch), id=f"compile-{short_id(str(kernel.name))}-{arch}", marks=marks))
        if not values:
            values = [pytest.param(None, id="compile-none", marks=pytest.mark.skip(reason="no CUDA C kernel under test"))]
        metafunc.parametrize("gemm_kernel_arch", values)


@pytest.mark.gemm_offline
def test_compiles_offline(gemm_kernel_arch, gemm_record, pytestconfig):
    """NVRTC compiles the kernel for the architecture with no GPU; ptxas reports its resources."""
    from pytest_gemm.checks.compile import other_than_this_gpu, run_offline
    from pytest_gemm.runner.state import state

    kernel, arch = gemm_kernel_arch
    st = state(pytestconfig)
    skipped = other_than_this_gpu(st.compile_arches, st.arches, arch)
    if skipped:
        pytest.skip(skipped)
    print(run_offline(kernel, arch, gemm_record))
