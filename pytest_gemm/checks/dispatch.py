"""Run one named check on one kernel: what the sandbox child (and the in-process mode)
executes. Returns the facts the check recorded."""
from __future__ import annotations

from typing import Any

from ..model.contract import GemmKernel
from . import registry


def run_check(kernel: GemmKernel, check: str, shape: list[int] | tuple[int, ...], params: dict[str, Any],
              options: dict[str, Any], facts: dict[str, Any]) -> dict[str, Any]:
    """Execute ``check`` (a registry name); raise GemmCheckFailure (or pytest's Skipped) as the
    check does. What the check records goes into ``facts``, which survives a failure."""
    from ..kernels.device import require_device
    from ..kernels.harness import harness_for, scrub_secrets

    spec = registry.get(check)
    if not spec.gpu:
        raise ValueError(f"check {check!r} runs without a GPU, in its own conformance test")
    h = harness_for(kernel, require_device())
    try:
        spec.runner()(h, tuple(shape), params, facts.update, options)
    finally:
        scrub_secrets()
    return facts
