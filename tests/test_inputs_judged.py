"""A and B are judged after every launch of every value check, not by the guards check alone
(BLAS: A and B are unchanged on exit). A launcher that folds alpha into A in place (``a *= alpha``)
changes nothing at alpha == 1, where the guards check launches, and one that rounds A to TF32 in
place changes nothing on exact-integer inputs: the alpha/beta and accuracy checks must see them.
No GPU: each check runs on a stand-in harness whose launch reports A changed, as the real
harness does (``kernels/harness.py``: ``GuardedMatrix.changed``)."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from pytest_gemm.checks import accuracy, alphabeta, beta_zero, common, coverage, deterministic, exact, guards, registry
from pytest_gemm.kernels.harness import GuardDamage, LaunchResult
from pytest_gemm.model import categories as cat
from pytest_gemm.model.categories import GemmCheckFailure

from launch_results import UNCHANGED, launch_result

SHAPE = (17, 33, 65)
# each value check's runner with the parameters its registry entry gives it
CASES = {
    "exact": (exact, {}),
    "coverage": (coverage, {}),
    "guards": (guards, {}),
    "alphabeta": (alphabeta, {"alpha": 0.7, "beta": 1.3}),
    "beta_zero": (beta_zero, {}),
    "deterministic": (deterministic, {}),
    "accuracy": (accuracy, {"dist": "uniform"}),
}


def _launch(a_changed=UNCHANGED, b_changed=UNCHANGED) -> LaunchResult:
    return launch_result(np.zeros(SHAPE[:2], np.float32), a_changed=a_changed, b_changed=b_changed)


def _harness() -> SimpleNamespace:
    return SimpleNamespace(kernel=SimpleNamespace(precision="fp32", beta_zero="blas", name="k", tile=None))


def _failure_of(monkeypatch: pytest.MonkeyPatch, check: str, launched: LaunchResult) -> GemmCheckFailure:
    """What the check ``check`` raises when its launch returns ``launched``."""
    module, params = CASES[check]
    monkeypatch.setattr(module, "run_kernel", lambda h, problem, **kw: launched)
    if hasattr(module, "reference_f32"):  # the beta == 0 check computes its reference before it launches
        monkeypatch.setattr(module, "reference_f32", lambda problem, *a, **kw: np.zeros(SHAPE[:2], np.float64))
    with pytest.raises(GemmCheckFailure) as failure:
        module.run(_harness(), SHAPE, params, lambda facts: None, {})
    return failure.value


@pytest.mark.parametrize("check", list(CASES))
@pytest.mark.parametrize("which", ["A", "B"])
def test_every_value_check_fails_a_launch_that_changed_an_input(monkeypatch, check, which):
    changed = (3, (2, 5))
    exc = _failure_of(monkeypatch, check, _launch(a_changed=changed) if which == "A" else _launch(b_changed=changed))
    assert exc.category == cat.INPUT_MODIFIED, (exc.category, exc.summary)
    dims = "17x65" if which == "A" else "65x33"
    assert exc.summary == (f"{check} at 17x33x65: {which} ({dims}) was modified: 3 elements changed, "
                           "first at row 2, col 5")
    assert cat.INPUT_MODIFIED in registry.get(check).categories, check


@pytest.mark.parametrize("check", list(CASES))
def test_every_value_check_fails_a_launch_that_wrote_outside_c_whatever_its_values(monkeypatch, check):
    """(tests/test_race_scoring.py: why a race's evidence outranks its values)"""
    overrun = GuardDamage(before=0, after=8, first_after=0, last_after=7, first_before=-1)
    exc = _failure_of(monkeypatch, check, launch_result(np.zeros(SHAPE[:2], np.float32), overrun))
    assert exc.category == cat.OUT_OF_BOUNDS_WRITE, exc.summary
    assert cat.OUT_OF_BOUNDS_WRITE in registry.get(check).categories, check


def test_writes_outside_c_are_said_first_since_they_may_be_what_changed_an_input():
    c_overrun = GuardDamage(before=0, after=4, first_after=0, last_after=3, first_before=-1)
    launched = launch_result(np.zeros((2, 2), np.float32), c_overrun, a_changed=(1, (0, 0)))
    with pytest.raises(GemmCheckFailure) as failure:
        common.reject_launch_damage(launched, "exact", (2, 2, 2))
    assert failure.value.category == cat.OUT_OF_BOUNDS_WRITE


def test_a_launch_that_left_its_inputs_alone_is_judged_on_its_values():
    common.reject_launch_damage(_launch(), "exact", SHAPE)  # no exception
