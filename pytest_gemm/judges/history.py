"""Call history or race: when launches on the same inputs differ, is the output a function of
the kernel's call history (state it keeps between calls: a cache, a first-call flag, a
counter in ``__device__`` memory) or of chance (a race, float atomics)? Pure numpy
(checks/deterministic.py gathers the outputs).

- A race gives different outputs for one call history: two replays with a fresh history
  (the CUDA module loaded again, or a fresh process) differ from each other.
- State gives outputs that follow the history: the replays agree call for call, and calls
  within a replay differ as they did in the check.
- Two direct signs need no replay: a call on new inputs at the same addresses that returns
  the previous call's output bit for bit ("returned an earlier call's result for new
  inputs": a cache keyed on addresses or shapes), and calls after a complete one that leave
  all of C unwritten ("left C unwritten after its first call": work done once per shape).

Each finding is ``stale_output`` or ``unwritten_output`` with the fact ``call_history``;
the verdict (outputs/records.py) makes it the root cause in the place of a race.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np

from ..model.categories import NONDETERMINISTIC, STALE_OUTPUT, UNWRITTEN_OUTPUT, WRONG_VALUES
from .region import describe_region
from .sentinels import unwritten_mask
from .diagnose import compare_runs

_STATE = ("the output depends on the kernel's call history, not on its inputs: it keeps state between calls "
          "(a cache, a flag set on the first call, a counter in __device__ memory); a call must compute "
          "C from A and B every time")


@dataclass
class HistoryFinding:
    category: str
    summary: str
    details: list[str] = field(default_factory=list)
    call_history: str | None = None  # the evidence that the output follows the history, or None (a race)


def digest(c: np.ndarray) -> str:
    """A short fingerprint of an output's bits (replays in another process compare these)."""
    return hashlib.sha1(np.ascontiguousarray(c, dtype=np.float32).tobytes()).hexdigest()[:16]


def _ordinal(i: int) -> str:
    suffix = "th" if 10 <= i % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(i % 10, "th")
    return f"{i}{suffix}"


def _calls(indices: Sequence[int]) -> str:
    names = [str(i + 1) for i in indices]
    return "call " + names[0] if len(names) == 1 else "calls " + ", ".join(names[:-1]) + " and " + names[-1]


def new_inputs_finding(before: np.ndarray, after: np.ndarray, before_right: bool,
                       earlier: str | None = None) -> HistoryFinding | None:
    """``before``: a call's output, ``before_right`` whether it is right for that call's inputs
    (within the accuracy bound), ``earlier`` what it is exactly when it is not (A@B of the inputs
    of an earlier call, named), or None; ``after``: the next call's output, on other values
    written into the same A and B (C refilled). Only a result that was right for some inputs
    counts as stale: garbage that does not change (memory handed back by the allocator) is not
    an earlier call's result."""
    b = np.ascontiguousarray(before, dtype=np.float32)
    a = np.ascontiguousarray(after, dtype=np.float32)
    if b.shape != a.shape or unwritten_mask(b).all():
        return None
    cache = ["a cache keyed on the input addresses or the shape, not on their contents, returns stale results "
             "to any caller that reuses its buffers", _STATE]
    if earlier is not None:
        return HistoryFinding(STALE_OUTPUT,
                              f"returned an earlier call's result for new inputs: for these inputs it wrote exactly "
                              f"A@B of {earlier}", cache)
    if not before_right:
        return None
    if np.array_equal(b.view(np.uint32), a.view(np.uint32)):
        return HistoryFinding(STALE_OUTPUT,
                              "returned an earlier call's result for new inputs: called again with new values in A "
                              "and B (at the same addresses), it wrote the previous call's C bit for bit", cache)
    if unwritten_mask(a).all():
        return HistoryFinding(UNWRITTEN_OUTPUT,
                              "left C unwritten for new inputs: called again with new values in A and B (at the "
                              "same addresses), it wrote no element of C", [_STATE])
    return None


def sequence_finding(outputs: Sequence[np.ndarray], replayed: bool = False,
                     first_right: bool = True) -> HistoryFinding | None:
    """Successive calls on the same inputs, the first of them right (``first_right``: within the
    accuracy bound; else nothing is said: garbage that changes is no call history). Later calls
    that leave elements unwritten which the first call wrote: ``unwritten_output``; with
    ``replayed`` (the sequence came back call for call with a fresh history, so it is not
    chance) any other difference: ``stale_output``. Without a replay only the unambiguous sign
    counts: a later call leaving all of C unwritten."""
    outs = [np.ascontiguousarray(o, dtype=np.float32) for o in outputs]
    if len(outs) < 2 or not first_right:
        return None
    first_unwritten = unwritten_mask(outs[0])
    if first_unwritten.all():
        return None
    lost = [unwritten_mask(o) & ~first_unwritten for o in outs[1:]]
    whole = [bool(unwritten_mask(o).all()) for o in outs[1:]]
    later = [i + 1 for i, mask in enumerate(lost) if mask.any()]
    how = ("with a fresh call history (replayed twice, the same results call for call: not a race)" if replayed
           else "on the same inputs")
    if later and all(whole[i - 1] for i in later) and later == list(range(later[0], len(outs))):
        n = later[0]  # calls before it wrote C; every call from it on left C unwritten
        after = "its first call" if n == 1 else f"its {_ordinal(n)} call"
        return HistoryFinding(UNWRITTEN_OUTPUT,
                              f"left C unwritten after {after}: {_calls(range(n))} {how} wrote C, "
                              f"{_calls(range(n, len(outs)))} left every element unwritten",
                              [_STATE])
    if not replayed:
        return None
    if later:
        union = np.logical_or.reduce([lost[i - 1] for i in later])
        where, more = describe_region(union, "were left unwritten")
        return HistoryFinding(UNWRITTEN_OUTPUT, f"{where} on {_calls(later)} of {len(outs)} {how}",
                              [*more, "call 1 wrote them", _STATE])
    bits = [o.view(np.uint32) for o in outs]
    changed = [i for i in range(1, len(outs)) if not np.array_equal(bits[i], bits[0])]
    if not changed:
        return None
    return HistoryFinding(STALE_OUTPUT,
                          f"the output follows the call history: {_calls(changed)} of {len(outs)} {how} "
                          "gave other results than call 1", [_STATE])


