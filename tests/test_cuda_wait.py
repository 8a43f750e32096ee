"""How a kernel process waits for the GPU (``kernels/cuda_wait.py``): the setting read from the
environment, and the driver calls it makes, against a fake driver (no GPU); on a GPU, a kernel
process started with ``PYTEST_GEMM_CUDA_WAIT=blocking`` has its primary context blocking."""
from __future__ import annotations

import ctypes
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_gemm.kernels.cuda_wait import MODES, WAIT_ENV, current_wait, set_wait, wait_mode

REPO = Path(__file__).resolve().parent.parent


def test_unset_or_empty_keeps_cudas_default():
    assert wait_mode({}) is None
    assert wait_mode({WAIT_ENV: "  "}) is None


def test_each_mode_is_read_in_any_case():
    for name in MODES:
        assert wait_mode({WAIT_ENV: name.upper()}) == name


def test_an_unknown_mode_says_which_ones_exist():
    with pytest.raises(ValueError, match=r"PYTEST_GEMM_CUDA_WAIT='sleepy'.*auto, spin, yield, blocking"):
        wait_mode({WAIT_ENV: "sleepy"})


class FakeDriver:
    """libcuda's calls that cuda_wait makes, recorded; a status of its own for each."""

    def __init__(self, status: dict[str, int] | None = None, flags: int = 0):
        self.calls: list[tuple[str, tuple]] = []
        self.status = status or {}
        self.flags = flags

    def _call(self, name, *args):
        self.calls.append((name, args))
        return self.status.get(name, 0)

    def cuInit(self, flags):
        return self._call("cuInit", flags)

    def cuDeviceGet(self, device, ordinal):
        ctypes.cast(device, ctypes.POINTER(ctypes.c_int))[0] = 100 + ordinal
        return self._call("cuDeviceGet", ordinal)

    def cuDevicePrimaryCtxSetFlags_v2(self, device, flags):
        self.flags = flags.value
        return self._call("cuDevicePrimaryCtxSetFlags_v2", device.value, flags.value)

    def cuDevicePrimaryCtxGetState(self, device, flags, active):
        ctypes.cast(flags, ctypes.POINTER(ctypes.c_uint))[0] = self.flags
        return self._call("cuDevicePrimaryCtxGetState", device.value)


def test_blocking_is_set_on_the_devices_primary_context():
    lib = FakeDriver()
    assert set_wait("blocking", 1, lib) is None
    assert lib.calls == [("cuInit", (0,)), ("cuDeviceGet", (1,)), ("cuDevicePrimaryCtxSetFlags_v2", (101, 4))]
    assert current_wait(1, lib) == "blocking"


def test_other_context_flags_do_not_hide_the_mode():
    assert current_wait(0, FakeDriver(flags=0x8 | MODES["spin"])) == "spin"  # CU_CTX_MAP_HOST beside it


def test_a_driver_that_refuses_says_so_and_sets_nothing():
    lib = FakeDriver(status={"cuDeviceGet": 101})
    assert set_wait("blocking", 0, lib) == "cuDeviceGet returned CUDA error 101"
    assert [name for name, _ in lib.calls] == ["cuInit", "cuDeviceGet"]
    lib = FakeDriver(status={"cuDevicePrimaryCtxSetFlags_v2": 708})
    assert set_wait("yield", 0, lib) == "cuDevicePrimaryCtxSetFlags returned CUDA error 708"


def test_no_driver_is_a_reason_not_a_crash(monkeypatch):
    import pytest_gemm.kernels.cuda_wait as cuda_wait

    def missing():
        raise OSError("libcuda.so.1: cannot open shared object file")

    monkeypatch.setattr(cuda_wait, "_driver", missing)
    assert "could not be loaded" in set_wait("blocking", 0)


# The kernel process's start-up, as the sandbox runs it: the mode is set before its context starts.
_STARTUP = """
import cupy
from pytest_gemm.checks.sandbox_child import default_prepare
from pytest_gemm.kernels.cuda_wait import current_wait
from pytest_gemm.measure.cublas import CUBLAS
default_prepare(CUBLAS["fp32"])
print("wait:", current_wait(cupy.cuda.runtime.getDevice()))
"""


@pytest.mark.gemm_gpu
@pytest.mark.parametrize("mode", ["blocking", "spin"])
def test_a_kernel_processs_start_up_sets_the_wait_it_is_asked_for(mode: str, gemm_device):
    env = dict(os.environ, **{WAIT_ENV: mode}, PYTHONPATH=str(REPO), PYTEST_GEMM_TRACE="off")  # no CUPTI start-up
    done = subprocess.run([sys.executable, "-c", _STARTUP], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"wait: {mode}" in done.stdout, done.stdout + done.stderr[-2000:]


def test_a_run_asked_for_an_unknown_wait_stops_before_any_check(pytester, monkeypatch):
    monkeypatch.setenv(WAIT_ENV, "sleepy")
    pytester.makepyfile(test_x="def test_x():\n    pass\n")
    result = pytester.runpytest_subprocess("--gemm-timeout", "5", "-p", "no:cacheprovider")
    text = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.USAGE_ERROR, text
    assert "PYTEST_GEMM_CUDA_WAIT='sleepy'" in text and "blocking" in text, text
