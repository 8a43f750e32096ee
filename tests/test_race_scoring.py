"""A racy kernel gets the same score every run: a value check whose launch wrote outside C
fails whatever the values came out as (``checks/common.reject_writes_outside_c``). No GPU:
the launch results are built by hand, as the harness returns them. That every value check applies
the rule is tested by running each on such a launch (tests/test_inputs_judged.py)."""
from __future__ import annotations

import numpy as np
import pytest

from pytest_gemm.checks.common import reject_writes_outside_c
from pytest_gemm.kernels.harness import GuardDamage, LaunchResult
from pytest_gemm.model import categories as cat
from pytest_gemm.model.categories import GemmCheckFailure

from launch_results import launch_result


def _bob_at(m: int, n: int, right: bool) -> LaunchResult:
    """Tiles of 16 with no ``col < N`` on the store (examples/course bob): each row's overhang
    lands in the next row, where it races with that row's right values, and the last row's
    lands after C, where nothing else writes."""
    want = np.arange(m * n, dtype=np.float32).reshape(m, n)
    got = want.copy()
    if not right:  # this time the overhang's zeros were written last
        got[1:, : 16 - n % 16] = 0.0
    overhang = 4 * (16 - n % 16)
    return launch_result(got, GuardDamage(before=0, after=overhang, first_after=0, last_after=overhang - 1, first_before=-1))


def test_a_launch_that_wrote_nothing_outside_c_is_judged_on_its_values():
    reject_writes_outside_c(launch_result(np.zeros((4, 4), np.float32)), "exact", (4, 4, 4))  # no exception


@pytest.mark.parametrize("right", [True, False])
def test_a_racy_launch_fails_alike_whichever_write_won_the_race(right: bool):
    with pytest.raises(GemmCheckFailure) as failure:
        reject_writes_outside_c(_bob_at(17, 33, right), "exact", (17, 33, 65))
    exc = failure.value
    assert exc.category == cat.OUT_OF_BOUNDS_WRITE
    assert exc.summary == ("exact at 17x33x65: the launch wrote outside C (60 bytes after the end of C (from 0 to "
                           "59 bytes past it)), so its values here are not judged: such stores also land inside C, "
                           "in the next rows, where they race with the right values")
    assert "guard every store with row < M && col < N" in exc.details[0]


def test_writes_before_c_count_too():
    damage = GuardDamage(before=8, after=0, first_after=-1, last_after=-1, first_before=8)
    with pytest.raises(GemmCheckFailure, match="8 bytes before its start"):
        reject_writes_outside_c(launch_result(np.zeros((2, 2), np.float32), damage), "coverage", (2, 2, 2))

