"""Exact correctness, coverage, guard bands, alpha/beta, determinism, accuracy.

Each test only picks its cases; ``gemm_check()`` runs the check of that name
(pytest_gemm/checks.py) on the case's kernel in the kernel's own process.
"""
from __future__ import annotations

import pytest

from pytest_gemm import cases as C


@pytest.mark.gemm_cases("exact", shapes=C.EXACT_SHAPES)
def test_exact(gemm_case, gemm_check):
    gemm_check()


@pytest.mark.gemm_cases("coverage", shapes=C.EDGE_SHAPES)
def test_writes_every_output(gemm_case, gemm_check):
    gemm_check()


@pytest.mark.gemm_cases("guards", shapes=C.EDGE_SHAPES)
def test_writes_nothing_else(gemm_case, gemm_check):
    gemm_check()


@pytest.mark.gemm_cases("alphabeta", shapes=[C.ALPHA_BETA_SHAPE], when="alpha_beta",
                        params=[{"alpha": a, "beta": b} for a in C.ALPHAS for b in C.BETAS])
def test_alpha_beta(gemm_case, gemm_check):
    gemm_check()


@pytest.mark.gemm_cases("deterministic", shapes=[C.DETERMINISM_SHAPE], when="deterministic")
def test_deterministic(gemm_case, gemm_check):
    gemm_check()


@pytest.mark.gemm_cases("accuracy", shapes=C.ACCURACY_SHAPES,
                        params=[{"dist": d} for d in C.DISTRIBUTIONS])
def test_accuracy(gemm_case, gemm_check):
    gemm_check()
