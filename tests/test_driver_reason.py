"""The no-GPU reason names the real cause: no driver at all, or a driver older than the runtime
(CUDA says "cudaErrorInsufficientDriver" for both). Pure: the facts are given."""
from __future__ import annotations

from pytest_gemm.kernels.driver import explain

CUDA_SAYS = "cudaErrorInsufficientDriver: CUDA driver version is insufficient for CUDA runtime version"


def test_no_libcuda_is_no_driver_not_an_old_one():
    text = explain(CUDA_SAYS, libcuda=False, driver=None, runtime=12080)
    assert text.startswith("no NVIDIA driver: libcuda.so.1 not found")
    assert "insufficient" not in text


def test_a_driver_older_than_the_runtime_gives_both_versions_and_the_extra_to_install():
    text = explain(CUDA_SAYS, libcuda=True, driver=12020, runtime=13000)
    assert "supports CUDA 12.2, older than CuPy's CUDA runtime 13.0" in text
    assert "pytest-gemm[cuda12]" in text and CUDA_SAYS in text


def test_a_driver_of_the_same_major_but_older_asks_for_an_update():
    text = explain(CUDA_SAYS, libcuda=True, driver=12020, runtime=12080)
    assert "CUDA 12.2, older than CuPy's CUDA runtime 12.8" in text and "update the driver" in text


def test_a_driver_new_enough_that_still_fails_says_it_loads_but_has_no_device():
    text = explain(CUDA_SAYS, libcuda=True, driver=12080, runtime=12080)
    assert "loads but reports no usable device" in text and "nvidia-smi" in text


def test_this_machine_s_reason_is_one_of_them():
    from pytest_gemm.kernels.device import probe

    found = probe()
    if isinstance(found, str):
        assert "cudaErrorInsufficientDriver" not in found.split(":", 2)[1], found  # CUDA's words never come first
