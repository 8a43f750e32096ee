"""Call history or race (judges/history.py), on synthetic outputs: no GPU."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pytest_gemm.judges.history import digest, new_inputs_finding, replays_agree, sequence_finding
from pytest_gemm.judges.sentinels import fill

RNG = np.random.default_rng(0)
RIGHT = RNG.standard_normal((7, 9)).astype(np.float32)
OTHER = RNG.standard_normal((7, 9)).astype(np.float32)
UNWRITTEN = fill((7, 9))


def test_the_previous_result_for_new_inputs_is_stale():
    f = new_inputs_finding(RIGHT, RIGHT.copy(), before_right=True)
    assert f.category == "stale_output" and "returned an earlier call's result for new inputs" in f.summary
    assert new_inputs_finding(RIGHT, OTHER, before_right=True) is None  # a new result for new inputs: right
    assert new_inputs_finding(UNWRITTEN, UNWRITTEN, before_right=False) is None  # coverage's business


def test_garbage_that_does_not_change_is_not_an_earlier_result():
    # memory handed back by the allocator, the same both times: wrong, but no call computed it
    assert new_inputs_finding(OTHER, OTHER.copy(), before_right=False) is None


def test_a_result_that_is_exactly_another_checks_answer_is_stale():
    f = new_inputs_finding(OTHER, OTHER.copy(), before_right=False, earlier="the exact check's inputs at 7x9x5")
    assert f.category == "stale_output"
    assert "for these inputs it wrote exactly A@B of the exact check's inputs at 7x9x5" in f.summary


def test_nothing_written_for_new_inputs():
    f = new_inputs_finding(RIGHT, UNWRITTEN, before_right=True)
    assert f.category == "unwritten_output" and "left C unwritten for new inputs" in f.summary


def test_left_unwritten_after_the_first_call():
    f = sequence_finding([RIGHT, UNWRITTEN, UNWRITTEN, UNWRITTEN, UNWRITTEN])
    assert f.category == "unwritten_output"
    assert f.summary.startswith("left C unwritten after its first call") and "calls 2, 3, 4 and 5" in f.summary
    f = sequence_finding([RIGHT, RIGHT, RIGHT, UNWRITTEN, UNWRITTEN])
    assert f.summary.startswith("left C unwritten after its 3rd call")


def test_without_a_replay_only_the_unambiguous_sign_counts():
    partial = RIGHT.copy()
    partial[-1] = UNWRITTEN[-1]
    assert sequence_finding([RIGHT, partial, RIGHT, partial, RIGHT]) is None  # a racy work queue could do that
    assert sequence_finding([RIGHT, OTHER, RIGHT, OTHER, RIGHT]) is None      # a race
    assert sequence_finding([RIGHT, UNWRITTEN, RIGHT, UNWRITTEN, RIGHT]) is None  # not "from then on"
    assert sequence_finding([UNWRITTEN, UNWRITTEN]) is None


def test_replayed_sequences_name_what_changed_with_the_history():
    partial = RIGHT.copy()
    partial[-1] = UNWRITTEN[-1]
    f = sequence_finding([RIGHT, partial, RIGHT, partial, RIGHT], replayed=True)
    assert f.category == "unwritten_output"
    assert f.summary.startswith("row 6 (the last one) was left unwritten on calls 2 and 4 of 5")
    assert "not a race" in f.summary
    f = sequence_finding([RIGHT, OTHER, OTHER, OTHER, OTHER], replayed=True)
    assert f.category == "stale_output" and "calls 2, 3, 4 and 5 of 5" in f.summary
    assert sequence_finding([RIGHT] * 5, replayed=True) is None


def test_garbage_that_changes_with_the_history_is_not_named_state():
    # the first output is not right for its inputs (memory handed back by the allocator): no history finding
    assert sequence_finding([OTHER, UNWRITTEN, UNWRITTEN], first_right=False) is None
    assert sequence_finding([OTHER, RIGHT, RIGHT], replayed=True, first_right=False) is None


def test_replays_agree_call_for_call_or_not():
    a = [digest(x) for x in (RIGHT, UNWRITTEN, UNWRITTEN)]
    assert replays_agree([a, list(a)]) is True
    assert replays_agree([a, [digest(RIGHT), digest(OTHER), digest(UNWRITTEN)]]) is False
    assert replays_agree([a]) is None
    assert digest(RIGHT) == digest(RIGHT.copy()) and digest(RIGHT) != digest(OTHER)


# -- the determinism check's whole judgement (judges/history.judge_launches) -----------------------

from pytest_gemm.judges.history import Replay, judge_launches  # noqa: E402

PARTIAL = RIGHT.copy()
PARTIAL[-1] = UNWRITTEN[-1]
NOISY = RIGHT + np.float32(1e-6)


def _replay(*sequences, outputs=True):
    def replay():
        replay.calls += 1
        return Replay("replayed", [[digest(o) for o in seq] for seq in sequences], sequences[0] if outputs else None)
    replay.calls = 0
    return replay


def test_deterministic_and_fresh_for_new_inputs_passes_without_a_replay():
    replay = _replay([RIGHT] * 5)
    assert judge_launches([RIGHT] * 5, RIGHT, OTHER, replay) is None and replay.calls == 0


def test_a_cached_result_is_stale_even_when_the_launches_agree():
    f = judge_launches([RIGHT] * 5, RIGHT, RIGHT.copy(), _replay())
    assert f.category == "stale_output" and f.call_history == "new inputs at the same addresses"
    # a cache keyed on the shape: every launch returns the exact check's answer
    f = judge_launches([OTHER] * 5, OTHER, OTHER.copy(), _replay(), before_right=False,
                       earlier="the exact check's inputs at 7x9x5")
    assert f.category == "stale_output" and "exact check's inputs" in f.summary
    # the allocator's garbage, the same every launch: not stale (wrong values, for other checks to say)
    assert judge_launches([OTHER] * 5, OTHER, OTHER.copy(), _replay(), before_right=False) is None


def test_first_call_only_is_unwritten_without_a_replay():
    replay = _replay()
    f = judge_launches([RIGHT, UNWRITTEN, UNWRITTEN, UNWRITTEN, UNWRITTEN], UNWRITTEN, UNWRITTEN, replay)
    assert f.category == "unwritten_output" and f.summary.startswith("left C unwritten after its first call")
    assert f.call_history and replay.calls == 0


def test_first_call_only_outlasts_every_correctness_check_of_a_shape():
    """tests/untrusted's first_call_only must fail the speed check only, whichever correctness
    checks xdist puts in its process and in whatever order: it computes more calls of a shape than
    all of them make at one shape, and no more than the fewest timed calls a speed check makes
    (its stopping rule's minimum; warm-up calls come before them). With 32 it computed every call
    of a speed check that stopped after 30 (the H200 at abd2fc4) and passed it."""
    import inspect

    from pytest_gemm.checks import coverage, deterministic, exact, guards
    from pytest_gemm.measure.timing import STOP_MIN_CALLS
    from suite_helpers import load_declarations

    kernels = load_declarations(Path(__file__).parent / "untrusted" / "kernels.py", "untrusted_kernels_calls")
    one_each = sum(inspect.getsource(m).count("run_kernel(") for m in (exact, coverage, guards))
    together = one_each + deterministic.RUNS + 2  # five on one input set, then two with new values
    assert together == 11 and together < kernels.FIRST_CALLS <= STOP_MIN_CALLS


def test_a_race_stays_a_race_when_the_fresh_replays_differ():
    f = judge_launches([RIGHT, NOISY, RIGHT, RIGHT, NOISY], RIGHT, OTHER,
                       _replay([RIGHT, NOISY, NOISY, RIGHT, RIGHT], [RIGHT, RIGHT, NOISY, RIGHT, NOISY]))
    assert f.category == "nondeterministic" and f.call_history is None
    assert "a race (a missing __syncthreads, or float atomics)" in f.summary
    assert any("a race, not state" in line for line in f.details)


def test_state_is_named_when_the_fresh_replays_agree():
    seq = [RIGHT, PARTIAL, RIGHT, PARTIAL, RIGHT]
    f = judge_launches(seq, PARTIAL, OTHER, _replay(seq, list(seq)))
    assert f.category == "unwritten_output" and f.call_history == "replayed"
    assert "row 6 (the last one) was left unwritten on calls 2 and 4 of 5" in f.summary


def test_a_replay_that_shows_nothing_or_cannot_run_leaves_a_race():
    launches = [RIGHT, NOISY, RIGHT, RIGHT, RIGHT]
    quiet = judge_launches(launches, RIGHT, OTHER, _replay([RIGHT] * 5, [RIGHT] * 5))
    assert quiet.category == "nondeterministic" and any("did not differ as in this check" in d for d in quiet.details)
    none = judge_launches(launches, RIGHT, OTHER, lambda: Replay("no spec"))
    assert none.category == "nondeterministic" and any("not replayed" in d for d in none.details)
    # replays that agree but bring back no outputs (nothing to name what changed): not called state
    digests_only = judge_launches(launches, RIGHT, OTHER, _replay(launches, list(launches), outputs=False))
    assert digests_only.category == "nondeterministic"
    # replays that agree on garbage: not state either
    garbage = [OTHER, NOISY, OTHER, NOISY, OTHER]
    f = judge_launches(garbage, RIGHT, OTHER, _replay(garbage, list(garbage)), right=lambda c: c is not OTHER)
    assert f.category == "nondeterministic"


def test_a_value_that_follows_the_history_is_stale():
    seq = [RIGHT, OTHER, OTHER, OTHER, OTHER]  # from its second call on, another result, wrong for the inputs
    f = judge_launches(seq, RIGHT, NOISY, _replay(seq, list(seq)), right=lambda c: np.array_equal(c, RIGHT))
    assert f.category == "stale_output" and "calls 2, 3, 4 and 5 of 5" in f.summary and "not a race" in f.summary


def test_a_python_launcher_replay_says_why_it_could_not_run(tmp_path, monkeypatch):
    from types import SimpleNamespace

    from pytest_gemm.checks.history_replay import replay_in_fresh_processes

    r = replay_in_fresh_processes(SimpleNamespace(), (8, 8, 8), 5, 4)
    assert r.agree is None and "not loaded from a --gemm-kernel spec" in r.how
    monkeypatch.chdir(tmp_path)  # the fresh processes load the spec from here: it is not there
    r = replay_in_fresh_processes(SimpleNamespace(origin_spec=("missing_module:k", 0)), (8, 8, 8), 5, 4)
    assert r.agree is None and "a replay in a fresh process failed" in r.how


def test_the_replay_reports_are_read_back(tmp_path):
    import json

    from pytest_gemm.checks.history_replay import read_replays

    seq = [RIGHT, UNWRITTEN, UNWRITTEN]
    paths = [tmp_path / f"replay{i}.json" for i in range(2)]
    for path in paths:
        for i, c in enumerate(seq):
            np.save(path.with_suffix(f".{i}.npy"), c)
        path.write_text(json.dumps({"digests": [digest(c) for c in seq]}))
    r = read_replays(paths, len(seq))
    assert r.agree is True and len(r.outputs) == 3 and np.array_equal(r.outputs[0], RIGHT)
    paths[1].write_text(json.dumps({"digests": [digest(c) for c in (RIGHT, OTHER, UNWRITTEN)]}))
    assert read_replays(paths, len(seq)).agree is False
    paths[1].unlink()
    assert "failed" in read_replays(paths, len(seq)).how


def _computed(c):
    """checks/deterministic.py's judgement, on numpy: is the output A@B at all (RIGHT's inputs)?"""
    from pytest_gemm.checks.deterministic import COMPUTED_FRACTION
    from pytest_gemm.judges.bounds import fraction_within_bound

    return fraction_within_bound(c, RIGHT, np.abs(RIGHT) + 1.0, 5, "fp32") >= COMPUTED_FRACTION


def test_garbage_that_differs_between_launches_is_not_a_race():
    """tests/verdicts' allocates_only copies whatever memory the allocator hands back: when that
    differs between launches the check must not call it nondeterministic (a race is the root cause
    of every other failure); its root cause is that C is never computed (wrong_values here)."""
    garbage = [RNG.standard_normal((7, 9)).astype(np.float32) * 1e3 for _ in range(5)]
    replay = _replay(garbage, garbage)
    f = judge_launches(garbage, garbage[0], garbage[1], replay, before_right=False,
                       right=lambda c: False, computed=_computed)
    assert f.category == "wrong_values" and "no launch computed A@B" in f.summary
    assert f.call_history is None and replay.calls == 0
    # a race spoils some elements of a launch, not all: still nondeterministic
    racy = RIGHT.copy()
    racy[2, 3] += 100.0
    f = judge_launches([RIGHT, racy, RIGHT, RIGHT, racy], RIGHT, OTHER, _replay([RIGHT, racy], [racy, RIGHT]),
                       right=lambda c: c is RIGHT, computed=_computed)
    assert f.category == "nondeterministic"


def test_the_fraction_within_the_bound_counts_elements():
    from pytest_gemm.judges.bounds import fraction_within_bound

    gauge = np.abs(RIGHT) + 1.0
    assert fraction_within_bound(RIGHT, RIGHT, gauge, 5, "fp32") == 1.0
    spoiled = RIGHT.copy()
    spoiled[0] = np.nan
    spoiled[1] += 1.0
    assert fraction_within_bound(spoiled, RIGHT, gauge, 5, "fp32") == pytest.approx(5 / 7)
