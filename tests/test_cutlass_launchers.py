"""bench/cutlass_sm80: CUTLASS's Ampere GEMMs as launchers (issue 18's ceiling for mma.sync).
No GPU and no CUTLASS here: the spec loads, every build is declared the way the CUDA code
needs, and a missing library says how to build it."""
from __future__ import annotations

from pathlib import Path

import pytest

from pytest_gemm.kernels.loader import load_spec

REPO = Path(__file__).resolve().parents[1]
SPEC = "bench/cutlass_sm80/launchers.py:ALL"


def test_every_build_script_config_is_a_launcher():
    kernels = load_spec(SPEC, REPO)
    script = (REPO / "bench/cutlass_sm80/build.sh").read_text()
    built = [line.split()[0].strip('"') for line in script.splitlines() if line.strip().startswith('"') and "x" in line]
    assert [k.name for k in kernels] == [f"cutlass-sm80-{c}" for c in built]
    for k in kernels:
        # 16-byte accesses of halves: K and N multiples of 8; mma.sync and cp.async: sm_80
        assert (k.precision, tuple(k.min_cc), tuple(k.multiple_of)) == ("fp16", (8, 0), (1, 8, 8))


def test_a_missing_library_says_how_to_build_it(tmp_path, monkeypatch):
    pytest.importorskip("cupy")
    monkeypatch.setenv("PYTEST_GEMM_CUTLASS_LIB", str(tmp_path / "absent.so"))
    import importlib.util

    spec = importlib.util.spec_from_file_location("cutlass_launchers_fresh", REPO / "bench/cutlass_sm80/launchers.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with pytest.raises(FileNotFoundError, match="build.sh"):
        next(iter(module.ALL.values()))(None, None, None)
