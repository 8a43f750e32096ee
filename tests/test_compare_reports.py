"""tools/compare_reports.py: two saved --gemm-report files through --gemm-compare's code (no GPU)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from test_compare import _pair, _report, _times

ROOT = Path(__file__).resolve().parent.parent
TOOL = ROOT / "tools" / "compare_reports.py"


def _tool(tmp_path: Path, old: dict, new: dict, *args: str) -> subprocess.CompletedProcess:
    (tmp_path / "old.json").write_text(json.dumps(old))
    (tmp_path / "new.json").write_text(json.dumps(new))
    return subprocess.run([sys.executable, str(TOOL), str(tmp_path / "old.json"), str(tmp_path / "new.json"), *args],
                          capture_output=True, text=True, timeout=120)


def test_a_shift_inside_the_noise_passes_and_the_json_says_same(tmp_path):
    run = _tool(tmp_path, *_pair(0.004), "--out", str(tmp_path / "cmp.json"))
    assert run.returncode == 0, run.stdout + run.stderr
    assert "2 timings compared (time; noise band +-1.0%" in run.stdout and "--fail" not in run.stderr
    result = json.loads((tmp_path / "cmp.json").read_text())
    assert {r["call"] for r in result["rows"]} == {"same"} and result["failure"] is None


def test_a_3_percent_slowdown_fails_at_the_default_2_percent_and_passes_at_5(tmp_path):
    old, new = _pair(0.03)
    run = _tool(tmp_path, old, new)
    assert run.returncode == 1 and "slower FAIL" in run.stdout
    assert _tool(tmp_path, old, new, "--fail", "5%").returncode == 0
    assert _tool(tmp_path, old, new, "--tolerance", "0.05").returncode == 0


def test_noise_widens_the_band_and_a_bad_value_is_refused(tmp_path):
    old, new = _pair(0.016)
    assert "1 slower, 0 faster, 1 same" in _tool(tmp_path, old, new).stdout  # the default band, 1 %
    run = _tool(tmp_path, old, new, "--noise", "2%")
    assert run.returncode == 0 and "noise band +-2.0%" in run.stdout and "0 slower, 0 faster, 2 same" in run.stdout, \
        run.stdout
    run = _tool(tmp_path, old, new, "--noise", "2")
    assert run.returncode == 2 and "--noise '2': expected a percentage above 0" in run.stderr, run.stderr


def test_a_kernel_that_became_wrong_fails_and_is_listed_first(tmp_path):
    old, _ = _pair(0.0)
    new = _report({"k": _times(1.0, 2), "steady": _times(2.0, 51)}, _times(0.9, 101), wrong=("k",))
    run = _tool(tmp_path, old, new)
    assert run.returncode == 1
    assert run.stdout.splitlines()[1] == "correctness changed:"
    assert "BECAME WRONG: k: passed -> failed" in run.stdout.splitlines()[2]


def test_nothing_to_compare_is_not_a_pass(tmp_path):
    assert _tool(tmp_path, {"kernels": []}, {"kernels": []}).returncode == 1


def test_a_bad_threshold_or_file_is_refused_with_the_value(tmp_path):
    run = _tool(tmp_path, *_pair(0.0), "--fail", "2")
    assert run.returncode == 2 and "--fail '2': expected a percentage above 0" in run.stderr
    run = _tool(tmp_path, *_pair(0.0), "--tolerance", "-0.5")  # it printed "--gemm-compare-fail=-50%: passed"
    assert run.returncode == 2 and "--tolerance -0.5: expected a fraction above 0" in run.stderr
    (tmp_path / "bad.json").write_text("{")
    run = subprocess.run([sys.executable, str(TOOL), str(tmp_path / "bad.json"), str(tmp_path / "bad.json")],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 2 and "bad.json" in run.stderr and "not JSON" in run.stderr
