"""The launch guard (pytest_gemm/launch_guard.py): the host's launch time stays out of timed calls.

Pure policy and compile checks run anywhere; the GPU test times a call whose launch is made
slow on purpose (the host sleeps before it launches) with and without the guard."""
from __future__ import annotations

import importlib.resources
import time

import pytest

from pytest_gemm.measure.launch_guard import MAX_WAIT_US, START_WAIT_US, GuardPolicy


def test_a_call_launched_in_time_is_kept_and_the_wait_does_not_grow():
    policy = GuardPolicy()
    assert policy.retime(late=False) is False
    assert policy.wait_us == START_WAIT_US and policy.late_kept == 0


def test_a_late_launch_is_retimed_with_twice_the_wait_until_the_cap_then_kept_and_counted():
    policy = GuardPolicy(wait_us=200.0, max_wait_us=1600.0)
    assert [policy.retime(late=True) for _ in range(3)] == [True, True, True]
    assert policy.wait_us == 1600.0 and policy.late_kept == 0
    assert policy.retime(late=True) is False and policy.retime(late=True) is False
    assert policy.late_kept == 2 and policy.wait_us == 1600.0


def test_the_default_cap_allows_a_few_milliseconds_of_launch_time():
    assert START_WAIT_US < MAX_WAIT_US and MAX_WAIT_US >= 5000.0


def test_launch_guard_cu_is_package_data():
    text = importlib.resources.files("pytest_gemm.measure").joinpath("launch_guard.cu").read_text()
    assert "gemm_launch_guard" in text and "globaltimer" in text


@pytest.mark.parametrize("arch", ["sm_75", "sm_80", "sm_90"])
def test_the_launch_guard_compiles_for_every_architecture(arch):
    pytest.importorskip("cuda.bindings", reason="NVRTC not installed (install pytest-gemm[cuda12])")
    from pytest_gemm.kernels.compiler import compile_for_arch
    from pytest_gemm.model.contract import CudaKernel

    path = importlib.resources.files("pytest_gemm.measure").joinpath("launch_guard.cu")
    kernel = CudaKernel(source=str(path), entry="gemm_launch_guard", block=(1,), tile=(1, 1), name="guard")
    assert "%globaltimer" in compile_for_arch(kernel, arch, output="ptx").code.decode()
    assert compile_for_arch(kernel, arch).resources.spills == 0


@pytest.mark.gemm_gpu
@pytest.mark.gemm_quiet_machine
def test_a_slow_launch_is_kept_out_of_the_timed_region(gemm_device):
    import cupy

    from pytest_gemm.measure.gpu_lock import gpu_lock
    from pytest_gemm.measure.timing import time_gpu

    x = cupy.zeros(1 << 20, dtype=cupy.float32)

    def slow_launch() -> None:
        time.sleep(0.002)  # the host is busy for 2 ms before the launch: not the kernel's time
        x.fill(1.0)

    with gpu_lock(True):  # timed alone, like the speed check: no other test's work on the GPU meanwhile
        kernel_alone = time_gpu(lambda: x.fill(1.0), flops=1.0, budget_s=0.05, settle_ms=0.0)
        unguarded = time_gpu(slow_launch, flops=1.0, budget_s=0.05, settle_ms=0.0, guard_launches=False)
        guarded = time_gpu(slow_launch, flops=1.0, budget_s=0.05, settle_ms=0.0)
    assert unguarded.median_ms > 1.5, unguarded  # without the guard the sleep is timed (the test can fail)
    assert guarded.median_ms < kernel_alone.median_ms + 0.05, (guarded, kernel_alone)
    assert guarded.late_launches == 0


@pytest.mark.parametrize("sms, threads_per_sm, blocks", [(132, 2048, 1056), (68, 1024, 272), (84, 1536, 504)])
def test_the_guard_takes_every_thread_slot_of_every_sm(sms, threads_per_sm, blocks):
    from pytest_gemm.measure.launch_guard import guard_grid

    grid, threads = guard_grid(sms, threads_per_sm)
    assert (grid, grid * threads) == (blocks, sms * threads_per_sm)
