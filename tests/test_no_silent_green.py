"""Issue 17, "No silent green": every way a run could pass without testing anything is a
clear failure or a visible count. Each test here failed on 70576dc.

GPU-side behaviour (``--gemm-require-gpu`` passing on a GPU) is in the tests marked
``gemm_gpu``-style below: they skip here with the reason and run on a GPU machine.
"""
from __future__ import annotations

import os
import re
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
NO_GPU = {"CUDA_VISIBLE_DEVICES": ""}  # makes "no usable GPU" real on a GPU machine too

MM_CU = textwrap.dedent("""
    extern "C" __global__ void mm(const float* A, const float* B, float* C, int M, int N, int K) {
        int r = blockIdx.y * 16 + threadIdx.y, c = blockIdx.x * 16 + threadIdx.x;
        if (r < M && c < N) { float s = 0; for (int i = 0; i < K; ++i) s += A[r*K+i] * B[i*N+c]; C[r*N+c] = s; }
    }
""")
MINE = """
from pytest_gemm import CudaKernel
k = CudaKernel(source="mm.cu", entry="mm", block=(16, 16), tile=(16, 16), name="mine")
"""


def _no_gpu(monkeypatch) -> None:
    for key, value in NO_GPU.items():
        monkeypatch.setenv(key, value)


def _text(result) -> str:
    return result.stdout.str() + "\n" + result.stderr.str()


# GPU-only: the plugin's gemm_gpu marker skips them with the reason where no GPU is usable,
# and tools/gpu_session.sh gpu-tests selects them (-m gemm_gpu).
needs_gpu = pytest.mark.gemm_gpu


def _fake_cuda(root: Path, broken: bool) -> Path:
    """A ``cuda`` package ahead of the real one: without ``cuda.bindings`` (NVRTC not installed),
    or with an NVRTC whose library does not load (broken)."""
    pkg = root / "fakecuda" / "cuda"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    if broken:
        (pkg / "bindings").mkdir()
        (pkg / "bindings" / "__init__.py").write_text("")
        (pkg / "bindings" / "nvrtc.py").write_text(
            "def _broken(*args, **kwargs):\n"
            "    raise RuntimeError('Failed to dlopen libnvrtc.so.12')\n"
            "nvrtcVersion = nvrtcGetSupportedArchs = nvrtcCreateProgram = _broken\n")
    return root / "fakecuda"


def _hide_nvrtc(pytester: pytest.Pytester, monkeypatch, broken: bool = False) -> None:
    fake = _fake_cuda(pytester.path, broken)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(fake), str(REPO), os.environ.get("PYTHONPATH", "")]))


# ---- 1. a compile-only run that cannot compile is an error naming the extra --------------

@pytest.mark.parametrize("broken", [False, True], ids=["missing", "broken"])
def test_compile_only_mode_without_a_working_nvrtc_is_an_error_naming_the_extra(pytester, monkeypatch, broken):
    _hide_nvrtc(pytester, monkeypatch, broken)
    pytester.makefile(".cu", mm=MM_CU)
    pytester.makepyfile(mine=MINE)
    result = pytester.runpytest_subprocess("--gemm-kernel", "mine:k", "--gemm-arch", "sm_80", "-p", "no:cacheprovider")
    text = _text(result)
    assert result.ret == pytest.ExitCode.USAGE_ERROR, text
    assert "--gemm-arch (compile-only mode) cannot compile anything" in text
    assert "pip install 'pytest-gemm[cuda12]'" in text and "'pytest-gemm[cuda13]'" in text
    assert ("does not load" in text) if broken else ("cuda.bindings is not installed" in text)
    assert "Traceback" not in text


def test_without_gpu_and_without_nvrtc_the_run_ends_with_one_line_naming_both(pytester, monkeypatch):
    _hide_nvrtc(pytester, monkeypatch)
    _no_gpu(monkeypatch)
    pytester.makefile(".cu", mm=MM_CU)
    pytester.makepyfile(mine=MINE)
    result = pytester.runpytest_subprocess("--gemm-kernel", "mine:k", "-p", "no:cacheprovider")
    text = _text(result)
    assert result.ret == pytest.ExitCode.TESTS_FAILED, text
    lines = [line for line in text.splitlines() if line.strip()]
    assert len(lines) == 1 and "nothing can be tested here: no usable GPU" in lines[0], text
    assert "cuda.bindings is not installed" in text and "pip install 'pytest-gemm[cuda12]'" in text
    assert "Traceback" not in text and "direct cause" not in text and "During handling" not in text


