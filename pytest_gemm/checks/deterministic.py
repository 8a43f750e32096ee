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
from ..model import categories as cat
from ..model.categories import GemmCheckFailure
from ..model.shapes import Shape

RUNS = 5
SEED, NEW_SEED = 4, 7


def _history_failure(finding: Any, record: Callable[[dict[str, Any]], None], how: str) -> GemmCheckFailure:
    record({"call_history": how})
    return GemmCheckFailure(finding.category, finding.summary, finding.details)


def check_deterministic(h: Harness, shape: Shape, runs: int = RUNS,
                        record: Callable[[dict[str, Any]], None] = lambda facts: None) -> None:
    """Random (inexact) inputs so summation order shows: every launch bit-identical."""
    import cupy

    from ..judges.diagnose import compare_runs
    from ..judges.history import new_inputs_finding, sequence_finding
    from ..judges.inputs import random_inputs

    problem = random_inputs(*shape, precision=h.kernel.precision, distribution="uniform", seed=SEED)
    first = run_kernel(h, problem).c
    outputs, differ = [to_numpy(first)], None
    for _ in range(runs - 1):
        again = run_kernel(h, problem).c
        outputs.append(to_numpy(again))
        if differ is None and not bool(cupy.array_equal(first.view(cupy.uint32), again.view(cupy.uint32))):
            differ = again
    # new values at the same addresses: a result cached by address or shape shows here
    buffers = h.upload(problem)
    before = to_numpy(run_kernel(h, problem, buffers=buffers).c)
    other = random_inputs(*shape, precision=h.kernel.precision, distribution="uniform", seed=NEW_SEED)
    after = to_numpy(run_kernel(h, other, buffers=buffers).c)
    del buffers
    found = new_inputs_finding(before, after)
    if found is not None:
        raise _history_failure(found, record, "new inputs at the same addresses")
    if differ is None:
        return
    found = sequence_finding(outputs)
    if found is not None:
        raise _history_failure(found, record, "calls on the same inputs")
    d = compare_runs(outputs[0], to_numpy(differ))
    details = list(d.details) if d else []
    replay = replay_fresh_history(h, shape, runs)
    if replay.agree:
        found = sequence_finding(replay.outputs, replayed=True) if replay.outputs else None
        if found is not None:
            raise _history_failure(found, record, replay.how)
        details.append(f"{replay.how}: the results came back the same call for call, but did not differ as in "
                       "this check (state from the calls before it, or a rare race)")
    elif replay.agree is False:
        details.append(f"{replay.how}: the two replays differ from each other too, so chance decides the "
                       "output: a race, not state kept between calls")
    else:
        details.append(f"not replayed with a fresh call history: {replay.how}")
    raise GemmCheckFailure(cat.NONDETERMINISTIC, d.summary if d else "outputs differ between launches", details)


class Replay:
    """Two replays of the check's launches with a fresh call history each."""

    def __init__(self, how: str, digests: list[list[str]] | None = None, outputs: list[Any] | None = None):
        from ..judges.history import replays_agree

        self.how = how
        self.outputs = outputs or []               # the first replay's outputs (in-process replays only)
        self.agree = replays_agree(digests or [])  # True, False, or None (not replayed)


def replay_fresh_history(h: Harness, shape: Shape, runs: int) -> Replay:
    """A CUDA kernel: its module loaded again (fresh ``__device__`` memory), twice, in this
    process. A Python launcher: two fresh processes (checks/history_replay.py)."""
    from ..judges.history import digest
    from ..judges.inputs import random_inputs

    if h.loaded.compiled is None:
        from .history_replay import replay_in_fresh_processes

        return replay_in_fresh_processes(h.kernel, shape, runs, SEED)
    import copy

    problem = random_inputs(*shape, precision=h.kernel.precision, distribution="uniform", seed=SEED)
    digests, first_outputs = [], []
    for attempt in range(2):
        fresh = copy.copy(h)
        fresh.loaded = h.loaded.fresh()
        outs = [to_numpy(run_kernel(fresh, problem).c) for _ in range(runs)]
        digests.append([digest(o) for o in outs])
        if attempt == 0:
            first_outputs = outs
    return Replay("replayed twice with a fresh call history (the CUDA module loaded again)", digests, first_outputs)


def run(h: Harness, shape: Shape, params: dict, record: Any, options: dict) -> None:
    check_deterministic(h, shape, record=record)
