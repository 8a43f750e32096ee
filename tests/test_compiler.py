"""NVRTC compilation with no GPU: resource figures from the ptxas log and from the cubin."""
from __future__ import annotations

import pytest

from pytest_gemm import CudaKernel
from pytest_gemm.kernels.compiler import parse_ptxas_log

LOG = """ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'other' for 'sm_80'
ptxas info    : Used 12 registers, used 0 barriers
ptxas info    : Compiling entry function 'mm' for 'sm_80'
ptxas info    : Function properties for mm
ptxas         .     24 bytes stack frame, 8 bytes spill stores, 4 bytes spill loads
ptxas info    : Used 40 registers, used 1 barriers, 2048 bytes smem, 380 bytes cmem[0]
"""


def test_ptxas_log_is_read_for_the_right_entry():
    res = parse_ptxas_log(LOG, "mm")
    assert (res.registers, res.spill_stores, res.spill_loads, res.stack_frame, res.shared_static) == (40, 8, 4, 24, 2048)
    assert parse_ptxas_log(LOG, "other").registers == 12


SPILLY = """
extern "C" __global__ void mm(const float* A, const float* B, float* C, int M, int N, int K) {
    float buf[256];
    for (int i = 0; i < 256; ++i) buf[i] = A[i * K + threadIdx.x];
    C[threadIdx.x] = buf[(int)B[threadIdx.x] & 255];  // a run-time index keeps buf in local memory
}
"""


@pytest.mark.parametrize("arch", ["sm_75", "sm_80", "sm_90"])
def test_cubin_resources_agree_with_ptxas(arch):
    pytest.importorskip("cuda.bindings", reason="NVRTC not installed (install pytest-gemm[cuda12])")
    from pytest_gemm.kernels.compiler import compile_for_arch, cubin_resources
    import reference_kernels

    for kernel in [reference_kernels.by_name("tiled16"), reference_kernels.by_name("warptile"),
                   CudaKernel(source=SPILLY, entry="mm", block=(32,), tile=(1, 32), name="spilly")]:
        result = compile_for_arch(kernel, arch)
        registers, frame = cubin_resources(result.code, result.lowered_name)
        if result.resources.registers:  # the log had a ptxas report (not an NVRTC cache hit)
            assert (registers, frame) == (result.resources.registers, result.resources.stack_frame)
        assert registers > 0
        if kernel.name == "spilly":
            assert frame > 0  # the local array lives in the stack frame