def test_without_nvrtc_a_compile_check_fails_in_one_message_without_chained_tracebacks(monkeypatch):
    """The check itself (a run given only --gemm-kernel reaches it with a GPU, or under xdist):
    one message, no exception chain under it."""
    from pytest_gemm import CudaKernel
    from pytest_gemm.checks import compile as compile_check
    from pytest_gemm.kernels import compiler

    def missing(*args, **kwargs):
        raise compiler.GemmToolchainError(f"NVRTC is not available (cuda.bindings is not installed); {compiler.INSTALL_HINT}")

    monkeypatch.setattr(compiler, "compile_for_arch", missing)
    monkeypatch.setattr("pytest_gemm.kernels.device.probe", lambda: "no usable GPU: test")
    kernel = CudaKernel(source=MM_CU, entry="mm", block=(16, 16), tile=(16, 16))
    with pytest.raises(pytest.fail.Exception) as info:
        compile_check.run_offline(kernel, "sm_80", lambda facts: None)
    assert "cannot compile without NVRTC" in str(info.value) and "nothing could be tested" in str(info.value)
    assert info.value.__context__ is None and not info.value.pytrace


# ---- 2. --gemm-require-gpu ------------------------------------------------------------

@pytest.mark.parametrize("how", ["option", "ini"])
def test_require_gpu_fails_the_session_without_a_usable_gpu_with_the_reason(pytester, monkeypatch, how):
    _no_gpu(monkeypatch)
    pytester.makepyfile(test_x="def test_x():\n    pass\n")
    if how == "ini":
        pytester.makeini("[pytest]\ngemm_require_gpu = true\n")
    result = pytester.runpytest_subprocess(*(["--gemm-require-gpu"] if how == "option" else []), "-p", "no:cacheprovider")
    text = _text(result)
    assert result.ret == pytest.ExitCode.TESTS_FAILED, text
    assert "--gemm-require-gpu: no usable GPU" in text and "leave --gemm-require-gpu out" in text


