"""A newcomer's first mistakes, each reported once, first, at their own file and line: a keyword
typo in a declaration, one syntax error under ``--gemm-arch all``, a compile log that started
with NVRTC's warning about old architectures. NVRTC for the compile cases (no GPU)."""
from __future__ import annotations

import re
import textwrap

import pytest

from suite_helpers import nvrtc_missing

BAD_CU = textwrap.dedent("""
    extern "C" __global__ void mm(const float* A, const float* B, float* C, int M, int N, int K) {
        int r = blockIdx.y * 16 + threadIdx.y, c = blockIdx.x * 16 + threadIdx.x;
        float s = 0 oops;
        if (r < M && c < N) { for (int i = 0; i < K; ++i) s += A[r * K + i] * B[i * N + c]; C[r * N + c] = s; }
    }
""")
DECLARE = "from pytest_gemm import CudaKernel\n\nk = CudaKernel(source='mm.cu', entry='mm', block=(16, 16), {})\n"
WARNING = "nvrtc: warning: Architectures prior to '<compute/sm>_75' are deprecated and may be removed in a future release"


def test_a_keyword_typo_is_reported_at_the_user_s_line(pytester: pytest.Pytester):
    pytester.makefile(".cu", mm=BAD_CU)
    pytester.makepyfile(mine=DECLARE.format("tiles=(16, 16)"))
    result = pytester.runpytest_subprocess("--gemm-kernel", "mine.py:k", "-p", "no:cacheprovider")
    text = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.USAGE_ERROR, text
    assert re.search(r"failed at \S*mine\.py:3: GemmSpecError: CudaKernel: unknown keyword argument tiles=; "
                     r"did you mean tile=\?", text), text
    assert "declaration.py" not in text and "Traceback" not in text, text


def test_a_keyword_typo_in_a_declaration_written_as_the_readme_does_is_at_the_keyword_s_line(pytester: pytest.Pytester):
    # one keyword a line, as README.md declares a kernel: the typo's line, not the statement's first
    pytester.makefile(".cu", mm=BAD_CU)
    pytester.makepyfile(mine="from pytest_gemm import CudaKernel\n\nk = CudaKernel(\n    source='mm.cu',\n"
                             "    entry='mm',\n    block=(16, 16),\n    tiles=(16, 16),\n)\n")
    result = pytester.runpytest_subprocess("--gemm-kernel", "mine.py:k", "-p", "no:cacheprovider")
    text = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.USAGE_ERROR, text
    assert re.search(r"failed at \S*mine\.py:7: GemmSpecError: CudaKernel: unknown keyword argument tiles=", text), text


def test_nvrtc_s_warning_about_old_architectures_is_not_the_kernel_s_log():
    from pytest_gemm.kernels.compiler import without_arch_deprecation

    log = f"{WARNING}\nmm.cu(3): error: expected a \";\"\n"
    assert without_arch_deprecation(log) == "mm.cu(3): error: expected a \";\"\n"
    assert without_arch_deprecation("mm.cu(3): warning: variable declared but never used\n").startswith("mm.cu(3)")


@pytest.fixture
def nvrtc() -> None:
    missing = nvrtc_missing()
    if missing:
        pytest.skip(f"needs NVRTC: {missing}")


def test_one_syntax_error_under_every_architecture_is_shown_once(pytester: pytest.Pytester, nvrtc, monkeypatch):
    # as on a user's terminal: with CI set, pytest's own short summary repeats each message whole
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv("BUILD_NUMBER", raising=False)
    pytester.makefile(".cu", mm=BAD_CU)
    pytester.makepyfile(mine=DECLARE.format("tile=(16, 16)"))
    result = pytester.runpytest_subprocess("--gemm-kernel", "mine.py:k", "--gemm-arch", "all", "-p", "no:cacheprovider")
    text = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.TESTS_FAILED, text
    failed = result.parseoutcomes()["failed"]
    assert failed >= 10, text  # one test per architecture
    # the log in full once; each other architecture's test: its one-line summary, and where the log is
    assert text.count("detected in the compilation of") == 1, text
    assert text.count("the same errors as for sm_70: its log is shown there") == failed - 1, text
    assert re.search(r"^mm: compile_error \(compile sm_70\): .*mm\.cu\(3\): error: expected", text, re.M), text
    assert "(--gemm-kernel mine.py:k)" in text and "deprecated" not in text, text
    assert len(text.splitlines()) < 110, len(text.splitlines())  # 193 when each test showed the log


def test_a_compile_for_sm_70_has_no_deprecation_warning_in_its_log(nvrtc, tmp_path):
    from pytest_gemm import CudaKernel
    from pytest_gemm.kernels.compiler import GemmCompileError, compile_for_arch

    (tmp_path / "mm.cu").write_text(BAD_CU)
    kernel = CudaKernel(source=str(tmp_path / "mm.cu"), entry="mm", block=(16, 16), tile=(16, 16))
    with pytest.raises(GemmCompileError) as failed:
        compile_for_arch(kernel, "sm_70")
    assert failed.value.log.lstrip().startswith(str(tmp_path / "mm.cu")), failed.value.log
    assert "deprecated" not in str(failed.value), str(failed.value)


def test_gradescope_on_a_machine_with_no_gpu_refuses_and_writes_no_zeros(pytester: pytest.Pytester):
    from pytest_gemm.kernels.device import probe

    if not isinstance(probe(), str):
        pytest.skip("a GPU is usable here")
    pytester.makefile(".cu", mm=BAD_CU.replace(" oops", ""))
    pytester.makepyfile(kernel=DECLARE.format("tile=(16, 16)"))
    # the documented run_autograder command (examples/course/README.md), with no GPU
    result = pytester.runpytest_subprocess("--gemm-kernel", "kernel.py:k", "--gemm-gradescope", "results/results.json",
                                           "--gemm-timeout", "60", "-p", "no:cacheprovider", "-q")
    text = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.TESTS_FAILED, text
    assert "--gemm-gradescope: not grading: no usable GPU" in text and "--gemm-allow-no-gpu" in text, text
    assert not (pytester.path / "results" / "results.json").exists()
    allowed = pytester.runpytest_subprocess("--gemm-kernel", "kernel.py:k", "--gemm-gradescope", "results/results.json",
                                            "--gemm-allow-no-gpu", "-p", "no:cacheprovider", "-q")
    assert (pytester.path / "results" / "results.json").is_file(), allowed.stdout.str()
