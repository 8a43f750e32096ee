"""Determinism: launches on the same inputs give bit-identical outputs, and new inputs give
new outputs.

Five launches on the same random inputs must be bit-identical; then one more on other values
written into the same A and B must not return the previous result. When launches differ, the
check tells a race (different outputs for one call history: ``nondeterministic``) from state
kept between calls (outputs that follow the call history: ``stale_output`` or
``unwritten_output``, with the fact ``call_history``): a CUDA kernel is replayed twice with a
fresh call history (its module loaded again), a Python launcher twice in fresh processes
(checks/history_replay.py). The evidence rules are judges/history.py.
"""
from __future__ import annotations

from typing import Any, Callable

from ..kernels.harness import Harness, keep_secret
from .common import bits_equal, reference_f32, reject_launch_damage, run_kernel, to_numpy
from ..model.categories import GemmCheckFailure
from ..model.shapes import Shape
from ..judges.history import judge_launches
from ..judges.inputs import random_inputs
from .history_replay import replay_fresh_history
from ..judges.bounds import check_accuracy
from ..judges.reference import abs_product
from ..judges.bounds import fraction_within_bound
from ..judges.inputs import GemmInexactError, device_exact, exact_inputs

RUNS = 5
SEED, NEW_SEED = 4, 7


def check_deterministic(h: Harness, shape: Shape, runs: int = RUNS,
                        record: Callable[[dict[str, Any]], None] = lambda facts: None) -> None:
    """Random (inexact) inputs so summation order shows: every launch bit-identical, and new
    values in the same buffers give a new result (judges/history.py judges the outputs)."""

    problem = random_inputs(*shape, precision=h.kernel.precision, distribution="uniform", seed=SEED)
    launch = run_kernel(h, problem)
    reject_launch_damage(launch, "deterministic", shape)  # its race would make this check's verdict a coin toss
    first = launch.c  # kept on the device meanwhile, as a caller keeps its result
    outputs, again = [to_numpy(first)], None
    for _ in range(runs - 1):
        again = run_kernel(h, problem).c  # (the previous one is released only once this one is in)
        outputs.append(to_numpy(again))
    # new values at the same addresses: a result cached by address or shape shows here
    buffers = h.upload(problem)
    before = run_kernel(h, problem, buffers=buffers).c
    before_right = _accurate(h, before, problem)
    earlier = None if before_right else earlier_result(h, shape, before)
    before = to_numpy(before)
    other = random_inputs(*shape, precision=h.kernel.precision, distribution="uniform", seed=NEW_SEED)
    after = to_numpy(run_kernel(h, other, buffers=buffers).c)
    del buffers, first, again
    found = judge_launches(outputs, before, after, lambda: replay_fresh_history(h, problem, runs), before_right,
                           earlier, right=lambda c: _accurate(h, c, problem),
                           computed=lambda c: _computed(h, c, problem))
    if found is None:
        return
    if found.call_history:
        record({"call_history": found.call_history})
    raise GemmCheckFailure(found.category, found.summary, found.details)


def _accurate(h: Harness, got: Any, problem: Any) -> bool:
    """Within the accuracy bound of the kernel's precision (judges/bounds.py); ``got`` on the
    device or the host."""
    import cupy  # lazy: CuPy (the plugin loads with no GPU)

    got = cupy.asarray(got)

    gauge = abs_product(*device_exact(problem, cupy), xp=cupy)
    return check_accuracy(got, reference_f32(problem), gauge, problem.k, h.kernel.precision, xp=cupy).passed


COMPUTED_FRACTION = 0.01  # fewer elements than this within the bound in every launch: nothing was computed


def _computed(h: Harness, got: Any, problem: Any) -> bool:
    """Whether ``got`` is A@B at all: at least ``COMPUTED_FRACTION`` of its elements within the bound."""
    import cupy  # lazy: CuPy (the plugin loads with no GPU)


    gauge = abs_product(*device_exact(problem, cupy), xp=cupy)
    return fraction_within_bound(cupy.asarray(got), reference_f32(problem), gauge, problem.k,
                                 h.kernel.precision, xp=cupy) >= COMPUTED_FRACTION


# The exact inputs other checks give a kernel (seed, with C, whose): A@B of them, returned for
# other inputs at the same shape, is an earlier call's result.
EARLIER_INPUTS = ((0, False, "the exact check's inputs"), (1, False, "the coverage check's inputs"),
                  (2, False, "the guards check's inputs"), (6, True, "the beta == 0 check's inputs"))


def earlier_result(h: Harness, shape: Shape, got: Any) -> str | None:
    """Whose inputs ``got`` is exactly A@B of, among the exact problems other checks use at this
    shape (the float32 rounding of their float64 reference, bit for bit), or None."""

    for seed, with_c, whose in EARLIER_INPUTS:
        try:
            p = exact_inputs(*shape, precision=h.kernel.precision, seed=seed, with_c=with_c)
        except GemmInexactError:
            return None
        want32 = reference_f32(p).astype("float32")
        keep_secret(want32)  # a right answer: scrubbed before its memory goes back to the pool
        if bits_equal(got, want32):
            return f"{whose} at {'x'.join(map(str, shape))}"
    return None


def run(h: Harness, shape: Shape, params: dict, record: Any, options: dict) -> None:
    check_deterministic(h, shape, record=record)