def right_but_history_ordered(outputs: Sequence[np.ndarray], how: str) -> HistoryFinding:
    """Outputs that follow the call history, every one of them right for its inputs (within the
    bound): each call computed C from its A and B, so nothing is stale (BLAS's rule holds); only
    the plugin's determinism rule is broken (launches on the same inputs give the same bits,
    unless declared otherwise): ``nondeterministic``, no state finding. A launcher whose first
    call at a shape leaves the result of another summation order than its later calls (a tuner
    of its own that keeps its last try's output) does this."""
    bits = [np.ascontiguousarray(o, dtype=np.float32).view(np.uint32) for o in outputs]
    changed = [i for i in range(1, len(bits)) if not np.array_equal(bits[i], bits[0])]
    return HistoryFinding(
        NONDETERMINISTIC,
        f"launches on the same inputs give other bits as the call history goes on ({_calls(changed)} of "
        f"{len(bits)} gave other results than call 1, the same way when {how}), though every one of them is right for the inputs (within the "
        "error bound): the summation order depends on the call history, e.g. a tuner that leaves its last try's "
        "result on its first call at a shape",
        ["every call computed C from its own A and B (no earlier result was returned), but launches on the same "
         "inputs must give the same bits: return the chosen configuration's result from every call, or declare "
         "deterministic=False"])


class Replay:
    """Replays of a check's launches with a fresh call history each: ``how`` they were made (or
    why not), the first replay's outputs when it ran in this process, and whether the digest
    sequences agree (True, False, or None: not replayed)."""

    def __init__(self, how: str, digests: Sequence[Sequence[str]] | None = None,
                 outputs: Sequence[np.ndarray] | None = None):
        self.how = how
        self.outputs = list(outputs or [])
        self.agree = replays_agree(digests or [])


def replays_agree(replays: Sequence[Sequence[str]]) -> bool | None:
    """Digest sequences of replays with a fresh history. True: identical call for call (the
    outputs follow the history); False: they differ (chance: a race); None: fewer than two."""
    if len(replays) < 2:
        return None
    return all(list(r) == list(replays[0]) for r in replays[1:])


def judge_launches(outputs: Sequence[np.ndarray], before: np.ndarray, after: np.ndarray,
                   replay: Callable[[], Replay], before_right: bool = True,
                   earlier: str | None = None,
                   right: Callable[[np.ndarray], bool] = lambda c: True,
                   computed: Callable[[np.ndarray], bool] = lambda c: True) -> HistoryFinding | None:
    """The determinism check's verdict. ``outputs``: launches on the same inputs; ``before`` and
    ``after``: one launch each on two input sets written into the same buffers (``before_right``
    and ``earlier`` as ``new_inputs_finding`` takes them); ``replay``: replays the same-input
    launches twice with a fresh call history (called only when needed); ``right``: whether an
    output of those inputs is within the accuracy bound; ``computed``: whether an output is A@B at
    all (most of its elements within the bound: a race spoils some, memory nobody computed spoils
    all). Launches that differ but none of which computed anything are garbage that changes, not a
    race: ``wrong_values`` (the checks that met it say what; its root cause is that C is never
    computed). None: deterministic and not stale."""

    found = new_inputs_finding(before, after, before_right, earlier)
    if found is not None:
        found.call_history = "new inputs at the same addresses"
        return found
    bits = [np.ascontiguousarray(o, dtype=np.float32).view(np.uint32) for o in outputs]
    other = next((i for i in range(1, len(bits)) if not np.array_equal(bits[i], bits[0])), None)
    if other is None:
        return None
    if not any(computed(o) for o in outputs):
        return HistoryFinding(WRONG_VALUES,
                              f"no launch computed A@B: in each of {len(outputs)} launches on the same inputs almost no "
                              "element is within the error bound, and they differ from one launch to the next (whatever "
                              "C's memory held, not a race)", ["write alpha*A@B (+ beta*C) into every element of C"])
    found = sequence_finding(outputs, first_right=right(outputs[0]))
    if found is not None:
        found.call_history = "calls on the same inputs"
        return found
    d = compare_runs(outputs[0], outputs[other])
    details = list(d.details) if d else []
    r = replay()
    if r.agree:
        found = sequence_finding(r.outputs, replayed=True, first_right=right(r.outputs[0])) if r.outputs else None
        if found is not None and found.category == STALE_OUTPUT and all(right(o) for o in r.outputs):
            return right_but_history_ordered(r.outputs, r.how)
        if found is not None:
            found.call_history = r.how
            return found
        details.append(f"{r.how}: the results came back the same call for call, but did not differ as in "
                       "this check (state from the calls before it, or a rare race)")
    elif r.agree is False:
        details.append(f"{r.how}: the two replays differ from each other too, so chance decides the "
                       "output: a race, not state kept between calls")
    else:
        details.append(f"not replayed with a fresh call history: {r.how}")
    return HistoryFinding(NONDETERMINISTIC, d.summary if d else "outputs differ between launches", details)


__all__ = ["HistoryFinding", "Replay", "judge_launches", "digest", "new_inputs_finding", "sequence_finding", "replays_agree"]
