"""Run one named check on one kernel: the table the sandbox child (and the
in-process mode) executes. Returns the facts the check recorded."""
from __future__ import annotations

from typing import Any

from .contract import GemmKernel


def run_check(kernel: GemmKernel, check: str, shape: list[int] | tuple[int, ...], params: dict[str, Any],
              options: dict[str, Any], facts: dict[str, Any]) -> dict[str, Any]:
    """Execute ``check``; raise GemmCheckFailure (or pytest's Skipped) as the check does.
    What the check records goes into ``facts``, which survives a failure."""
    from . import checks
    from .device import require_device
    from .performance import check_speed

    device = require_device()
    h = checks.harness_for(kernel, device)
    shape = tuple(shape)  # type: ignore[assignment]
    if check == "launch":
        checks.check_launch(h, facts.update)
    elif check == "exact":
        checks.check_exact(h, shape)  # type: ignore[arg-type]
    elif check == "coverage":
        checks.check_coverage(h, shape)  # type: ignore[arg-type]
    elif check == "guards":
        checks.check_guards(h, shape)  # type: ignore[arg-type]
    elif check == "alphabeta":
        checks.check_alpha_beta(h, shape, params["alpha"], params["beta"])  # type: ignore[arg-type]
    elif check == "deterministic":
        checks.check_deterministic(h, shape)  # type: ignore[arg-type]
    elif check == "accuracy":
        checks.check_accuracy_random(h, shape, params["dist"])  # type: ignore[arg-type]
    elif check == "speed":
        check_speed(h, shape, facts.update, options.get("min_cublas_fraction"),  # type: ignore[arg-type]
                    budget_s=float(options.get("budget_s", 1.0)),
                    measure_roofs=bool(options.get("measure_roofs", True)))
    elif check == "sweep":  # params: {"shapes": [[m, n, k], ...], "seed": int}
        from .sweep import SWEEP_SEED, check_sweep

        check_sweep(h, [tuple(s) for s in params["shapes"]], facts.update,  # type: ignore[misc]
                    seed=int(params.get("seed", SWEEP_SEED)), budget_s=float(options.get("sweep_budget_s", 0.5)),
                    measure_roofs=bool(options.get("measure_roofs", True)))
    else:
        raise ValueError(f"unknown check {check!r}")
    return facts
