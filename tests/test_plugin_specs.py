"""Every wrong --gemm-kernel spec ends the run with one clear message and no traceback."""
from __future__ import annotations

import textwrap

import pytest

GOOD_CU = textwrap.dedent("""
    extern "C" __global__ void mm(const float* A, const float* B, float* C, int M, int N, int K) {
        int r = blockIdx.y * 16 + threadIdx.y, c = blockIdx.x * 16 + threadIdx.x;
        if (r < M && c < N) { float s = 0; for (int i = 0; i < K; ++i) s += A[r * K + i] * B[i * N + c]; C[r * N + c] = s; }
    }
""")


def _kernel_module(**overrides: str) -> str:
    args = {"source": '"mm.cu"', "entry": '"mm"', "block": "(16, 16)", "tile": "(16, 16)"}
    args.update(overrides)
    body = ", ".join(f"{k}={v}" for k, v in args.items())
    return f"from pytest_gemm import CudaKernel, kernel\nk = CudaKernel({body})\nnot_a_kernel = 42\n" \
           f"def plain(a, b, c):\n    pass\n"


def run_spec(pytester: pytest.Pytester, spec: str, module: str | None = None, cu: str = GOOD_CU):
    pytester.makefile(".cu", mm=cu)
    pytester.makepyfile(mykernels=module if module is not None else _kernel_module())
    return pytester.runpytest_subprocess("--gemm-kernel", spec, "-p", "no:cacheprovider")


def assert_usage_error(result, *needles: str) -> None:
    text = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.USAGE_ERROR, text
    assert "Traceback" not in text, text
    for needle in needles:
        assert needle in text, f"{needle!r} not in:\n{text}"


@pytest.mark.parametrize("spec, overrides, needles", [
    ("nosuchmod:k", {}, ["'nosuchmod:k'", "module 'nosuchmod' not found"]),
    ("missing/file.py:k", {}, ["file", "not found", "missing/file.py"]),
    ("mykernels", {}, ["expected module:attr or path/to/file.py:attr"]),
    ("mykernels:nope", {}, ["has no attribute 'nope'", "kernels it defines: k"]),
    ("mykernels:not_a_kernel", {}, ["not_a_kernel is a int, not a kernel", "CudaKernel"]),
    ("mykernels:plain", {}, ["plain is a function, not a kernel", "@pytest_gemm.kernel"]),
    ("mykernels:k", {"signature": '"A,B,C,M,N,Q"'}, ["unknown token(s) 'Q'", "valid tokens are A, B, C, M, N, K, alpha, beta"]),
    ("mykernels:k", {"signature": '"A,B,C,M,N"'}, ["is missing K"]),
    ("mykernels:k", {"signature": '"A,B,C,N"'}, ["is missing M, K", "written for square matrices (one size N)",
                                                 "give it M, N and K"]),
    ("mykernels:k", {"signature": '"A,B,C,M,N,K,alpha"'}, ["alpha and beta come together"]),
    ("mykernels:k", {"precision": '"fp8"'}, ["unknown precision 'fp8'", "fp32, tf32, fp16, bf16"]),
    ("mykernels:k", {"block": "(64, 32)"}, ["2048 threads", "at most 1024"]),
    ("mykernels:k", {"block": "(10, 10)", "precision": '"fp16"'}, ["100 threads, not a whole number of warps"]),
    ("mykernels:k", {"source": '"gone.cu"'}, ["source file", "gone.cu", "not found"]),
    ("mykernels:k", {"tile": "None"}, ["exactly one of tile=(rows, cols) or grid="]),
])
def test_bad_spec_is_one_clear_message(pytester: pytest.Pytester, spec, overrides, needles):
    result = run_spec(pytester, spec, _kernel_module(**overrides))
    assert_usage_error(result, f"--gemm-kernel {spec!r}" if spec != "mykernels:k" or overrides else spec, *needles)


def test_import_error_inside_the_module_names_file_and_line(pytester: pytest.Pytester):
    result = run_spec(pytester, "mykernels:k", "import numpy\nraise RuntimeError('boom')\n")
    assert_usage_error(result, "importing 'mykernels' failed at", "mykernels.py:2", "RuntimeError: boom")


