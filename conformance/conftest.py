"""Helpers shared by the conformance modules."""
from __future__ import annotations

import json

import pytest


@pytest.fixture
def gemm_record(request: pytest.FixtureRequest):
    """Attach extra JSON facts (resources) to this check's result record."""

    def record(facts: dict) -> None:
        request.node.user_properties.append(("gemm_extra", json.dumps(facts)))

    return record
