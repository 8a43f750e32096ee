"""The gradebook on a machine with no usable GPU refuses to grade (exit status 2, one line why)
unless --allow-no-gpu asks for the zeros; its progress and summary lines are cut at words."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_gemm.grading.gradebook import no_gpu_problem
from pytest_gemm.grading.gradebook_files import clip

COURSE = Path(__file__).resolve().parent.parent / "examples" / "course"


def _no_gpu_env() -> dict[str, str]:
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="")
    for key in ("PYTEST_ADDOPTS", "PYTEST_GEMM_DISPATCH"):
        env.pop(key, None)
    return env


def test_with_no_usable_gpu_the_gradebook_refuses_to_grade_in_one_line(tmp_path):
    if no_gpu_problem(_no_gpu_env()) is None:
        pytest.skip("CUDA_VISIBLE_DEVICES='' still finds a GPU here")
    out = tmp_path / "book.csv"
    done = subprocess.run([sys.executable, "-m", "pytest_gemm.grading.gradebook", str(COURSE / "submissions"),
                           "--out", str(out)], cwd=tmp_path, env=_no_gpu_env(), capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gradebook: not grading: no usable GPU: "), done.stderr
    assert "--allow-no-gpu" in lines[0] and done.stdout == ""
    assert not out.exists()  # no column of zeros that looks like grades


def test_the_probe_is_skipped_under_the_fake_dispatcher():
    assert no_gpu_problem(dict(_no_gpu_env(), PYTEST_GEMM_DISPATCH="fakegpu:run_check")) is None


@pytest.mark.parametrize("text, limit, want", [
    ("short", 160, "short"),
    ("GPU checks skipped: no usable GPU", 20, "GPU checks skipped…"),
    ("compile 13 of 13; GPU checks skipped (no usable GPU: no NVIDIA driver)", 40, "compile 13 of 13; GPU checks skipped…"),
    ("x" * 50, 20, "x" * 19 + "…"),
])
def test_clipped_text_ends_at_a_word(text, limit, want):
    assert clip(text, limit) == want and len(clip(text, limit)) <= limit
