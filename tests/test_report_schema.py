"""The JSON report's one definition (pytest_gemm/outputs/report.schema.json), kept honest with no
GPU: reports of fake-GPU runs validate against it, a renamed or added key does not, and the GPU
tests' assertions (which read reports through it) are run here on fake-GPU reports, so that a
key they read and the report no longer has fails in CI, not on a GPU machine months later."""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

import fakegpu
from pytest_gemm.model import categories as cat
from pytest_gemm.outputs.report_schema import ReportSchemaError, kernels_by_name, schema, schema_keys, validate

HERE = Path(__file__).resolve().parent
# The modules whose GPU tests read --gemm-report JSON (through tests/gpu_runs.py).
GPU_REPORT_READERS = ("test_broken_kernels.py", "test_untrusted_kernels.py", "test_verdicts_gpu.py", "test_ecosystems_gpu.py",
                      "gpu_runs.py")


@pytest.fixture(scope="module")
def fake_report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A report of a fake-GPU run (tests/fakegpu.py): a correct kernel, a wrong one, one the
    harness cannot run, with a speed check (timings) and a sweep (sweep entries)."""
    import os
    import subprocess
    import sys

    folder = tmp_path_factory.mktemp("fake-report")
    (folder / "fake_kernels.py").write_text(fakegpu.FAKE_KERNELS)
    env = {**os.environ, **fakegpu.env(folder)}
    args = [sys.executable, "-m", "pytest", "-p", "fakegpu", "-p", "no:cacheprovider", "-q", "--gemm-report", "r.json",
            "-k", "1x1x1 or 64x64x64 or speed"]
    for name in ("ok", "wrong", "harness_oom"):
        args += ["--gemm-kernel", f"fake_kernels.py:{name}"]
    run = subprocess.run(args, cwd=folder, env=env, capture_output=True, text=True, timeout=300)
    assert (folder / "r.json").is_file(), run.stdout[-3000:] + run.stderr[-3000:]
    return json.loads((folder / "r.json").read_text())


def test_the_schema_is_package_data_and_names_every_category():
    assert schema()["$defs"]["category"]["enum"] == list(cat.ALL)
    assert schema()["properties"]["schema_version"]["const"] == 3


def test_a_fake_gpu_runs_report_matches_the_schema(fake_report):
    validate(fake_report)
    kernels = kernels_by_name(fake_report)
    assert [kernels[k]["verdict"] for k in ("ok", "wrong", "harness_oom")] == ["passed", "failed", "incomplete"]
    assert kernels["ok"]["timings"], "the fake speed check's timing is in the report (the schema sees one)"


@pytest.mark.parametrize("where, change", [
    ("kernel", lambda k: k.update(failure_categories=["wrong_values"])),  # schema 1's key
    ("kernel", lambda k: k.pop("primary_category")),
    ("check", lambda k: k["checks"][0].update(mesage="typo")),
    ("check", lambda k: k["checks"][0].update(category="wrong_value")),
    ("timing", lambda k: k["timings"][0].pop("median_ms")),
])
def test_a_renamed_added_or_missing_key_fails_validation(fake_report, where, change):
    report = json.loads(json.dumps(fake_report))
    change(next(k for k in report["kernels"] if k["name"] == ("ok" if where == "timing" else "wrong")))
    with pytest.raises(ReportSchemaError, match="does not match report.schema.json"):
        validate(report)


def test_the_gpu_tests_read_only_keys_the_schema_defines():
    """Every string key the GPU tests subscript or .get() is a report key of the schema, a
    kernel name of ours or an environment variable: schema 1's failure_categories, read by
    two GPU tests for months after the report dropped it, would fail here."""
    import test_broken_kernels as broken
    import test_untrusted_kernels as untrusted
    import test_verdicts_gpu as verdicts

    names = set(broken.BROKEN) | set(broken.CORRECT) | set(untrusted.UNTRUSTED) | set(untrusted.CORRECT) \
        | set(verdicts.VERDICTS.EXPECTED) | set(verdicts.VERDICTS.THIRD_PARTY) \
        | {name for module in (broken.KERNELS, untrusted.KERNELS) for name in vars(module) if not name.startswith("_")}
    allowed = schema_keys() | names
    for module in GPU_REPORT_READERS:
        text = (HERE / module).read_text()
        used = set(re.findall(r'\[\s*"([A-Za-z_]\w*)"\s*\]', text)) | set(re.findall(r'\.get\(\s*"([A-Za-z_]\w*)"', text))
        unknown = {k for k in used - allowed if not k.isupper() and not k.startswith("PYTEST_GEMM_")}
        assert not unknown, f"{module} reads report keys the schema does not define: {sorted(unknown)}"


def test_the_gpu_tests_assertions_run_on_a_fake_report_and_can_fail(fake_report, monkeypatch):
    """The GPU tests' own assertions, on a fake-GPU report: they pass where they should, and an
    entry doctored the way each guards against makes them fail."""
    import test_broken_kernels as broken
    import test_untrusted_kernels as untrusted
    import test_verdicts_gpu as verdicts

    kernels = kernels_by_name(fake_report)
    ok, wrong = kernels["ok"], kernels["wrong"]
    plan = broken.Plan(fail=("1x1x1", "64x64x64"), words=(("rows",),))
    broken.assert_caught("wrong", "exact", cat.WRONG_VALUES, plan, wrong, "", primary=cat.WRONG_VALUES)
    broken.assert_correct("ok", ok, "", checks=("launch", "exact", "coverage", "guards"))
    untrusted.assert_caught("wrong", "exact", cat.WRONG_VALUES, untrusted.Plan(fail=("1x1x1",)), wrong, "")
    monkeypatch.setitem(verdicts.EXPECTED, "wrong", ("failed", cat.WRONG_VALUES))
    monkeypatch.setitem(verdicts.EXPECTED, "ok", ("passed", None))
    verdicts.test_each_kernel_gets_its_one_root_cause(fake_report, "wrong")
    verdicts.test_each_kernel_gets_its_one_root_cause(fake_report, "ok")

    doctored = json.loads(json.dumps(wrong))
    doctored["primary_category"] = cat.FAULT
    with pytest.raises(AssertionError):
        broken.assert_caught("wrong", "exact", cat.WRONG_VALUES, plan, doctored, "", primary=cat.WRONG_VALUES)
    with pytest.raises(AssertionError):
        untrusted.assert_caught("wrong", "exact", cat.WRONG_VALUES, untrusted.Plan(fail=("1x1x1",)), doctored, "")
    with pytest.raises(AssertionError):
        verdicts.test_each_kernel_gets_its_one_root_cause({"kernels": [doctored]}, "wrong")
    with pytest.raises(AssertionError):  # a correct kernel's failed check is seen
        broken.assert_correct("wrong", wrong, "", checks=("launch",))
