"""Call history or race (judges/history.py), on synthetic outputs: no GPU."""
from __future__ import annotations

import numpy as np

from pytest_gemm.judges.history import digest, new_inputs_finding, replays_agree, sequence_finding
from pytest_gemm.judges.sentinels import fill

RNG = np.random.default_rng(0)
RIGHT = RNG.standard_normal((7, 9)).astype(np.float32)
OTHER = RNG.standard_normal((7, 9)).astype(np.float32)
UNWRITTEN = fill((7, 9))


def test_the_previous_result_for_new_inputs_is_stale():
    f = new_inputs_finding(RIGHT, RIGHT.copy())
    assert f.category == "stale_output" and "returned an earlier call's result for new inputs" in f.summary
    assert new_inputs_finding(RIGHT, OTHER) is None  # a new result for new inputs: right
    assert new_inputs_finding(UNWRITTEN, UNWRITTEN) is None  # wrote nothing either time: coverage's business


def test_nothing_written_for_new_inputs():
    f = new_inputs_finding(RIGHT, UNWRITTEN)
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


def test_replays_agree_call_for_call_or_not():
    a = [digest(x) for x in (RIGHT, UNWRITTEN, UNWRITTEN)]
    assert replays_agree([a, list(a)]) is True
    assert replays_agree([a, [digest(RIGHT), digest(OTHER), digest(UNWRITTEN)]]) is False
    assert replays_agree([a]) is None
    assert digest(RIGHT) == digest(RIGHT.copy()) and digest(RIGHT) != digest(OTHER)
