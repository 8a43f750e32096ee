"""tools/ladder_table.py: the ladder as a markdown table from a --gemm-report JSON (no GPU)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from suite_helpers import load_declarations

ROOT = Path(__file__).resolve().parent.parent
TOOL = ROOT / "tools" / "ladder_table.py"


lt = load_declarations(TOOL, "ladder_table")
BIG = [4096, 4096, 4096]


def _timing(shape, tflops, fraction=None, median_ms=1.0):
    return {"shape": shape, "median_ms": median_ms, "tflops": tflops, "fraction_of_cublas": fraction}


def _report():
    return {"schema_version": 1, "kernels": [
        {"name": "cublas-fp32", "precision": "fp32", "verdict": "passed", "timings": [_timing(BIG, 50.0, 1.0)]},
        {"name": "my-kernel", "precision": "fp32", "verdict": "passed", "timings": [_timing(BIG, 10.0, 0.2)]},
        {"name": "warptile", "precision": "fp32", "verdict": "passed",
         "timings": [_timing([1024, 1024, 1024], 20.0, 0.7), _timing(BIG, 31.0, 0.62)]},
        {"name": "wmma-fp16", "precision": "fp16", "verdict": "passed", "timings": [_timing(BIG, 30.0, 0.05)]},
        {"name": "naive-rows", "precision": "fp32", "verdict": "failed", "timings": []},
        {"name": "cublas-fp16", "precision": "fp16", "verdict": "passed", "timings": [_timing(BIG, 600.0, 1.0)]},
        # no fraction recorded: computed from the same-precision baseline in the report
        {"name": "tiled16", "precision": "fp32", "verdict": "passed", "timings": [_timing(BIG, 8.0)]},
        # bf16 with no baseline in the report and no recorded fraction: blank
        {"name": "wmma-bf16", "precision": "bf16", "verdict": "passed", "timings": [_timing(BIG, 25.0)]},
    ]}


def test_rows_in_ladder_order_with_others_last() -> None:
    rows = lt.ladder_rows(_report())
    assert [r["rung"] for r in rows] == [
        "naive-rows", "tiled16", "warptile", "wmma-fp16", "wmma-bf16", "cublas-fp32", "cublas-fp16", "my-kernel"]


def test_rows_figures() -> None:
    rows = {r["rung"]: r for r in lt.ladder_rows(_report())}
    assert rows["warptile"] == {"rung": "warptile", "precision": "fp32", "verdict": "passed", "tflops": 31.0,
                                "fraction": 0.62, "baseline": "cublas-fp32"}
    assert rows["wmma-fp16"]["baseline"] == "cublas-fp16" and rows["wmma-fp16"]["fraction"] == 0.05
    assert rows["tiled16"]["fraction"] == pytest.approx(8.0 / 50.0)  # from cublas-fp32's own timing
    assert rows["wmma-bf16"]["baseline"] == "cublas-bf16" and rows["wmma-bf16"]["fraction"] is None
    assert rows["naive-rows"]["tflops"] is None and rows["naive-rows"]["verdict"] == "failed"


def test_fraction_falls_back_to_the_same_precision_only() -> None:
    report = {"kernels": [
        {"name": "cublas-fp32", "precision": "fp32", "verdict": "passed", "timings": [_timing(BIG, 50.0, 1.0)]},
        {"name": "wmma-fp16", "precision": "fp16", "verdict": "passed", "timings": [_timing(BIG, 30.0)]},
    ]}
    rows = {r["rung"]: r for r in lt.ladder_rows(report)}
    assert rows["wmma-fp16"]["fraction"] is None, "a tensor rung is never measured against cuBLAS FP32"


def test_other_shape() -> None:
    rows = {r["rung"]: r for r in lt.ladder_rows(_report(), shape=(1024, 1024, 1024))}
    assert rows["warptile"]["tflops"] == 20.0 and rows["warptile"]["fraction"] == 0.7
    assert rows["cublas-fp32"]["tflops"] is None


def test_baseline_name() -> None:
    assert lt.baseline_name("fp32") == "cublas-fp32"
    assert lt.baseline_name("bf16") == "cublas-bf16"
    assert lt.baseline_name(None) is None


def test_markdown_table() -> None:
    text = lt.markdown_table(lt.ladder_rows(_report()))
    lines = text.splitlines()
    assert lines[0] == "| rung | precision | verdict | TFLOP/s at 4096^3 | of cuBLAS | baseline |"
    assert lines[1] == "| --- | --- | --- | ---: | ---: | --- |"
    assert "| `warptile` | fp32 | passed | 31.00 | 0.620 | `cublas-fp32` |" in lines
    assert "| `naive-rows` | fp32 | failed |  |  | `cublas-fp32` |" in lines
    assert "| `tiled16` | fp32 | passed | 8.00 | 0.160 | `cublas-fp32` |" in lines
    assert len(lines) == 2 + 8
    assert all(line.count("|") == 7 for line in lines)
    assert lt.markdown_table([], (1000, 64, 300)).splitlines()[0].startswith("| rung | precision | verdict | "
                                                                            "TFLOP/s at 1000x64x300 |")


def test_empty_report() -> None:
    assert lt.ladder_rows({"kernels": []}) == []
    assert lt.ladder_rows({}) == []


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(TOOL), *args], capture_output=True, text=True, cwd=ROOT)


def test_cli(tmp_path: Path) -> None:
    path = tmp_path / "ladder.json"
    path.write_text(json.dumps(_report()))
    out = _run(str(path))
    assert out.returncode == 0, out.stderr
    assert out.stdout == lt.markdown_table(lt.ladder_rows(_report())) + "\n"
    out = _run(str(path), "--shape", "1024")
    assert out.returncode == 0 and "TFLOP/s at 1024^3" in out.stdout and "| 20.00 | 0.700 |" in out.stdout


def test_cli_errors(tmp_path: Path) -> None:
    assert _run("--help").returncode == 0
    missing = _run(str(tmp_path / "nope.json"))
    assert missing.returncode == 2 and "cannot read" in missing.stderr
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    out = _run(str(bad))
    assert out.returncode == 2 and "is not JSON" in out.stderr
    bad.write_text("[]")
    out = _run(str(bad))
    assert out.returncode == 2 and "no \"kernels\" list" in out.stderr
    out = _run(str(bad), "--shape", "4x4")
    assert out.returncode == 2 and "expected N or MxNxK" in out.stderr
