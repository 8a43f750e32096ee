"""Loading a cubin leaves no file behind (kernels/cubin.py), with no GPU: a stand-in ``cupy``
records what CuPy would have read. On the GPU the kit's "no stray files" guarantee checks the
grader's TMPDIR after a whole class (.gpu/kit.sh)."""
from __future__ import annotations

import sys
import types
from pathlib import Path

import pytest

from pytest_gemm.kernels.cubin import load_cubin_function


class _StandInRawModule:
    """Reads the cubin when its function is got, as CuPy's RawModule(path=...) does."""

    loads: list[tuple[str, bytes]] = []

    def __init__(self, *, path: str):
        self.path = path

    def get_function(self, name: str) -> tuple[str, str]:
        _StandInRawModule.loads.append((self.path, Path(self.path).read_bytes()))
        return ("function", name)


@pytest.fixture
def stand_in_cupy(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    module = types.ModuleType("cupy")
    module.RawModule = _StandInRawModule  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "cupy", module)
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr("tempfile.tempdir", None)  # read TMPDIR again
    _StandInRawModule.loads = []
    return tmp_path


def test_the_function_is_got_from_the_code_and_no_file_is_left(stand_in_cupy: Path):
    got = load_cubin_function(b"\x7fELF cubin", "gemm_entry")
    assert got == ("function", "gemm_entry")
    ((path, read),) = _StandInRawModule.loads
    assert read == b"\x7fELF cubin"
    assert Path(path).is_relative_to(stand_in_cupy)
    assert not Path(path).exists() and list(stand_in_cupy.iterdir()) == []


def test_every_load_has_a_path_of_its_own(stand_in_cupy: Path):
    """CuPy caches a module by its path: a reused path would hand back the old module (and
    LoadedKernel.fresh would get no fresh __device__ variables)."""
    for _ in range(3):
        load_cubin_function(b"same code", "gemm_entry")
    paths = [p for p, _ in _StandInRawModule.loads]
    assert len(set(paths)) == 3
    assert list(stand_in_cupy.iterdir()) == []


def test_a_load_that_fails_leaves_no_file(stand_in_cupy: Path, monkeypatch: pytest.MonkeyPatch):
    def refuse(self: _StandInRawModule, name: str) -> None:
        raise RuntimeError("CUDA_ERROR_INVALID_IMAGE")

    monkeypatch.setattr(_StandInRawModule, "get_function", refuse)
    with pytest.raises(RuntimeError, match="INVALID_IMAGE"):
        load_cubin_function(b"not a cubin", "gemm_entry")
    assert list(stand_in_cupy.iterdir()) == []
