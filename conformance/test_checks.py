"""Every GPU check of the registry (``pytest_gemm/checks/registry.py``), on every shape it
declares, against every kernel under test: ids are ``<check>-<kernel>-<shape>``.

``gemm_check()`` runs the case's check on its kernel in the kernel's own process.
"""
from __future__ import annotations

import pytest


@pytest.mark.gemm_cases()
def test_check(gemm_case, gemm_check):
    gemm_check()
