"""Compiles for every architecture it claims (no GPU needed).

With ``--gemm-arch`` (the compile-only mode) every requested architecture is its own test
per kernel: one that does not compile fails as ``compile_error`` beside the ones that do;
one the kernel does not claim is skipped with the true cause (``min_cc``, its declared
``arches``, an arch-specific target it did not declare).

A Python launcher is compile-checked through the CUDA it declares it builds
(``@kernel(builds=[CudaKernel(...), ...])``): one test per build and architecture, in the
launcher's name. In compile-only mode a launcher that declares none has one test: it is called
with stand-in arrays (``kernels/dry_run.py``), failed when its own code raises before any GPU
work, else skipped with the reason, so it is in the summary; a compile-only run in which nothing compiled fails
(``runner/completeness``).
"""
from __future__ import annotations

import pytest


def _arch_cases(config):
    """(value, id, skip reason or None) for every kernel (or launcher build) and architecture."""
    from pytest_gemm.kernels.declared import is_bad
    from pytest_gemm.model.contract import CudaKernel, short_id
    from pytest_gemm.runner.state import kernels_under_test, state

    wanted = state(config).arches
    cases = []
    for kernel in kernels_under_test(config):
        if is_bad(kernel):  # its declaration is wrong: one test, failing with its message
            cases.append(((kernel, None), f"compile-{short_id(str(kernel.name))}-declaration", None))
            continue
        builds = [(kernel, None)] if isinstance(kernel, CudaKernel) else [(b, kernel) for b in kernel.builds]
        if not builds and wanted:  # compile-only mode: in the summary and the report, with why
            cases.append(((kernel, None), f"compile-{short_id(str(kernel.name))}", None))
        for build, launcher in builds:
            claimed = build.claimed_arches()
            name = short_id(str(build.name if launcher is None else f"{launcher.name}-{build.name}"))
            for arch in (wanted or claimed):
                value = (build, arch) if launcher is None else (launcher, arch, build)
                cases.append((value, f"compile-{name}-{arch}", None if arch in claimed else build.not_claimed_reason(arch)))
    return cases


def pytest_generate_tests(metafunc):
    if "gemm_kernel_arch" in metafunc.fixturenames:
        values = []
        for value, test_id, skip in _arch_cases(metafunc.config):
            marks = [] if skip is None else [pytest.mark.skip(reason=skip)]
            values.append(pytest.param(value, id=test_id, marks=marks))
        if not values:
            values = [pytest.param(None, id="compile-none", marks=pytest.mark.skip(reason="no CUDA C kernel under test"))]
        metafunc.parametrize("gemm_kernel_arch", values)


@pytest.mark.gemm_offline
def test_compiles_offline(gemm_kernel_arch, gemm_record, request):
    """NVRTC compiles the kernel for the architecture with no GPU; ptxas reports its resources.
    A launcher with nothing to compile is called with stand-in arrays (``kernels/dry_run.py``):
    failed when its own code raises, else skipped with the reason."""
    from pytest_gemm.checks.compile import other_than_this_gpu, run_offline
    from pytest_gemm.runner.state import state

    from pytest_gemm.kernels.declared import is_bad, refuse

    kernel, arch, *build = gemm_kernel_arch
    if is_bad(kernel):
        refuse(kernel)
    if arch is None:
        from pytest_gemm.kernels.dry_run import check_offline

        check_offline(kernel, str(request.config.invocation_params.dir),
                      f"kernel {kernel.name!r} is a Python launcher that declares no CUDA it builds, so there is "
                      "nothing to compile-check (declare it with @kernel(builds=[CudaKernel(source=..., entry=..., "
                      "...)]) to compile-check it)")
    st = state(request.config)
    skipped = other_than_this_gpu(st.compile_arches, st.arches, arch)
    if skipped:
        pytest.skip(skipped)
    print(run_offline(build[0] if build else kernel, arch, gemm_record))
