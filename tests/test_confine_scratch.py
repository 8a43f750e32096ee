"""Landlock's children mount their scratch tmpfs on one empty folder of their parent's, each in
its own mount namespace: one folder per parent process, not one left in /tmp per child."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from pytest_gemm.kernels import confine


def _plan(argv: list[str]) -> dict:
    return json.loads(argv[argv.index("pytest_gemm.kernels.confine_boot") + 1])


def test_every_landlock_child_of_a_process_shares_one_scratch_mount_point(tmp_path):
    first = _plan(confine.command(["true"], readable=[tmp_path], chdir=tmp_path, level="landlock"))
    again = _plan(confine.command(["true"], readable=[tmp_path], chdir=tmp_path, level="landlock"))
    assert first["scratch"] == again["scratch"] and os.path.isdir(first["scratch"])
    assert os.listdir(first["scratch"]) == []  # a mount point: what a child writes is in its own tmpfs


def test_the_mount_point_goes_when_its_process_ends(tmp_path):
    code = ("import sys; from pathlib import Path; from pytest_gemm.kernels import confine; "
            "argv = confine.command(['true'], readable=[Path(sys.argv[1])], chdir=Path(sys.argv[1]), level='landlock'); "
            "import json; print(json.loads(argv[argv.index('pytest_gemm.kernels.confine_boot') + 1])['scratch'])")
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    point = Path(done.stdout.strip())
    assert point.name.startswith("pytest-gemm-scratch-") and not point.exists()