def test_require_gpu_without_a_gpu_still_writes_the_gradescope_results(pytester, monkeypatch):
    import json

    _no_gpu(monkeypatch)
    pytester.makefile(".cu", mm=MM_CU)
    pytester.makepyfile(mine=MINE)
    result = pytester.runpytest_subprocess("--gemm-kernel", "mine:k", "--gemm-require-gpu", "--gemm-gradescope",
                                           "results.json", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.TESTS_FAILED, _text(result)
    results = json.loads((pytester.path / "results.json").read_text())
    assert results["score"] == 0 and "--gemm-require-gpu: no usable GPU" in json.dumps(results)


def test_require_gpu_with_the_compile_only_mode_is_a_usage_error(pytester):
    result = pytester.runpytest_subprocess("--gemm-require-gpu", "--gemm-arch", "sm_80", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "compile-only mode runs no GPU check" in _text(result)


def test_a_bad_require_gpu_ini_value_is_echoed(pytester):
    pytester.makeini("[pytest]\ngemm_require_gpu = sometimes\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "gemm_require_gpu = 'sometimes'" in _text(result) and "expected true or false" in _text(result)


def test_no_gpu_check_ran_is_found_from_the_records():
    from pytest_gemm.runner.completeness import gpu_checks_not_run

    compile_ok = {"check": "compile", "outcome": "passed"}
    skipped = {"check": "exact", "outcome": "skipped", "message": "kernel 'k' needs compute capability 9.0 (min_cc)"}
    ladder_ran = {"check": "speed", "outcome": "passed", "ladder": True}
    reason = gpu_checks_not_run([compile_ok, skipped, skipped, ladder_ran])
    assert reason is not None and "all 2 were skipped" in reason and "needs compute capability 9.0 (min_cc) (2x)" in reason
    assert gpu_checks_not_run([compile_ok, skipped, {"check": "exact", "outcome": "failed"}]) is None
    assert gpu_checks_not_run([compile_ok]) is None  # nothing to run on a GPU: the early probe decides


@needs_gpu
def test_on_a_gpu_require_gpu_passes(pytester):
    """GPU machine: `pytest --pyargs conformance -k "tiled16 and launch" --gemm-require-gpu` exits 0."""
    result = pytester.runpytest_subprocess("--gemm-ladder", "-k", "tiled16 and launch", "--gemm-require-gpu",
                                           "-p", "no:cacheprovider")
    assert result.ret == 0, _text(result)
    result.assert_outcomes(passed=1)


@needs_gpu
def test_on_a_gpu_require_gpu_fails_when_every_gpu_check_skipped(pytester):
    """GPU machine: a kernel whose min_cc no GPU has skips every GPU check: the run fails."""
    pytester.makefile(".cu", mm=MM_CU)
    pytester.makepyfile(mine=MINE.replace('name="mine"', 'name="mine", min_cc=(99, 0)'))
    result = pytester.runpytest_subprocess("--gemm-kernel", "mine:k", "-k", "launch or exact and 17x33x65",
                                           "--gemm-require-gpu", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.TESTS_FAILED, _text(result)
    assert "--gemm-require-gpu: no GPU check ran" in _text(result)


def test_the_ci_example_requires_a_gpu_on_the_gpu_jobs_and_compiles_only_elsewhere():
    yaml = pytest.importorskip("yaml", reason="pyyaml is in the test extra")
    jobs = yaml.safe_load((REPO / "examples/ci/github-actions.yml").read_text())["jobs"]
    gpu_runs = [s["run"] for s in jobs["gpu"]["steps"] if "pytest" in str(s.get("run", ""))]
    assert gpu_runs and all("--gemm-require-gpu" in run for run in gpu_runs)
    no_gpu_runs = [s["run"] for s in jobs["no-gpu"]["steps"] if "--gemm-kernel" in str(s.get("run", ""))]
    assert no_gpu_runs and all("--gemm-arch" in run and "--gemm-require-gpu" not in run for run in no_gpu_runs)
    readme = (REPO / "README.md").read_text()
    assert "--gemm-require-gpu" in readme and "compile-only" in readme


# ---- 4. inert for suites that do not use it ------------------------------------------

ENV_PROBE = """
import os
import re
from pathlib import Path

def test_a(worker_id):
    Path(os.environ["ENV_OUT"], worker_id + "-a").write_text(os.environ.get("CUDA_VISIBLE_DEVICES", "<unset>"))

def test_b(worker_id):
    Path(os.environ["ENV_OUT"], worker_id + "-b").write_text(os.environ.get("CUDA_VISIBLE_DEVICES", "<unset>"))
"""


def _fake_nvidia_smi(root: Path, log: Path) -> Path:
    bin_dir = root / "fakebin"
    bin_dir.mkdir()
    script = bin_dir / "nvidia-smi"
    script.write_text(f"#!/bin/sh\necho called >> {log}\n"
                      "echo 'GPU 0: Fake (UUID: GPU-0)'\necho 'GPU 1: Fake (UUID: GPU-1)'\necho 'GPU 2: Fake (UUID: GPU-2)'\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return bin_dir


def _env_seen(out: Path) -> set[str]:
    return {p.read_text() for p in out.iterdir()}


@pytest.fixture
def plain_xdist(pytester, monkeypatch, tmp_path):
    out = tmp_path / "env"
    out.mkdir()
    log = tmp_path / "nvidia-smi.log"
    monkeypatch.setenv("PATH", f"{_fake_nvidia_smi(tmp_path, log)}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("ENV_OUT", str(out))
    pytester.makepyfile(test_plain=ENV_PROBE)
    if Path("/proc/driver/nvidia/gpus").is_dir():
        pytest.skip("the driver's /proc entries answer before nvidia-smi on this machine")
    return out, log


def test_a_plain_xdist_suite_keeps_its_environment_and_never_runs_nvidia_smi(pytester, monkeypatch, plain_xdist):
    out, log = plain_xdist
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    result = pytester.runpytest_subprocess("-n", "2", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)
    assert _env_seen(out) == {"0,1"}, "a worker's CUDA_VISIBLE_DEVICES was changed"
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    for p in out.iterdir():
        p.unlink()
    result = pytester.runpytest_subprocess("-n", "2", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)
    assert _env_seen(out) == {"<unset>"}
    assert not log.exists(), "nvidia-smi was run for a suite that does not use pytest-gemm"


def test_a_plain_suite_keeps_xdists_own_auto_worker_count(pytester, monkeypatch, plain_xdist):
    out, log = plain_xdist
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setenv("PYTEST_XDIST_AUTO_NUM_WORKERS", "2")  # xdist's own -n auto answer
    result = pytester.runpytest_subprocess("-n", "auto", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)
    assert "created: 2/2 workers" in result.stdout.str() or "2 workers" in result.stdout.str(), result.stdout.str()
    assert not log.exists()


def test_a_suite_using_the_plugin_still_gets_one_gpu_per_worker(pytester, monkeypatch, plain_xdist):
    out, _ = plain_xdist
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    pytester.makepyfile(test_plain=ENV_PROBE.replace("def test_b(worker_id):", "def test_b(worker_id, gemm_exact_inputs):"))
    result = pytester.runpytest_subprocess("-n", "2", "-p", "no:cacheprovider")  # a gemm fixture, no option
    result.assert_outcomes(passed=2)
    assert _env_seen(out) <= {"0", "1"} and len(_env_seen(out)) >= 1
    for p in out.iterdir():
        p.unlink()
    pytester.makepyfile(test_plain=ENV_PROBE)
    result = pytester.runpytest_subprocess("-n", "2", "--gemm-timeout", "30", "-p", "no:cacheprovider")  # an option
    result.assert_outcomes(passed=2)
    assert _env_seen(out) <= {"0", "1"}


def test_a_suite_that_sets_only_a_gemm_ini_key_uses_the_plugin(pytester, monkeypatch, plain_xdist):
    """docs/options.md: a run uses pytest-gemm with "a `--gemm-*` option or `gemm_*` ini key": any of
    them, not only the grading ones (gemm_speed_budget alone pinned no worker before)."""
    out, _ = plain_xdist
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    pytester.makeini("[pytest]\ngemm_speed_budget = 0.5\n")
    result = pytester.runpytest_subprocess("-n", "2", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)
    assert _env_seen(out) <= {"0", "1"}, "a worker was not pinned to its GPU"


def test_every_gemm_ini_key_makes_a_run_use_the_plugin(pytester):
    """configure.INI_KEYS is the list is_active reads: every gemm_* key pytest --help shows is in it."""
    from pytest_gemm.runner.configure import INI_KEYS

    keys = set(re.findall(r"^  (gemm_[a-z_]+) ", pytester.runpytest("--help").stdout.str(), re.M))
    assert len(keys) >= 10 and keys <= set(INI_KEYS), sorted(keys - set(INI_KEYS))


# ---- 5. the shipped suite and ladder beside a user's own conformance/ and reference_kernels/ ----

def _user_project(pytester: pytest.Pytester, ini: str) -> None:
    pytester.makefile(".cu", mm=MM_CU)
    pytester.makepyfile(mine=MINE)
    for folder, body in (("conformance", "def test_user_conformance():\n    import conformance\n"
                                         "    assert conformance.OWNER == 'user'\n"),
                         ("reference_kernels", "def test_user_ladder():\n    import reference_kernels\n"
                                               "    assert reference_kernels.OWNER == 'user'\n"),
                         ("tests", "def test_plain():\n    pass\n")):
        pytester.mkdir(folder)
        if folder != "tests":
            (pytester.path / folder / "__init__.py").write_text("OWNER = 'user'\n")
        (pytester.path / folder / f"test_{folder}_user.py").write_text(body)
    pytester.makeini(ini)


@pytest.mark.parametrize("import_mode", ["prepend", "importlib"])
def test_a_user_project_with_its_own_conformance_and_reference_kernels_runs_its_tests_and_ours(
        pytester, monkeypatch, import_mode):
    _no_gpu(monkeypatch)
    _user_project(pytester, "[pytest]\ntestpaths = tests conformance reference_kernels\ngemm_kernels = mine:k\n")
    result = pytester.runpytest_subprocess(f"--import-mode={import_mode}", "-p", "no:cacheprovider", "-v",
                                           "-k", "user or plain or (exact and 17x33x65)")
    text = _text(result)
    assert result.ret == 0, text
    result.assert_outcomes(passed=3, skipped=1)  # ours: exact-mine-17x33x65 skips without a GPU
    for needle in ("test_plain PASSED", "test_user_conformance PASSED", "test_user_ladder PASSED",
                   "test_check[exact-mine-17x33x65] SKIPPED"):
        assert needle in text, text


def test_the_ladder_is_found_through_our_files_when_a_user_folder_shadows_its_name(pytester):
    _user_project(pytester, "[pytest]\ntestpaths = tests\n")
    result = pytester.runpytest_subprocess("--gemm-ladder", "--collect-only", "-q", "-p", "no:cacheprovider")
    text = _text(result)
    assert result.ret == 0, text
    import reference_kernels

    for rung in reference_kernels.LADDER:
        assert f"exact-{rung.name}-17x33x65" in text or f"launch-{rung.name}-" in text, rung.name
    assert "test_plain" not in text  # --gemm-ladder with no path: the suite only


def test_the_ini_kernels_add_our_suite_beside_the_current_folder(pytester):
    pytester.makefile(".cu", mm=MM_CU)
    pytester.makepyfile(mine=MINE, test_mine="def test_mine():\n    pass\n")
    pytester.makeini("[pytest]\ngemm_kernels = mine:k\n")
    result = pytester.runpytest_subprocess("--collect-only", "-q", "-p", "no:cacheprovider")
    assert result.ret == 0, _text(result)
    assert "test_mine.py::test_mine" in result.stdout.str() and "exact-mine-17x33x65" in result.stdout.str()


def test_the_suite_folder_is_the_installed_packages_own():
    import pytest_gemm
    from pytest_gemm.runner.configure import conformance_dir

    assert conformance_dir() == Path(pytest_gemm.__file__).resolve().parent.parent / "conformance"
    assert not (conformance_dir() / "conftest.py").exists()  # a conftest would be imported as conformance.conftest


# ---- 6. --gemm-arch: one test per architecture, arch-specific targets ---------------

def test_gemm_arch_failures_are_per_architecture_tests_beside_the_ones_that_compile(pytester):
    pytest.importorskip("cuda.bindings", reason="NVRTC not installed (install pytest-gemm[cuda12])")
    pytester.makefile(".cu", mm=textwrap.dedent("""
        extern "C" __global__ void mm(const float* A, const float* B, float* C, int M, int N, int K) {
        #if __CUDA_ARCH__ < 860
            needs_ampere_consumer_or_newer;
        #endif
            C[0] = A[0] * B[0];
        }
    """))
    pytester.makepyfile(mine=MINE)
    result = pytester.runpytest_subprocess("--gemm-kernel", "mine:k", "--gemm-arch", "sm_75,sm_86,sm_89",
                                           "-v", "-p", "no:cacheprovider")
    text = _text(result)
    result.assert_outcomes(passed=2, failed=1)
    assert "compile-mine-sm_75] FAILED" in text and "compile-mine-sm_86] PASSED" in text
    assert "compile-mine-sm_89] PASSED" in text
    assert "[compile_error] kernel 'mine': CUDA compile error in" in text and "for sm_75" in text


def test_an_arch_specific_kernel_compiles_for_its_target_and_skips_the_generic_one_with_the_cause(pytester):
    pytest.importorskip("cuda.bindings", reason="NVRTC not installed (install pytest-gemm[cuda12])")
    pytester.makefile(".cu", mm=MM_CU)
    pytester.makepyfile(mine=MINE.replace('name="mine"', 'name="hopper", arches=("sm_90a",), min_cc=(9, 0)'))
    result = pytester.runpytest_subprocess("--gemm-kernel", "mine:k", "--gemm-arch", "sm_90,sm_90a", "-v", "-rs",
                                           "-p", "no:cacheprovider")
    text = _text(result)
    assert result.ret == 0, text
    result.assert_outcomes(passed=1, skipped=1)
    assert "compile-hopper-sm_90a] PASSED" in text
    assert "does not claim sm_90: it declares arches=(sm_90a)" in text


def test_sm_86_and_sm_89_are_claimed_by_default(pytester):
    pytester.makefile(".cu", mm=MM_CU)
    pytester.makepyfile(mine=MINE)
    result = pytester.runpytest_subprocess("--gemm-kernel", "mine:k", "--collect-only", "-q", "-k", "compile",
                                           "-p", "no:cacheprovider")
    out = result.stdout.str()
    for arch in ("sm_75", "sm_80", "sm_86", "sm_89", "sm_90"):
        assert f"compile-mine-{arch}]" in out, out
    assert "sm_90a" not in out


# ---- 7. messages ---------------------------------------------------------------------

@pytest.mark.parametrize("args, needles", [
    (("--gemm-bench-shape", "4096x4096"), ["--gemm-bench-shape", "'4096x4096'", "MxNxK"]),
    (("--gemm-arch", "hopper"), ["--gemm-arch", "'hopper'", "sm_90a", "all"]),
    (("--gemm-sweep", "512,x"), ["--gemm-sweep"]),
    (("--gemm-timeout", "0"), ["--gemm-timeout", "seconds > 0"]),
    (("--gemm-min-cublas-fraction", "20"), ["--gemm-min-cublas-fraction", "(0, 10]"]),
])
def test_each_option_error_names_the_option_and_what_it_accepts(pytester, args, needles):
    result = pytester.runpytest_subprocess(*args, "-p", "no:cacheprovider")
    text = _text(result)
    assert result.ret == pytest.ExitCode.USAGE_ERROR, text
    for needle in needles:
        assert needle in text, f"{needle!r} not in {text}"


def test_skips_are_counted_by_reason_without_rs(pytester, monkeypatch):
    _no_gpu(monkeypatch)
    pytester.makefile(".cu", mm=MM_CU)
    pytester.makepyfile(mine=MINE)
    result = pytester.runpytest_subprocess("--gemm-kernel", "mine:k", "-k", "exact and (17x33x65 or 1x1x1)",
                                           "-p", "no:cacheprovider")
    out = result.stdout.str()
    assert result.ret == 0, out
    assert "pytest-gemm: 2 skipped, by reason (-rs lists each test):" in out
    assert any(line.strip().startswith("2  no usable GPU") for line in result.stdout.lines), out


def test_the_skip_count_lists_the_commonest_reasons_first():
    from types import SimpleNamespace

    from pytest_gemm.runner.completeness import skips_by_reason

    def skip(reason: str):
        return SimpleNamespace(skipped=True, longrepr=("f.py", 1, f"Skipped: {reason}"))

    lines = skips_by_reason([skip("a"), skip("b"), skip("b"), SimpleNamespace(skipped=False)], limit=1)
    assert lines == ["pytest-gemm: 3 skipped, by reason (-rs lists each test):", "  2  b", "  1  ... 1 other reasons"]
    # one cause, many kernels and architectures: counted together
    same = [skip(f"kernel {k!r} does not claim {a}: it is below the kernel's min_cc=(8, 0)")
            for k in ("naive", "tiled") for a in ("sm_70", "sm_75")]
    # ... in the words of one of them, said to be an example (not "kernel '…' does not claim sm_…")
    assert skips_by_reason(same)[1:] == ["  4  e.g. kernel 'naive' does not claim sm_70: it is below the kernel's min_cc=(8, 0)"]
    assert skips_by_reason(same[:1])[1:] == ["  1  kernel 'naive' does not claim sm_70: it is below the kernel's min_cc=(8, 0)"]


# ---- 8. packaging ---------------------------------------------------------------------

def test_loading_the_plugin_imports_neither_numpy_nor_cupy():
    """Measured with `python -X importtime -c "import pytest_gemm.plugin"` (2 CPUs, 3 runs each): about
    30 ms of pytest-gemm's own modules, 157 to 178 ms in all with pytest; 211 to 271 ms on 70576dc, which
    imported numpy (60 to 88 ms) through model/precision.py and runner/fixtures.py."""
    code = ("import sys; import pytest_gemm.plugin; "
            "print(sorted(m for m in ('numpy', 'cupy', 'cuda.bindings', 'tabulate', 'reference_kernels') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]", out


def test_the_distribution_declares_its_license_urls_classifiers_and_platform():
    import tomllib

    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert project["license"] == "MIT" and project["license-files"] == ["LICENSE"]
    assert (REPO / "LICENSE").read_text().startswith("MIT License")
    assert {"Homepage", "Issues", "Source"} <= set(project["urls"])
    classifiers = set(project["classifiers"])
    assert {"Framework :: Pytest", "Operating System :: POSIX :: Linux", "Environment :: GPU :: NVIDIA CUDA",
            "Topic :: Software Development :: Testing"} <= classifiers
    assert not any(c.startswith("License ::") for c in classifiers)  # the SPDX expression replaces them
    assert "## Platform support" in (REPO / "README.md").read_text()


def test_the_sdist_leaves_the_project_tests_out_and_keeps_what_the_package_needs():
    manifest = (REPO / "MANIFEST.in").read_text().split("\n")
    for line in ("prune tests", "prune tools", "include LICENSE", "graft examples"):
        assert line in manifest


@pytest.mark.skipif(os.environ.get("PYTEST_GEMM_BUILD_SDIST") != "1",
                    reason="builds an sdist with `python -m build` (needs setuptools>=77); set PYTEST_GEMM_BUILD_SDIST=1")
def test_the_sdist_built_here_has_no_tests_and_has_the_cuda_sources(tmp_path):
    import tarfile

    subprocess.run([sys.executable, "-m", "build", "--sdist", "--outdir", str(tmp_path), str(REPO)], check=True)
    (sdist,) = tmp_path.glob("*.tar.gz")
    names = tarfile.open(sdist).getnames()
    assert not any("/tests/" in n for n in names)
    assert any(n.endswith("reference_kernels/03_tiled.cu") for n in names) and any(n.endswith("/LICENSE") for n in names)
