"""Running one check on one kernel: in the kernel's child process (the default), or in
this process with ``--gemm-isolation none``."""
from __future__ import annotations

from typing import Any

import pytest

from ..model.contract import GemmKernel
from .state import GemmState, is_ladder_entry, state


def check_timeout(st: GemmState, shape: tuple[int, int, int], params: dict[str, Any] | None = None) -> float:
    """--gemm-timeout, or 60 s plus 1 s per TFLOP of one product at this shape (a sweep: sweep.sweep_timeout)."""
    if st.timeout is not None:
        return st.timeout
    if params and params.get("shapes"):
        from ..measure.sweep import sweep_timeout

        return sweep_timeout(params["shapes"])
    m, n, k = shape
    return 60.0 + 2.0 * m * n * k / 1e12


def run_in_sandbox(config: pytest.Config, kernel: GemmKernel, check: str, shape: tuple[int, int, int],
                   params: dict[str, Any]) -> dict[str, Any]:
    """Run one check on one kernel, in its child process (or in-process with --gemm-isolation none)."""
    st = state(config)
    options = {"min_cublas_fraction": st.min_cublas_fraction}
    if st.isolation == "none":
        from ..checks.dispatch import run_check

        facts: dict[str, Any] = {}
        try:
            run_check(kernel, check, shape, params, options, facts)
        except Exception as exc:
            exc.facts = facts  # type: ignore[attr-defined]
            raise
        return facts
    from ..checks.sandbox import SandboxClient

    spec, index = kernel.origin_spec  # type: ignore[union-attr]
    # The ladder timed for the ranking is ours and trusted: its rungs share one process
    # (one CUDA context, one measurement of the roofs) instead of starting one each.
    key = "ladder" if is_ladder_entry(config, kernel) else id(kernel)
    client = st.sandboxes.get(key)
    if client is None:
        client = st.sandboxes[key] = SandboxClient(spec, index, str(config.invocation_params.dir))
    client.target(spec, index)
    return client.run(check, list(shape), params, options, check_timeout(st, shape, params))


def stop_sandboxes(config: pytest.Config) -> None:
    if state(config, None) is not None:
        for client in state(config).sandboxes.values():
            client.stop()

