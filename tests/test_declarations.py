"""A wrong declaration costs its own kernel (issue 43, item 3): its tests fail with the one-line
message, every other kernel of the run is tested, the exit status is non-zero. And with
``--gemm-confine``, declarations are read in a child and come back as data (kernels/declared.py)."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import fakegpu
from pytest_gemm.kernels import confine
from pytest_gemm.kernels.declared import BadDeclaration, describe, rebuild
from pytest_gemm.model.contract import CudaKernel, PyKernel

HERE = Path(__file__).resolve().parent


@pytest.fixture
def fake(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    shutil.copy(HERE / "declarations" / "one_bad.py", pytester.path / "one_bad.py")
    pytester.path.chmod(0o755)  # a confined child runs as a user of its own when the tests run as root
    for key, value in fakegpu.env(pytester.path).items():
        monkeypatch.setenv(key, value)
    return pytester


@pytest.mark.parametrize("confined", ["none", "auto"])
def test_one_bad_declaration_fails_its_own_tests_and_the_others_run(fake, confined):
    result = fake.runpytest_subprocess("-p", "fakegpu", "-p", "no:cacheprovider", "--gemm-kernel",
                                       "one_bad.py:KERNELS", "--gemm-shapes", "quick", "--gemm-report", "r.json",
                                       "--gemm-confine", confined, "-k", "exact or launch")
    assert result.ret == 1, result.stdout.str()
    kernels = {k["name"]: k for k in json.loads((fake.path / "r.json").read_text())["kernels"]}
    assert kernels["ok"]["verdict"] == kernels["ok0"]["verdict"] == "passed", kernels
    bad = kernels["bad"]
    assert bad["verdict"] == "failed" and all(c["outcome"] == "failed" for c in bad["checks"]), bad
    assert {c["check"] for c in bad["checks"]} == {"exact", "launch"}  # one test per check, not per shape
    message = bad["checks"][0]["message"]
    assert "one_bad.py:KERNELS" in message and "bf16" in message and "__half" in message, message
    # the report says what it was declared, not a default (it read fp32 before)
    assert bad["precision"] == "bf16", bad
    out = result.stdout.str()
    assert "exact-bad-declaration FAILED" in out.replace("::test_check[", " ").replace("] ", " ") or \
        "exact-bad-declaration" in out


def test_a_run_whose_every_kernel_is_wrong_still_ends_with_the_message(fake):
    (fake.path / "only_bad.py").write_text((HERE / "declarations" / "one_bad.py").read_text()
                                           + "\nONLY = [bad]\n")
    result = fake.runpytest_subprocess("-p", "fakegpu", "--gemm-kernel", "only_bad.py:ONLY")
    assert result.ret == 4
    assert "bf16" in result.stderr.str()


def test_a_declaration_crosses_as_data_and_comes_back_the_same():
    k = CudaKernel(source='extern "C" __global__ void mm(const float* A, const float* B, float* C, int M, int N, '
                          'int K) {}', entry="mm", block=(16, 16), grid=lambda m, n, k: (1, 1, 1), name="g",
                   multiple_of=(4, 1, 1))
    k.validate()
    k.origin_spec = ("x.py:k", 0)
    back = rebuild(json.loads(json.dumps(describe(k))))
    assert isinstance(back, CudaKernel) and back.multiple_of == (4, 1, 1) and back.origin_spec == ("x.py:k", 0)
    with pytest.raises(RuntimeError, match="own .confined. process"):
        back.launch_grid(8, 8, 8)  # the grid callable stayed in the kernel's process
    py = PyKernel(lambda a, b, c, alpha, beta: None, precision="fp16", name="p")
    again = rebuild(describe(py))
    assert isinstance(again, PyKernel) and again.takes_alpha_beta and again.precision == "fp16"


def test_forged_declaration_data_is_a_bad_declaration_not_a_crash():
    forged = {"kind": "cuda", "name": "x", "source": "", "entry": "", "block": [4096], "origin_spec": ["s", 0]}
    assert isinstance(rebuild(forged), BadDeclaration)
    # a precision that is not one of ours is reported as unknown, never passed on (the report's schema)
    assert rebuild(dict(forged, precision="fp64")).precision is None
    assert rebuild({"kind": "bad", "name": "x", "message": "m", "precision": "<script>"}).precision is None
    assert isinstance(rebuild({"kind": "rm -rf", "origin_spec": ["s", 0]}), BadDeclaration)


def test_asking_for_a_confinement_this_machine_lacks_is_refused(fake, monkeypatch):
    monkeypatch.setenv(confine.BWRAP_ENV, str(fake.path / "no-such-bwrap"))
    result = fake.runpytest_subprocess("-p", "fakegpu", "--gemm-kernel", "one_bad.py:KERNELS",
                                       "--gemm-confine", "bubblewrap")
    assert result.ret == 4 and "PYTEST_GEMM_BWRAP" in result.stderr.str()


def test_in_compile_only_mode_a_bad_declaration_fails_with_its_message_not_as_a_launcher(fake):
    # --gemm-arch took a kernel whose declaration is wrong for a Python launcher that declares no
    # CUDA, called it with stand-in arrays, and failed it with "AttributeError: 'BadDeclaration'
    # object has no attribute 'fn'"
    result = fake.runpytest_subprocess("-p", "no:cacheprovider", "--gemm-kernel", "one_bad.py:KERNELS",
                                       "--gemm-arch", "sm_80", "--gemm-report", "r.json")
    text = result.stdout.str() + result.stderr.str()
    assert result.ret == 1, text
    assert "'BadDeclaration' object" not in text, text
    kernels = {k["name"]: k for k in json.loads((fake.path / "r.json").read_text())["kernels"]}
    (check,) = kernels["bad"]["checks"]
    assert check["check"] == "compile" and check["category"] == "launch_error", check
    assert kernels["bad"]["precision"] == "bf16", kernels["bad"]
    assert "one_bad.py:KERNELS" in check["message"] and "bf16" in check["message"], check
    assert all(kernels[k]["checks"] and "bf16" not in kernels[k]["checks"][0]["message"] for k in ("ok", "ok0"))


# one_bad.py's ok and ok0, and a CUDA kernel whose entry= the source does not define
TYPO = '''
SOURCE = r"""
extern "C" __global__ void mm(const float* A, const float* B, float* C, int M, int N, int K) {}
"""
typo = CudaKernel(source=SOURCE, entry="mm_tiled", block=(16, 16), tile=(16, 16), name="typo")

TYPOS = [ok, typo, ok0]
ONLY = [typo]
'''


@pytest.mark.parametrize("workers", [(), ("-n", "2")], ids=["serial", "xdist"])
def test_a_kernel_that_compiles_for_no_architecture_fails_its_own_tests_and_the_others_run(fake, workers):
    """issue 43 (3): a wrong entry= (or any compile error) in one kernel of a module costs that
    kernel only: its tests fail as compile_error with NVRTC's message, the others are tested, the
    exit status is 1; a run whose only kernel is that one still ends with the message (exit 4)."""
    pytest.importorskip("cupy")
    from pytest_gemm.kernels.compiler import GemmToolchainError, _nvrtc

    try:
        _nvrtc()
    except (GemmToolchainError, OSError, ImportError) as exc:
        pytest.skip(f"needs NVRTC to compile offline: {exc}")
    (fake.path / "typo.py").write_text((HERE / "declarations" / "one_bad.py").read_text() + TYPO)
    result = fake.runpytest_subprocess("-p", "fakegpu", "-p", "no:cacheprovider", *workers, "--gemm-kernel",
                                       "typo.py:TYPOS", "--gemm-shapes", "quick", "--gemm-report", "r.json",
                                       "-k", "exact or launch")
    assert result.ret == 1, result.stdout.str() + result.stderr.str()
    kernels = {k["name"]: k for k in json.loads((fake.path / "r.json").read_text())["kernels"]}
    assert kernels["ok"]["verdict"] == kernels["ok0"]["verdict"] == "passed", kernels
    typo = kernels["typo"]
    assert typo["verdict"] == "failed" and typo["primary_category"] == "compile_error", typo
    assert {c["check"] for c in typo["checks"]} == {"exact", "launch"}, typo["checks"]  # one test per check
    assert all("typo.py:TYPOS" in c["message"] and "mm_tiled" in c["message"] for c in typo["checks"]), typo
    alone = fake.runpytest_subprocess("-p", "fakegpu", "--gemm-kernel", "typo.py:ONLY")
    assert alone.ret == 4 and "mm_tiled" in alone.stderr.str(), alone.stderr.str()
