"""Fixtures for conformance checks and for people writing their own tests.

Each GPU fixture skips with the reason when no GPU is usable; the numpy ones
(inputs, reference, comparisons) work everywhere.
"""
from __future__ import annotations

import contextlib
from typing import Any, Callable

import pytest

from ..kernels.device import GemmDevice, probe, require_device
from .results import record_facts
from ..model.contract import PyKernel, unsupported_reason
from .execution import run_in_sandbox
from .state import state


@pytest.fixture
def gemm_device() -> GemmDevice:
    """The GPU under test: name, compute capability, SMs, shared memory, registers, L2, clocks."""
    return require_device()


@pytest.fixture
def gemm_exact_inputs() -> Callable[..., Any]:
    """Factory ``(m, n, k, precision="fp32", seed=0, with_c=False) -> GemmProblem`` of
    integer-valued inputs whose every product and partial sum is exact."""
    from ..judges.inputs import exact_inputs  # lazy: numpy stays out of the plugin's load

    return exact_inputs


@pytest.fixture
def gemm_random_inputs() -> Callable[..., Any]:
    """Factory ``(m, n, k, precision="fp32", distribution="uniform"|"heavy", seed=0)``."""
    from ..judges.inputs import random_inputs  # lazy: numpy stays out of the plugin's load

    return random_inputs


def _array_module(x: Any) -> Any:
    if type(x).__module__.startswith("cupy"):
        import cupy  # lazy: CuPy (the plugin loads with no GPU)

        return cupy
    import numpy  # lazy: numpy stays out of the plugin's load

    return numpy


def reference_on_best_device(a64: Any, b64: Any, alpha: float = 1.0, beta: float = 0.0, c0: Any = None) -> Any:
    """float64 ``alpha*A@B + beta*C``: on the GPU when one is usable, else numpy.
    Returns an array of the same kind (numpy or CuPy) as ``a64``."""
    from ..judges.reference import reference  # lazy: numpy stays out of the plugin's load

    import numpy as np  # lazy: numpy stays out of the plugin's load

    xp = _array_module(a64)
    if xp is np and not isinstance(probe(), str):
        import cupy  # lazy: CuPy (the plugin loads with no GPU)

        out = reference(cupy.asarray(a64, dtype=cupy.float64), cupy.asarray(b64, dtype=cupy.float64),
                        alpha=alpha, beta=beta, c0=None if c0 is None else cupy.asarray(c0), xp=cupy)
        return cupy.asnumpy(out)
    return reference(xp.asarray(a64, dtype=xp.float64), xp.asarray(b64, dtype=xp.float64),
                     alpha=alpha, beta=beta, c0=c0, xp=xp)


@pytest.fixture
def gemm_reference() -> Callable[..., Any]:
    """``ref(a64, b64, alpha=1.0, beta=0.0, c0=None)`` in float64 (pass ``problem.a64``)."""
    return reference_on_best_device


@pytest.fixture
def gemm_assert_bit_identical() -> Callable[..., None]:
    """``check(got, want, tile=None)``: bit-for-bit equality with a diagnosis on failure."""
    from ..judges.diagnose import assert_bit_identical  # lazy: numpy stays out of the plugin's load

    return assert_bit_identical


@pytest.fixture
def gemm_assert_accurate() -> Callable[..., Any]:
    """``check(got, problem, precision=None)``: within the K- and precision-derived error bound."""
    from ..checks.accuracy import assert_accurate_problem  # lazy: numpy stays out of the plugin's load

    return assert_accurate_problem


@pytest.fixture
def gemm_timer(gemm_device: GemmDevice) -> Any:
    """``timer(fn, flops=...)`` -> TimingResult (CUDA events, L2 flushed, median and spread)."""
    from ..measure.timing import time_gpu  # lazy: a test replaces time_gpu on its module

    def timer(fn: Callable[[], Any], *, flops: float, **kwargs: Any) -> Any:
        kwargs.setdefault("l2_bytes", gemm_device.l2_bytes)
        return time_gpu(fn, flops=flops, **kwargs)

    return timer


@pytest.fixture
def gemm_record(request: pytest.FixtureRequest) -> Callable[[dict], None]:
    """``record(facts)``: attach extra JSON facts (resources) to this check's result record."""
    def record(facts: dict) -> None:
        record_facts(request.node, facts)

    return record


@pytest.fixture
def gemm_case(request: pytest.FixtureRequest) -> Any:
    raise pytest.UsageError(
        f"{request.node.nodeid}: gemm_case is parametrized by @pytest.mark.gemm_cases(check, shapes=...)"
    )


@pytest.fixture
def gemm_check(gemm_case: Any, request: pytest.FixtureRequest) -> Callable[..., dict]:
    """``run(params=None)`` runs ``gemm_case``'s check on its kernel (in the kernel's sandbox
    process) and records the facts it reports; ``params`` replaces the case's parameters.
    Skips when there is no GPU or the GPU is below the kernel's min_cc."""
    kernel = gemm_case.kernel

    def record(facts: dict) -> None:
        record_facts(request.node, facts)

    def run(params: dict | None = None) -> dict:
        # lazy: keeps kernels.autotune, kernels.confine, kernels.declared out of the plugin's load
        from ..kernels.declared import is_bad, refuse

        if is_bad(kernel):  # its declaration is wrong: it is not run, and says why
            refuse(kernel)
        no_gpu = None
        try:
            device = require_device()
        except pytest.skip.Exception as exc:
            if gemm_case.check != "launch" or not isinstance(kernel, PyKernel):
                raise
            no_gpu = str(exc.msg)
        if no_gpu is not None:  # no GPU: the launcher's own code still runs, with stand-in arrays
            # lazy: keeps kernels.autotune, kernels.confine, kernels.declared, kernels.dry_run, kernels.loader out of the plugin's load
            from ..kernels.dry_run import check_offline

            check_offline(kernel, str(request.config.invocation_params.dir), no_gpu,  # fails or skips
                          state(request.config).timeout, _say(request.config))
        if not device.supports(tuple(kernel.min_cc)):
            major, minor = kernel.min_cc
            pytest.skip(f"kernel {kernel.name!r} needs compute capability {major}.{minor} (min_cc); "
                        f"this GPU ({device.name}) is {device.compute_capability[0]}.{device.compute_capability[1]}")
        reason = unsupported_reason(kernel, device.compute_capability)
        if reason:
            pytest.skip(f"{reason} ({device.name})")
        try:
            facts = run_in_sandbox(request.config, kernel, gemm_case.check, gemm_case.shape,
                                   gemm_case.params if params is None else params)
        except BaseException as exc:
            if getattr(exc, "facts", None):
                record(exc.facts)  # type: ignore[attr-defined]  # what was measured before the failure
            raise
        if (facts.get("timing") or facts.get("sweep")) and state(request.config).gpu_shared:
            facts["gpu_shared"] = True  # another xdist worker may have used this GPU meanwhile
        if facts:
            record(facts)
        return facts

    return run


def _say(config: pytest.Config) -> Callable[[str], None]:
    """A line for the terminal while a test runs (past output capture), as pytest-timeout writes."""
    def say(line: str) -> None:
        reporter = config.pluginmanager.get_plugin("terminalreporter")
        capman = config.pluginmanager.get_plugin("capturemanager")
        if reporter is None:
            return
        with capman.global_and_fixture_disabled() if capman is not None else contextlib.nullcontext():
            reporter.write_line(line)
    return say
