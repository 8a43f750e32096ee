"""The sweep check (``--gemm-sweep``): the kernel and cuBLAS at its precision at every size,
in a seeded shuffled order, each timing judged like the speed check (``measure/sweep.py``
has the order and the entries). Like the speed check, a timer the kernel's process replaced is
looked for before the roofs are measured (they are shared with the whole run) and after each of
the kernel's timings, before cuBLAS is timed again (``checks/speed.py``: ``reject_tampering``)."""
from __future__ import annotations

from typing import Any, Callable, Sequence

from ..measure.sweep import SWEEP_SEED, sweep_entry, timing_order
from ..model.shapes import Shape, shape_str
from ..measure.cublas import CUBLAS
from ..measure.gpu_lock import gpu_lock
from ..measure.quiet import busy_marked
from .speed import reject_tampering


def check_sweep(h: Any, shapes: Sequence[Shape], record: Callable[[dict[str, Any]], None],
                seed: int = SWEEP_SEED, budget_s: float = 0.5, measure_roofs: bool = True) -> None:
    """Time ``h``'s kernel and cuBLAS at its precision at every size, in ``timing_order``;
    record ``sweep`` (entries in measurement order), ``sweep_order``, ``sweep_seed``,
    ``sweep_skipped`` and ``roofs``. Raises GemmCheckFailure like the speed check."""
    import cupy  # lazy: CuPy (the plugin loads with no GPU)
    import pytest  # lazy: pytest stays out of the sandbox child

    from ..kernels.harness import harness_for  # lazy: a test replaces harness_for on its module
    from ..measure.roofs import ceilings  # lazy: a test replaces ceilings on its module
    from ..measure.timed import (gpu_quiet, problems_for, process_roofs, reject_escaped_work,  # lazy: tests replace
                                 reject_impossible_timing, timed_run, warm_outside_lock)  # these on their module
    from .cases import skip_reason  # lazy: a test replaces skip_reason on its module

    precision = h.kernel.precision
    with gpu_lock(True, what="sweep") as hold:
        # before anything is measured: the roofs are shared with the whole run (measure/run_cache.py)
        reject_tampering(str(h.kernel.name))
        measured = process_roofs(h.device, measure_roofs)
        quiet = gpu_quiet(h.device, measured, hold.step_aside)
    limits = ceilings(h.device, precision, measured)
    plan = timing_order(shapes, seed)
    entries: list[dict[str, Any]] = []
    skipped: list[dict[str, Any]] = []
    facts = {"sweep": entries, "sweep_order": [[list(s), list(first)] for s, first in plan],
             "sweep_seed": seed, "sweep_skipped": skipped, "roofs": measured or None, "gpu_quiet": quiet}
    record(busy_marked(facts))
    baseline = harness_for(CUBLAS[precision], h.device)

    def measure(shape: Shape, first: tuple[str, str]) -> dict[str, Any]:
        problems = problems_for(precision, shape)  # the same inputs for the kernel and cuBLAS
        warm_outside_lock(h, shape, problems)  # a JIT compile or an autotuner's search: before the GPU is ours alone
        timings: dict[str, Any] = {}
        with gpu_lock(True, what="sweep"), cupy.cuda.Stream.null:  # alone on the GPU for this size; the harness on the null stream
            for who in first:
                if who == "cublas":
                    timings[who], verify_cublas = timed_run(baseline, shape, budget_s, problems)
                    verify_cublas()
                    continue
                timing, verify = timed_run(h, shape, budget_s, problems)
                timings[who] = timing
                reject_tampering(str(h.kernel.name))  # its calls may have replaced the timer: before cuBLAS
                where = f"sweep at {shape_str(shape)}: "
                reject_escaped_work(timing, limits, precision, where)
                verify()
                reject_impossible_timing(timing, shape, precision, limits, where)
        return sweep_entry(shape, timings["kernel"], timings["cublas"])

    for shape, first in plan:
        reason = skip_reason(h.kernel, shape)
        if reason is not None:
            skipped.append({"shape": list(shape), "reason": reason})
        else:
            entries.append(measure(shape, first))
            cupy.get_default_memory_pool().free_all_blocks()  # this size's buffers, before the next size
        record(facts)
    reject_tampering(str(h.kernel.name))
    if not entries:
        pytest.skip(f"kernel {h.kernel.name!r} claims none of the sweep sizes: " + "; ".join(s["reason"] for s in skipped))


def run(h: Any, shape: Any, params: dict, record: Callable[[dict[str, Any]], None], options: dict) -> None:
    """params: {"shapes": [[m, n, k], ...], "seed": int}."""
    check_sweep(h, [tuple(s) for s in params["shapes"]], record, seed=int(params.get("seed", SWEEP_SEED)))  # type: ignore[misc]
