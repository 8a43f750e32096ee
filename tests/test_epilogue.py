"""judges/epilogue.py: a wrong alpha/beta output is named by the formula it matches."""
from __future__ import annotations

import numpy as np

from pytest_gemm.judges.epilogue import explain_epilogue
from pytest_gemm.judges.inputs import exact_inputs


def _problem():
    return exact_inputs(31, 17, 9, precision="fp32", seed=3, with_c=True)


def test_the_right_epilogue_says_nothing():
    p = _problem()
    assert explain_epilogue(0.7 * (p.a64 @ p.b64) + 1.3 * p.c0, p.a64, p.b64, p.c0, 0.7, 1.3) is None


def test_ignoring_beta_ignoring_alpha_and_swapping_them_are_named():
    p = _problem()
    ab = p.a64 @ p.b64
    assert "beta is ignored" in explain_epilogue(0.7 * ab, p.a64, p.b64, p.c0, 0.7, 1.3)
    assert "alpha is ignored" in explain_epilogue(ab + 1.3 * p.c0, p.a64, p.b64, p.c0, 0.7, 1.3)
    assert "swapped" in explain_epilogue(1.3 * ab + 0.7 * p.c0, p.a64, p.b64, p.c0, 0.7, 1.3)


def test_at_alpha_zero_an_all_zero_output_is_beta_ignored_not_a_k_loop_claim():
    p = _problem()
    got = np.zeros_like(p.a64 @ p.b64)  # alpha*acc with alpha = 0, beta * C_old never added
    assert "beta is ignored" in explain_epilogue(got, p.a64, p.b64, p.c0, 0.0, 1.0)


def test_with_beta_zero_there_is_no_c_old_to_blame():
    p = _problem()
    ab = p.a64 @ p.b64
    assert explain_epilogue(ab, p.a64, p.b64, None, 1.0, 0.0) is None
    assert explain_epilogue(np.full_like(ab, np.nan), p.a64, p.b64, None, 1.0, 0.0) is None  # not finite: no claim


def test_the_smallest_claim_is_made_where_formulas_coincide():
    p = _problem()
    ab = p.a64 @ p.b64
    assert "alpha is ignored" in explain_epilogue(ab, p.a64, p.b64, None, 0.7, 0.0)  # beta == 0: not blamed
    assert "beta is ignored" in explain_epilogue(ab, p.a64, p.b64, p.c0, 1.0, 1.3)  # alpha == 1: not blamed


def test_with_no_c_old_an_all_zero_output_is_not_called_a_swap():
    """At beta == 0 the swap's formula is beta*A@B + alpha*C_old = 0 + alpha*(what C held, the fill), not 0:
    an all-zero output (a K loop that never runs) is no swap. The verdict takes a swap as the root cause
    and its diagnosis (outputs/verdicts.py), so a false one would misname that kernel."""
    p = _problem()
    zeros = np.zeros_like(p.a64 @ p.b64)
    assert explain_epilogue(zeros, p.a64, p.b64, None, 0.7, 0.0) is None
    assert "swapped" in explain_epilogue(1.3 * (p.a64 @ p.b64) + 0.7 * p.c0, p.a64, p.b64, p.c0, 0.7, 1.3)
