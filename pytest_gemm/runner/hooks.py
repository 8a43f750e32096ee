"""pytest-gemm's own hooks, declared through ``pytest_addhooks``: implement them in a
conftest.py or a plugin to add outputs without patching pytest-gemm.

Both are called on the controller (never on an xdist worker), once each kernel's
records are complete, before the built-in outputs are written.
"""
from __future__ import annotations

from typing import Any

import pytest


@pytest.hookspec
def pytest_gemm_kernel_result(config: pytest.Config, result: Any) -> None:
    """Called once per kernel with its ``pytest_gemm.outputs.records.KernelResult``: its
    checks, verdict, primary category, resources and timings."""


@pytest.hookspec
def pytest_gemm_report(config: pytest.Config, report: dict[str, Any]) -> None:
    """Called once per run with the JSON report as a dict (the same content ``--gemm-report``
    writes, schema in ``docs/report-schema.md``); it is built whether or not that option is given."""
