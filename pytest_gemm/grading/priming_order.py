"""One of each kernel's two priming runs' order (``grading/harness_seed.py``, loaded there with
``-p``): every check, last first. A class's first students run their checks in the usual order
and compile the CuPy kernels of their first checks themselves, since the seed is empty as they
start; a priming run in that order only keeps pace with them. Run backwards, it compiles the
kernels of the students' later checks first, and each student's cache takes what the seed holds
before each of its checks (``checks/sandbox_confine.py`` ``reseed_confined``). The other run, in
order, is for the students who start after the first round's first ones end."""
from __future__ import annotations

import pytest


@pytest.hookimpl(trylast=True)  # after pytest-gemm's own ordering
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.reverse()
