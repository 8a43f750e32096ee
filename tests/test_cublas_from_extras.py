"""The CUDA extras bring cuBLAS, the baseline every kernel is ranked against: a host with only
the NVIDIA driver (no system CUDA toolkit) must find it in the environment the README makes.
No GPU needed: CuPy's cuBLAS binding loads ``libcublas`` without a device."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _extras() -> dict[str, list[str]]:
    try:
        import tomllib
    except ImportError:  # Python 3.10
        tomli = pytest.importorskip("tomli")
        tomllib = tomli
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]


@pytest.mark.parametrize("extra", ["cuda12", "cuda13"])
def test_each_cuda_extra_brings_cublas_of_its_cuda_major(extra):
    major = extra[len("cuda"):]
    toolkit = [d for d in _extras()[extra] if d.startswith("cuda-toolkit[")]
    assert toolkit, f"the {extra} extra installs no cuda-toolkit components"
    components = re.match(r"cuda-toolkit\[([^\]]*)\]==(\d+)\.\*", toolkit[0])
    assert components and "cublas" in components.group(1).split(","), toolkit
    assert components.group(2) == major, toolkit


def test_cupy_loads_cublas_in_this_environment():
    try:
        import cupy  # noqa: F401
    except ImportError:
        if os.environ.get("CI"):
            pytest.fail("CI installs the cuda12 extra, yet CuPy does not import")
        pytest.skip("CuPy is not installed (the cuda12 or cuda13 extra installs it)")
    done = subprocess.run([sys.executable, str(ROOT / "tools" / "which_cublas.py")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(r"/libcublas\.so\.\d+", done.stdout), done.stdout


def test_the_tool_fails_with_the_fix_when_cublas_cannot_load(tmp_path):
    fake = tmp_path / "cupy_backends"  # shadows CuPy's: its import fails as a missing libcublas does
    fake.mkdir()
    (fake / "__init__.py").write_text("raise ImportError('libcublas.so.12: cannot open shared object file')\n")
    env = dict(os.environ, PYTHONPATH=str(tmp_path))
    done = subprocess.run([sys.executable, str(ROOT / "tools" / "which_cublas.py")], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "libcublas.so.12: cannot open" in done.stdout and "cuda12" in done.stdout, done.stdout
