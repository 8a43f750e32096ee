"""A Python launcher that returns the product instead of writing it into c (a common first slip:
``return cupy.matmul(a, b)``, ``c = a @ b``): C reads as never written, and the failure says what
the launcher returned and how to write into c (checks/dispatch.py, kernels/launch.py). No GPU:
the launch goes through ``LoadedKernel.__call__`` with its stream stood in, the check is faked."""
from __future__ import annotations

import contextlib
import types

import numpy as np
import pytest

from pytest_gemm import kernel
from pytest_gemm.checks import dispatch
from pytest_gemm.checks.sandbox_child import KernelCall, mark_kernel_calls
from pytest_gemm.kernels import launch
from pytest_gemm.model import categories as cat
from pytest_gemm.model.categories import GemmCheckFailure


@kernel
def returns_product(a, b, c):
    return a @ b


@kernel
def writes_into_c(a, b, c):
    c[...] = a @ b


def _loaded(k, monkeypatch) -> launch.LoadedKernel:
    monkeypatch.setattr(launch, "_launcher_stream", contextlib.nullcontext)
    loaded = launch.LoadedKernel.__new__(launch.LoadedKernel)  # a Python launcher needs no compile
    loaded.kernel = k
    return loaded


def _check_failing_as(category: str, k, monkeypatch, wrapped: bool = False) -> GemmCheckFailure:
    """run_check with a stand-in check that calls the launcher once, then fails as ``category``.
    ``wrapped``: the harness's kernel wrapped as the sandbox child's ``default_prepare`` (and the
    in-process mode) wrap it on a GPU (``sandbox_child.mark_kernel_calls``)."""
    def runner(h, shape, params, record, options):
        a, b, c = np.ones((4, 3), np.float32), np.ones((3, 5), np.float32), np.zeros((4, 5), np.float32)
        h.loaded(a, b, c, 4, 5, 3)
        raise GemmCheckFailure(category, "exact at 4x5x3: C was left unwritten", ["a detail of the check's own"])

    monkeypatch.setattr(dispatch.registry, "get", lambda name: types.SimpleNamespace(gpu=True, runner=lambda: runner))
    monkeypatch.setattr(dispatch, "require_device", lambda: None)
    harness = types.SimpleNamespace(loaded=_loaded(k, monkeypatch))
    harness.loaded.returned = "left over from an earlier check"
    if wrapped:
        mark_kernel_calls(harness)
    monkeypatch.setattr("pytest_gemm.kernels.harness.harness_for", lambda kernel, device: harness)
    monkeypatch.setattr("pytest_gemm.kernels.harness.scrub_secrets", lambda: None)
    monkeypatch.setattr(dispatch, "traced", lambda kernel, options, facts: contextlib.nullcontext())
    with pytest.raises(GemmCheckFailure) as failed:
        dispatch.run_check(k, "exact", (4, 5, 3), {}, {}, {})
    return failed.value


def test_a_launcher_that_returns_the_product_is_told_to_write_into_c(monkeypatch):
    failure = _check_failing_as(cat.UNWRITTEN_OUTPUT, returns_product, monkeypatch)
    assert failure.details[0] == "a detail of the check's own"
    assert failure.details[-1].startswith("the launcher returned a numpy.ndarray of shape (4, 5): only C is read, "
                                          "so write the result into c"), failure.details


def test_a_launcher_that_writes_into_c_gets_no_such_line(monkeypatch):
    failure = _check_failing_as(cat.UNWRITTEN_OUTPUT, writes_into_c, monkeypatch)
    assert not any("returned" in d for d in failure.details), failure.details


def test_the_line_is_only_for_outputs_that_read_as_unwritten_or_wrong(monkeypatch):
    failure = _check_failing_as(cat.FAULT, returns_product, monkeypatch)
    assert not any("returned" in d for d in failure.details), failure.details


def test_the_line_comes_through_the_kernel_call_wrapper_every_gpu_check_uses(monkeypatch):
    """On a GPU the harness's kernel is a ``KernelCall`` by the time a check runs: resetting
    ``returned`` through it must reach the kernel whose call sets it."""
    failure = _check_failing_as(cat.UNWRITTEN_OUTPUT, returns_product, monkeypatch, wrapped=True)
    assert failure.details[-1].startswith("the launcher returned a numpy.ndarray of shape (4, 5)"), failure.details
    failure = _check_failing_as(cat.UNWRITTEN_OUTPUT, writes_into_c, monkeypatch, wrapped=True)
    assert not any("returned" in d for d in failure.details), failure.details


def test_an_attribute_set_on_the_kernel_call_wrapper_is_set_on_the_kernel():
    inner = types.SimpleNamespace(returned="old")
    call = KernelCall(inner)
    call.returned = None
    assert inner.returned is None and call.returned is None


@kernel
def returns_c(a, b, c):
    c[...] = a @ b
    return c  # as cupy.matmul(a, b, out=c) does


@kernel
def returns_a_view_of_c(a, b, c):
    c[...] = a @ b
    return c[:]  # torch.matmul(..., out=tc) returns a tensor on c's memory


class CompiledKernel:
    """What Triton's ``kernel[grid](...)`` returns after launching: no array."""


@kernel
def returns_triton_handle(a, b, c):
    c[...] = a @ b
    return CompiledKernel()


@pytest.mark.parametrize("k", [returns_c, returns_a_view_of_c, returns_triton_handle], ids=lambda k: k.name)
def test_a_launcher_that_wrote_into_c_and_returned_c_or_a_launch_handle_gets_no_such_line(k, monkeypatch):
    failure = _check_failing_as(cat.WRONG_VALUES, k, monkeypatch, wrapped=True)
    assert not any("returned" in d for d in failure.details), failure.details
