"""The JSON report's one definition: ``report.schema.json`` beside this file (JSON Schema,
shipped as package data), and reading a report through it.

``report.py`` writes the report; ``validate`` checks a report against the schema (kernel,
check, timing and sweep entries allow no key the schema does not name, so a key renamed or
added in the writer fails validation); ``load_report`` reads and validates one. The project's
CPU tests validate the reports of fake-GPU runs, and its GPU tests read every report through
``load_report``, so a renamed key fails on a machine without a GPU first. ``schema_keys``
lists every key the schema names (a CPU test checks the GPU tests read no other).

Validation uses the ``jsonschema`` package (in the ``test`` extra); writing a report does not.
"""
from __future__ import annotations

import importlib.resources
import json
from functools import lru_cache
from pathlib import Path
from typing import Any

SCHEMA_FILE = "report.schema.json"


class ReportSchemaError(ValueError):
    """A report that does not match ``report.schema.json``; the message lists each mismatch."""


@lru_cache(maxsize=1)
def schema() -> dict[str, Any]:
    return json.loads(importlib.resources.files("pytest_gemm.outputs").joinpath(SCHEMA_FILE).read_text())


def schema_keys() -> set[str]:
    """Every property name the schema defines, at any depth."""
    keys: set[str] = set()

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            keys.update(node.get("properties", {}))
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(schema())
    return keys


def validate(report: dict[str, Any]) -> None:
    """Raise ``ReportSchemaError`` naming every place where ``report`` departs from the schema."""
    try:
        from jsonschema import Draft202012Validator  # lazy: optional (jsonschema)
    except ImportError:
        raise ImportError("validating a pytest-gemm report needs the jsonschema package; "
                          "try: pip install 'pytest-gemm[test]'") from None
    errors = sorted(Draft202012Validator(schema()).iter_errors(report), key=lambda e: list(e.absolute_path))
    if errors:
        lines = [f"  at {'/'.join(map(str, e.absolute_path)) or '(top)'}: {e.message}" for e in errors[:20]]
        more = [f"  ... and {len(errors) - 20} more"] if len(errors) > 20 else []
        raise ReportSchemaError(f"the report does not match {SCHEMA_FILE} ({len(errors)} problems):\n"
                                + "\n".join(lines + more))


def load_report(path: str | Path) -> dict[str, Any]:
    """The report at ``path``, validated."""
    report = json.loads(Path(path).read_text())
    validate(report)
    return report


def kernels_by_name(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {k["name"]: k for k in report["kernels"]}
