"""examples/ecosystems/ with no GPU: every example is listed (tools/ecosystems.py) and says how it
keeps to the current stream; each loads as a kernel where its package is installed and is
skipped with the reason where it is not; the Triton and KernelBench examples load against
stand-ins for triton and torch (the autotuner is seen, the module is wrapped); the README's
table is drawn from a report. tests/test_ecosystems_gpu.py runs them on a GPU."""
from __future__ import annotations

import ast
import sys
import tomllib
import types
from pathlib import Path

import numpy as np
import pytest
from suite_helpers import load_registered

from pytest_gemm import PyKernel
from pytest_gemm.kernels import autotune
from pytest_gemm.kernels.loader import load_spec
from pytest_gemm.model.declaration import GemmSpecError
ROOT = Path(__file__).resolve().parent.parent


eco = load_registered(ROOT / "tools" / "ecosystems.py", "gemm_tools_ecosystems")


def test_every_example_file_is_listed_and_states_how_it_keeps_to_the_stream():
    files = {p.name for p in eco.FOLDER.glob("*.py")}
    assert files == {ex.file for ex in eco.EXAMPLES}
    for name in files:
        doc = ast.get_docstring(ast.parse((eco.FOLDER / name).read_text()))
        assert doc and "Stream:" in doc and "pytest --gemm-kernel examples/ecosystems/" in doc, name


def test_each_examples_extra_is_declared():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert {ex.extra for ex in eco.EXAMPLES} <= set(extras)
    assert any(dep.startswith("numpy") and "<2.5" in dep for dep in extras["numba"])  # np.row_stack


@pytest.mark.parametrize("example", eco.EXAMPLES, ids=lambda ex: ex.kernel)
def test_an_example_loads_where_its_packages_are_installed_and_says_why_not_elsewhere(example, monkeypatch):
    monkeypatch.chdir(ROOT)
    reason = eco.unavailable(example)
    if reason is not None:
        assert f"pytest-gemm[{example.extra}]" in reason
        try:  # one clear message naming the module (or nothing yet: an example that imports it lazily)
            load_spec(example.spec, ROOT)
        except GemmSpecError as exc:
            assert "No module named" in str(exc) and example.file in str(exc)
        pytest.skip(reason)
    [k] = load_spec(example.spec, ROOT)
    assert k.name == example.kernel


# ---- stand-ins for triton and torch: what the examples use at import ----------------------

class Autotuner:
    def __init__(self, fn, configs, key):
        self.fn, self.configs, self.key, self.best_config = fn, configs, key, None


Autotuner.__module__ = "triton.runtime.autotuner"


def _fake_triton() -> dict[str, types.ModuleType]:
    triton = types.ModuleType("triton")
    language = types.ModuleType("triton.language")
    triton.Config = lambda meta, num_stages, num_warps: dict(meta, num_stages=num_stages, num_warps=num_warps)
    triton.jit = lambda fn: fn
    triton.autotune = lambda configs, key: (lambda fn: Autotuner(fn, configs, key))
    triton.cdiv = lambda a, b: -(-a // b)
    language.constexpr = int
    triton.language = language
    return {"triton": triton, "triton.language": language}


def test_the_triton_tutorial_example_is_seen_to_autotune_over_its_sixteen_configs(monkeypatch):
    for name, module in _fake_triton().items():
        monkeypatch.setitem(sys.modules, name, module)
    fp16, fp32 = (load_spec(f"examples/ecosystems/triton_matmul.py:{attr}", ROOT)[0]
                  for attr in ("matmul_fp16", "matmul_fp32"))
    assert (fp16.precision, fp32.precision) == ("fp16", "fp32")
    [tuner] = autotune.autotuners(fp16.fn)
    assert tuner.key == ["M", "N", "K"] and len(tuner.configs) == 16
    assert {c["GROUP_SIZE_M"] for c in tuner.configs} == {8}
    assert autotune.autotunes(fp32) and autotune.tuning_allowance(fp16) == 16 * autotune.SECONDS_PER_CONFIG


def test_the_kernelbench_example_is_wrapped_and_its_result_copied_into_c(monkeypatch):
    torch = types.ModuleType("torch")

    class Module:  # torch.nn.Module's calling convention, with numpy standing in for tensors
        def __call__(self, *args):
            return self.forward(*args)

    torch.nn = types.SimpleNamespace(Module=Module)
    torch.Tensor = np.ndarray
    torch.matmul = np.matmul
    torch.rand = lambda *shape: np.random.default_rng(0).random(shape)
    monkeypatch.setitem(sys.modules, "torch", torch)
    [k] = load_spec("examples/ecosystems/kernelbench_module.py:ModelNew", ROOT)
    assert isinstance(k, PyKernel) and k.name == "ModelNew" and k.precision == "fp32"
    a, b = np.arange(12, dtype=np.float32).reshape(3, 4), np.ones((4, 2), dtype=np.float32)
    c = np.zeros((3, 2), dtype=np.float32)
    k.fn(a, b, c)
    np.testing.assert_array_equal(c, a @ b)
    assert k.fn.copies == 1


# ---- the README's table --------------------------------------------------------------------

def _report() -> dict:
    timing = {"shape": [4096, 4096, 4096], "tflops": 250.5, "fraction_of_cublas": 0.41,
              "autotune": "matmul_kernel: BLOCK_SIZE_M: 128, BLOCK_SIZE_N: 256", "result_copy": None}
    return {"kernels": [
        {"name": "triton_tutorial_fp16", "verdict": "passed", "primary_category": None, "timings": [timing],
         "checks": [{"check": "exact", "wall_s": 2.5}, {"check": "speed", "wall_s": 4.0}]},
        {"name": "triton_tutorial_fp32", "verdict": "failed", "primary_category": "wrong_values",
         "diagnosis": "x", "timings": [], "checks": [{"check": "accuracy"}]},
    ]}


def test_the_table_has_a_row_per_example_with_verdict_speed_and_the_chosen_config():
    text = eco.table([_report()])
    lines = text.splitlines()
    assert len(lines) == 2 + len(eco.EXAMPLES)
    fp16 = next(line for line in lines if "matmul_fp16" in line)
    assert "| passed |" in fp16 and "250.5 at 4096x4096x4096" in fp16 and "| 0.41 |" in fp16
    assert "autotune chose matmul_kernel: BLOCK_SIZE_M: 128" in fp16 and "2 checks (exact, speed) in 6 s" in fp16
    assert "| not run |" in next(line for line in lines if "cupy_matmul.py" in line)


def test_check_reports_each_unexpected_verdict(tmp_path, capsys):
    assert eco.wrong_verdicts([_report()]) == [
        "triton_tutorial_fp32: failed / wrong_values (x); expected failed / precision_too_low"]
    path = tmp_path / "r.json"
    path.write_text(__import__("json").dumps(_report()))
    assert eco.main(["--check", str(path)]) == 1
    assert "UNEXPECTED triton_tutorial_fp32" in capsys.readouterr().err
    assert eco.main([str(path)]) == 0


@pytest.mark.gemm_nvrtc
def test_the_cuda_c_example_compiles_for_sm_90_with_no_gpu(monkeypatch):
    pytest.importorskip("cuda.core")
    from pytest_gemm.kernels.compiler import compile_for_arch

    [k] = load_spec("examples/ecosystems/cuda_c.py:tiled", ROOT)
    result = compile_for_arch(k, "sm_90")
    assert result.code and result.resources.spill_stores == 0
