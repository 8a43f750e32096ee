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

from .common import Harness, run_kernel, to_numpy
from ..model.categories import GemmCheckFailure
from ..model.shapes import Shape

RUNS = 5
SEED, NEW_SEED = 4, 7


def check_deterministic(h: Harness, shape: Shape, runs: int = RUNS,
                        record: Callable[[dict[str, Any]], None] = lambda facts: None) -> None:
    """Random (inexact) inputs so summation order shows: every launch bit-identical, and new
    values in the same buffers give a new result (judges/history.py judges the outputs)."""
    from ..judges.history import judge_launches
    from ..judges.inputs import random_inputs
    from .history_replay import replay_fresh_history

    problem = random_inputs(*shape, precision=h.kernel.precision, distribution="uniform", seed=SEED)
    outputs = [to_numpy(run_kernel(h, problem).c) for _ in range(runs)]
    # new values at the same addresses: a result cached by address or shape shows here
    buffers = h.upload(problem)
    before = to_numpy(run_kernel(h, problem, buffers=buffers).c)
    other = random_inputs(*shape, precision=h.kernel.precision, distribution="uniform", seed=NEW_SEED)
    after = to_numpy(run_kernel(h, other, buffers=buffers).c)
    del buffers
    found = judge_launches(outputs, before, after, lambda: replay_fresh_history(h, problem, runs))
    if found is None:
        return
    if found.call_history:
        record({"call_history": found.call_history})
    raise GemmCheckFailure(found.category, found.summary, found.details)


def run(h: Harness, shape: Shape, params: dict, record: Any, options: dict) -> None:
    check_deterministic(h, shape, record=record)
