"""A grid callable may take the device's properties (a persistent kernel sizes its grid by the
SM count instead of hard-coding 132); the three-argument form keeps working. No GPU needed."""
from __future__ import annotations

from dataclasses import dataclass

import pytest

from pytest_gemm import CudaKernel
from pytest_gemm.model.declaration import EmptyGridError, GemmSpecError, grid_takes_device

SRC = 'extern "C" __global__ void mm(const float* A, const float* B, float* C, int M, int N, int K) {}'


@dataclass
class FakeDevice:
    sm_count: int


def _kernel(grid) -> CudaKernel:
    return CudaKernel(source=SRC, entry="mm", block=(128,), grid=grid, name="persistent")


def test_three_arguments_get_the_shape_only():
    k = _kernel(lambda m, n, k: ((n + 15) // 16, (m + 15) // 16))
    assert k.launch_grid(100, 33, 7) == (3, 7, 1)
    assert k.launch_grid(100, 33, 7, FakeDevice(132)) == (3, 7, 1)


@pytest.mark.parametrize("grid", [
    lambda m, n, k, device: (device.sm_count,),
    lambda m, n, k, props: (props.sm_count,),           # any name, four positional arguments
    lambda m, n, k, *, device: (device.sm_count,),      # keyword-only, named device
])
def test_a_fourth_argument_gets_the_device(grid):
    k = _kernel(grid)
    assert k.launch_grid(4096, 4096, 4096, FakeDevice(132)) == (132, 1, 1)
    assert k.launch_grid(4096, 4096, 4096, FakeDevice(40)) == (40, 1, 1)  # a T4: not 132


def test_detection():
    assert not grid_takes_device(lambda m, n, k: (1,))
    assert not grid_takes_device(lambda m, n, k, extra=1: (1,))  # a default: still the old form
    assert grid_takes_device(lambda m, n, k, device: (1,))
    assert grid_takes_device(lambda m, n, k, device=None: (1,))
    assert not grid_takes_device(print)  # no readable signature: the old form


def test_a_device_grid_without_a_device_says_so():
    k = _kernel(lambda m, n, k, device: (device.sm_count,))
    with pytest.raises(GemmSpecError, match="needs the device"):
        k.launch_grid(8, 8, 8)


def test_an_empty_device_grid_is_still_empty():
    k = _kernel(lambda m, n, k, device: (min(device.sm_count, m // 64),))
    with pytest.raises(EmptyGridError):
        k.launch_grid(8, 8, 8, FakeDevice(132))
