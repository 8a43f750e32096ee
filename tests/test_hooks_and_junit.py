"""pytest-gemm's declared hooks and the verdicts in JUnit XML, through pytester (no GPU needed:
the records come from a user test of the registry's compile check on a tiny CUDA kernel is
not needed either; the hooks fire with whatever records the run produced)."""
from __future__ import annotations

import pytest

from pytest_gemm.outputs.junit import verdict_properties


def test_verdicts_become_junit_properties():
    records = [{"kernel": "k", "check": "exact", "shape": [8, 8, 8], "outcome": "failed", "category": "wrong_values",
                "message": "[wrong_values] the K loop skips the first term"},
               {"kernel": "k", "check": "speed", "shape": [8, 8, 8], "outcome": "failed", "category": "stale_output"}]
    props = dict(verdict_properties(records))
    assert props["gemm:k:verdict"] == "failed" and props["gemm:k:primary_category"] == "wrong_values"
    assert props["gemm:k:diagnosis"] == "exact 8x8x8: the K loop skips the first term"
    assert props["gemm:k:consequence"].startswith("speed")


CONFTEST = """
import json
seen = []

def pytest_gemm_kernel_result(config, result):
    seen.append(("kernel", result.name, result.verdict.status))

def pytest_gemm_report(config, report):
    seen.append(("report", report["schema_version"], [k["name"] for k in report["kernels"]]))
    open("hooks.json", "w").write(json.dumps(seen))
"""

KERNEL = """
from pytest_gemm import CudaKernel
tiny = CudaKernel(source='extern "C" __global__ void mm(const float* A, const float* B, float* C, int M, int N, int K) {}',
                  entry="mm", block=(16, 16), tile=(16, 16), name="tiny")
"""


def test_user_hooks_receive_each_kernel_result_and_the_report(pytester: pytest.Pytester):
    import json

    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(mine=KERNEL)
    result = pytester.runpytest_subprocess("--gemm-kernel", "mine.py:tiny", "-k", "launch or exact-tiny-1x1x1",
                                           "-p", "no:cacheprovider", "--junitxml", "out.xml")
    assert result.ret in (0, 1), result.stdout.str()
    seen = json.loads((pytester.path / "hooks.json").read_text())
    assert seen[0][:2] == ["kernel", "tiny"] and seen[-1][0] == "report" and seen[-1][2] == ["tiny"]
    xml = (pytester.path / "out.xml").read_text()
    assert 'name="gemm:tiny:verdict"' in xml


def test_each_junit_test_case_carries_its_check_record(pytester: pytest.Pytester):
    """docs/report-schema.md: each test case keeps its ``gemm_result`` record (pytest's junitxml
    writes the teardown report's properties; the record is put there too), once per test case."""
    import json
    import xml.etree.ElementTree as ET

    pytester.makepyfile(mine=KERNEL)
    result = pytester.runpytest_subprocess("--gemm-kernel", "mine.py:tiny", "-k", "launch or exact-tiny-1x1x1",
                                           "-p", "no:cacheprovider", "--junitxml", "out.xml")
    assert result.ret in (0, 1), result.stdout.str()
    cases = ET.parse(pytester.path / "out.xml").getroot().iter("testcase")
    records = {}
    for case in cases:
        props = [p for p in case.iter("property") if p.get("name") == "gemm_result"]
        assert len(props) == 1, (case.get("name"), [p.get("name") for p in case.iter("property")])
        records[case.get("name")] = json.loads(props[0].get("value"))
    assert {r["check"] for r in records.values()} == {"launch", "exact"}, records
    assert all(r["kernel"] == "tiny" and "summary" in r and "details" in r for r in records.values())
