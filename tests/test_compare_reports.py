"""tools/compare_reports.py: timings of two --gemm-report files side by side (no GPU)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from suite_helpers import load_declarations

ROOT = Path(__file__).resolve().parent.parent
TOOL = ROOT / "tools" / "compare_reports.py"


cr = load_declarations(TOOL, "compare_reports")
BIG = [4096, 4096, 4096]


def _report(ms_by_kernel, verdict="passed", shared=()):
    return {"schema_version": 1, "kernels": [
        {"name": name, "verdict": verdict, "timings": [
            {"shape": BIG, "median_ms": ms, "fraction_of_cublas": 1.0 / ms, "gpu_shared": name in shared}]}
        for name, ms in ms_by_kernel.items()]}


def test_timings_within_tolerance_pass():
    result = cr.compare(_report({"a": 1.0, "b": 2.0}), _report({"a": 1.01, "b": 1.98}), 0.02)
    assert result["ok"]
    assert [r["kernel"] for r in result["rows"]] == ["a", "b"]
    assert abs(result["worst"]["difference"] - 0.01) < 1e-12


def test_a_timing_that_moved_is_outside():
    result = cr.compare(_report({"a": 1.0, "b": 2.0}), _report({"a": 1.0, "b": 2.1}), 0.02)
    assert not result["ok"]
    assert [r["kernel"] for r in result["outside"]] == ["b"]
    assert "OUTSIDE" in cr.render(result)


def test_shared_gpu_rows_are_listed_but_not_held_to_the_tolerance():
    result = cr.compare(_report({"a": 1.0}), _report({"a": 1.5}, shared={"a"}), 0.02)
    assert result["ok"] and result["rows"][0]["gpu_shared"]


def test_a_changed_verdict_fails_and_unmatched_timings_are_named():
    serial = _report({"a": 1.0, "c": 3.0})
    parallel = _report({"a": 1.0})
    parallel["kernels"][0]["verdict"] = "failed"
    result = cr.compare(serial, parallel, 0.02)
    assert not result["ok"]
    assert result["verdicts_changed"] == ["a"]
    assert result["only_in_serial"] == ["c@4096x4096x4096"]


def test_nothing_to_compare_is_not_a_pass():
    assert not cr.compare(_report({}), _report({}), 0.02)["ok"]


def test_command_line_exit_status_and_json(tmp_path):
    s, p, out = tmp_path / "s.json", tmp_path / "p.json", tmp_path / "cmp.json"
    s.write_text(json.dumps(_report({"a": 1.0})))
    p.write_text(json.dumps(_report({"a": 1.005})))
    run = subprocess.run([sys.executable, str(TOOL), str(s), str(p), "--out", str(out)],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert "1 timings compared, 0 outside" in run.stdout
    assert json.loads(out.read_text())["ok"] is True
    p.write_text(json.dumps(_report({"a": 1.2})))
    assert subprocess.run([sys.executable, str(TOOL), str(s), str(p)], capture_output=True).returncode == 1
