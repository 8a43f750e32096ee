"""Work off the caller's stream is ``wrong_stream`` (docs/verdicts.md rule 2a), not ``timing_escape``:
the whole plugin on a fake GPU (tests/fakegpu.py, kernel ``off_stream``: its launch check fails as
checks/launch.py fails a launcher whose work runs on another stream), and every output names it the
same way: the terminal (not ranked), the JSON report (validated against the shipped schema),
Gradescope (off the leaderboard, no trustworthy timing) and JUnit. The stream probe itself needs a
GPU: tests/test_verdicts_gpu.py (``own_stream``, ``torch_default_stream``)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import fakegpu
import pytest

from pytest_gemm.outputs.report_schema import kernels_by_name, load_report


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    folder = tmp_path_factory.mktemp("wrong-stream")
    folder.chmod(0o755)  # graded (--gemm-gradescope) confined: run by root, read by a user of its own
    (folder / "fake_kernels.py").write_text(fakegpu.FAKE_KERNELS)
    args = [sys.executable, "-m", "pytest", "-p", "fakegpu", "-p", "no:cacheprovider", "-q", "-k", "64x64x64 or speed",
            "--gemm-report", "r.json", "--gemm-gradescope", "g.json", "--junitxml", "j.xml",
            "--gemm-kernel", "fake_kernels.py:off_stream", "--gemm-kernel", "fake_kernels.py:ok"]
    done = subprocess.run(args, cwd=folder, env={**os.environ, **fakegpu.env(folder)}, capture_output=True,
                          text=True, timeout=300)
    assert (folder / "r.json").is_file(), done.stdout[-3000:] + done.stderr[-3000:]
    return {"folder": folder, "output": done.stdout, "returncode": done.returncode}


def test_the_json_report_names_it_wrong_stream(run: dict[str, Any]):
    kernels = kernels_by_name(load_report(run["folder"] / "r.json"))  # validated against the schema
    entry = kernels["off_stream"]
    assert (entry["verdict"], entry["primary_category"], entry["primary_check"]) == \
        ("failed", "wrong_stream", "launch 64x64x64"), entry
    (launch,) = [c for c in entry["checks"] if c["check"] == "launch"]
    assert launch["category"] == "wrong_stream" and "cupy.cuda.get_current_stream()" in launch["message"]
    assert "timing_escape" not in json.dumps(entry)
    assert kernels["ok"]["primary_category"] is None


def test_the_terminal_does_not_rank_it(run: dict[str, Any]):
    out = run["output"]
    assert run["returncode"] == pytest.ExitCode.TESTS_FAILED, out[-3000:]
    table = out.split("not ranked", 1)
    assert len(table) == 2 and "off_stream" not in table[0].split("pytest-gemm", 1)[-1], out[-3000:]
    assert "off_stream  fp32         wrong_stream" in table[1], out[-3000:]
    assert "off_stream: wrong_stream (launch 64x64x64): 'off_stream' at 64x64x64: the launcher wrote C on another " \
           "stream" in out


def test_gradescope_keeps_it_off_the_leaderboard(run: dict[str, Any]):
    results = json.loads((run["folder"] / "g.json").read_text())
    assert "leaderboard" not in results
    assert "not on the leaderboard (no trustworthy timing): wrong_stream (launch 64x64x64)" in results["output"]
    assert results["extra_data"]["pytest_gemm"]["failure_categories"] == ["wrong_stream"]


def test_junit_names_it(run: dict[str, Any]):
    props = {p.get("name"): p.get("value") for p in ET.parse(run["folder"] / "j.xml").getroot().iter("property")}
    assert props["gemm:off_stream:primary_category"] == "wrong_stream"
    assert props["gemm:off_stream:diagnosis"].startswith("launch 64x64x64: 'off_stream' at 64x64x64")