@pytest.mark.parametrize("spec", ["mykernels:k", "mykernels.py:k"])
@pytest.mark.parametrize("package, install", [
    ("triton", "pip install 'pytest-gemm[triton]'"),
    ("torch.utils", "pip install 'pytest-gemm[torch]'"),
    ("cupy", "pip install 'pytest-gemm[cuda12]' ('pytest-gemm[cuda13]' for a CUDA 13 driver)"),
    ("helpers_of_mine", "install it there (or, if it is a file of yours, put it beside the kernel's file)"),
])
def test_a_package_the_module_imports_that_is_missing_says_what_to_install_and_where(
        pytester: pytest.Pytester, spec, package, install):
    # the package made unimportable (None in sys.modules), whether or not this machine has it
    top = package.split(".")[0]
    pytester.makeconftest(f"import sys\nsys.modules[{top!r}] = None\n")
    result = run_spec(pytester, spec, f"import os\nimport {package}\n")
    assert_usage_error(result, "failed at", "mykernels.py:2", "ModuleNotFoundError",
                       f"{package!r} cannot be imported by the Python running pytest (", install)


@pytest.mark.parametrize("spec", ["mykernels:k", "mykernels.py:k"])
def test_a_module_that_exits_at_import_is_a_clear_error(pytester: pytest.Pytester, spec):
    result = run_spec(pytester, spec, "import sys\nsys.exit(3)\n")
    assert_usage_error(result, "failed at", "mykernels.py:2", "SystemExit: 3")


def test_compile_error_shows_nvrtc_log_with_file_and_line(pytester: pytest.Pytester):
    pytest.importorskip("cuda.bindings", reason="NVRTC not installed (install pytest-gemm[cuda12])")
    broken = GOOD_CU.replace("float s = 0;", "float s = undefined_name;")
    result = run_spec(pytester, "mykernels:k", cu=broken)
    assert_usage_error(result, "CUDA compile error in", "mm.cu(3): error", "undefined_name")


def test_a_good_spec_in_a_list_and_dict_is_accepted(pytester: pytest.Pytester):
    module = _kernel_module() + "ks = [k]\nkd = {'first': k}\n"
    pytester.makefile(".cu", mm=GOOD_CU)
    pytester.makepyfile(mykernels=module)
    result = pytester.runpytest_subprocess("--gemm-kernel", "mykernels:ks", "--gemm-kernel", "mykernels:kd",
                                           "--collect-only", "-q")
    assert result.ret == 0, result.stdout.str()
    out = result.stdout.str()
    assert "exact-mm-17x33x65" in out and "exact-first-17x33x65" in out


def test_bad_option_values_are_echoed(pytester: pytest.Pytester):
    result = pytester.runpytest_subprocess("--gemm-arch", "sm_99")
    assert_usage_error(result, "unknown architecture 'sm_99'", "sm_75")
    result = pytester.runpytest_subprocess("--gemm-bench-shape", "4096x4096")
    assert_usage_error(result, "shape '4096x4096'", "MxNxK")


def test_kernels_can_come_from_the_ini_key(pytester: pytest.Pytester):
    pytester.makefile(".cu", mm=GOOD_CU)
    pytester.makepyfile(mykernels=_kernel_module())
    pytester.makeini("[pytest]\ngemm_kernels =\n    mykernels:k\n")
    result = pytester.runpytest_subprocess("--pyargs", "conformance", "--collect-only", "-q")
    assert result.ret == 0, result.stdout.str()
    assert "exact-mm-17x33x65" in result.stdout.str()


def test_template_entries_compile_by_their_instantiation_name(pytester: pytest.Pytester):
    pytest.importorskip("cuda.bindings", reason="NVRTC not installed (install pytest-gemm[cuda12])")
    from pytest_gemm import CudaKernel
    from pytest_gemm.kernels.compiler import compile_for_arch

    source = GOOD_CU.replace('extern "C" __global__ void mm(', "template <int T> __global__ void mm(")
    source += "template __global__ void mm<16>(const float*, const float*, float*, int, int, int);\n"
    k = CudaKernel(source=source, entry="mm<16>", block=(16, 16), tile=(16, 16), name="templ")
    k.validate()
    result = compile_for_arch(k, "sm_80")
    assert result.lowered_name.startswith("_Z2mmILi16E") and result.resources.registers > 0


def test_a_module_slow_to_import_is_not_waited_on_in_silence(tmp_path, monkeypatch, capsys):
    from pytest_gemm.kernels import loader

    (tmp_path / "slow.py").write_text("import time\nfrom pytest_gemm import kernel\ntime.sleep(0.6)\n\n"
                                      "@kernel\ndef k(a, b, c):\n    pass\n")
    monkeypatch.setattr(loader, "SAY_IMPORTING_AFTER", 0.1)
    assert [k.name for k in loader.load_specs(["slow.py:k"], tmp_path)] == ["k"]
    err = capsys.readouterr().err
    assert "pytest-gemm: --gemm-kernel 'slow.py:k': importing it has taken 0.1 s so far" in err, err
    assert "--gemm-timeout does not bound it" in err and "Ctrl-C" in err, err
