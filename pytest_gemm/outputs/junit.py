"""JUnit XML (pytest's ``--junitxml``): each check's record travels as its test case's
``gemm_result`` property (the teardown report carries it: ``runner/results.py``); at the end of
the run each kernel's verdict and root cause are added as properties of the test suite
(``gemm:<kernel>:verdict`` and so on), and the run's meta block in short form (``gemm:run``)."""
from __future__ import annotations

from typing import Any

from .records import RunResults
from .launch_view import launch_properties
from .meta import short_form
from _pytest.junitxml import xml_key


def verdict_properties(records: Any) -> list[tuple[str, str]]:
    props = []
    for name, result in RunResults.build(records).kernels.items():
        v = result.verdict
        props.append((f"gemm:{name}:verdict", v.status))
        if v.status == "failed":
            props.append((f"gemm:{name}:primary_category", v.primary_category or "failed"))
            props.append((f"gemm:{name}:diagnosis", f"{v.primary_check}: {v.diagnosis}"))
            props += [(f"gemm:{name}:consequence", c) for c in v.consequences]

    return props + launch_properties(records)  # gemm:<kernel>:launches, what it launched


def add_verdict_properties(config: Any, records: Any) -> None:
    """Add the verdicts to the JUnit XML being written, if ``--junitxml`` is on."""
    xml = config.stash.get(xml_key, None)
    if xml is None:
        return
    for name, value in verdict_properties(records):
        xml.add_global_property(name, value)


def add_run_property(config: Any, meta: dict[str, Any] | None) -> None:
    """The run's meta block in short form (``outputs/meta.py``) as the ``gemm:run`` property."""

    xml = config.stash.get(xml_key, None)
    if xml is not None:
        xml.add_global_property("gemm:run", short_form(meta))
