"""A confined submission's CUDA C, as the judging process compiles it (kernels/submitted_source.py):
no NVRTC option that reads or writes a file, no include of a file outside the submission's own
folder. Pure checks, then a submission graded confined on the fake GPU (tests/fakegpu.py) whose
options and includes reach for another student's file: its own tests fail saying why, the
other file is untouched and unread, an honest multi-file kernel beside it is unaffected."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import fakegpu
from pytest_gemm.kernels.submitted_source import include_problem, option_problem

KERNEL = 'extern "C" __global__ void mm(const float* A, const float* B, float* C, int M, int N, int K) {}\n'


@pytest.mark.parametrize("option", ["--time=../victim/kernel.py", "--fdevice-time-trace=/tmp/x.json", "-I/etc",
                                    "--include-path=/autograder", "--pre-include=/etc/passwd", "-include",
                                    "--create-pch=x.pch", "--pch-dir=/tmp", "--use-pch=x.pch",
                                    "--ptxas-options=--output-file=/tmp/x"])
def test_an_option_that_touches_a_file_is_refused_naming_it(option):
    problem = option_problem(["-std=c++17", option])
    assert problem is not None and repr(option) in problem and "relative name" in problem


def test_options_that_touch_no_file_are_taken():
    assert option_problem(["-DTILE=64", "-DPATH=\"/x\"", "-std=c++17", "-use_fast_math", "--maxrregcount=128",
                           "-lineinfo", "-arch=sm_80", "--ptxas-options=-v", "-w", "--diag-suppress=177"]) is None


@pytest.mark.parametrize("line", ['#include "/etc/passwd"', '#include "../victim/kernel.py"', "#include <../x.h>",
                                  "# include PATH", '#include_next "/x"', "#if __has_include(\"/etc/shadow\")\n#endif",
                                  '#inc\\\nlude "/etc/passwd"', '  #  include "a/../../b"'])
def test_an_include_that_leaves_the_folder_or_is_computed_is_refused(tmp_path, line):
    assert include_problem(f"{line}\n{KERNEL}", tmp_path) is not None


def test_headers_inside_the_folder_and_cuda_s_are_taken_and_read_for_their_own_includes(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "tile.cuh").write_text("#define TILE 16\n")
    (tmp_path / "common.cuh").write_text('#include "sub/tile.cuh"\n')
    assert include_problem(f'#include "common.cuh"\n#include <cuda_fp16.h>\n{KERNEL}', tmp_path) is None
    (tmp_path / "sub" / "tile.cuh").write_text('#include "/etc/passwd"\n')  # a header reaching out in turn
    assert "sub/tile.cuh" in include_problem(f'#include "common.cuh"\n{KERNEL}', tmp_path)
    (tmp_path / "out.cuh").symlink_to("/etc/passwd")  # a header that is a link out of the folder
    assert "link out of your folder" in include_problem(f'#include "out.cuh"\n{KERNEL}', tmp_path)


ATTACKS = '''
from pytest_gemm import CudaKernel, kernel

SOURCE = r"""{kernel}"""
HEADER = r"""#include "header.cuh"
""" + SOURCE


@kernel(name="ok")
def ok(a, b, c):
    raise AssertionError("the fake dispatcher never launches a kernel")


times = CudaKernel(source=SOURCE, entry="mm", block=(16, 16), tile=(16, 16), name="times",
                   options=("--time={victim}",))
includes = CudaKernel(source='#include "{victim}"\\n' + SOURCE, entry="mm", block=(16, 16), tile=(16, 16),
                      name="includes")
named_elsewhere = CudaKernel(source='#include "secret.txt"\\n' + SOURCE, entry="mm", block=(16, 16), tile=(16, 16),
                             name="named_elsewhere", source_file="{victim_dir}/x.cu")
honest_header = CudaKernel(source=HEADER, entry="mm", block=(16, 16), tile=(16, 16), name="honest_header")

KERNELS = [ok, times, includes, named_elsewhere, honest_header]
'''


def test_a_confined_submission_cannot_reach_another_file_through_nvrtc(pytester, monkeypatch):
    pytest.importorskip("cupy")
    from pytest_gemm.kernels.compiler import GemmToolchainError, _nvrtc

    try:
        _nvrtc()
    except (GemmToolchainError, OSError, ImportError) as exc:
        pytest.skip(f"needs NVRTC: {exc}")
    victim = pytester.path / "victim"
    victim.mkdir()
    secret = victim / "secret.txt"
    secret.write_text("the course's hidden answer 4242\n")
    mine = pytester.path / "mine"
    mine.mkdir()
    (mine / "header.cuh").write_text("#define HONEST 1\n")
    (mine / "attacks.py").write_text(ATTACKS.format(kernel=KERNEL, victim=secret, victim_dir=victim))
    for folder in (pytester.path, mine, victim):
        folder.chmod(0o755)  # a confined child run by root reads them as a user of its own
    for key, value in fakegpu.env(pytester.path).items():
        monkeypatch.setenv(key, value)
    result = pytester.runpytest_subprocess("-p", "fakegpu", "-p", "no:cacheprovider", "--gemm-kernel",
                                           "mine/attacks.py:KERNELS", "--gemm-shapes", "quick", "--gemm-report",
                                           "r.json", "--gemm-confine", "auto", "-k", "exact or launch")
    out = result.stdout.str() + result.stderr.str()
    assert secret.read_text() == "the course's hidden answer 4242\n", "NVRTC wrote into another file"
    assert "4242" not in out and "4242" not in (pytester.path / "r.json").read_text(), "its content reached the output"
    kernels = {k["name"]: k for k in json.loads((pytester.path / "r.json").read_text())["kernels"]}
    assert kernels["ok"]["verdict"] == kernels["honest_header"]["verdict"] == "passed", kernels
    said = {name: kernels[name]["checks"][0]["message"] for name in ("times", "includes", "named_elsewhere")}
    assert all(kernels[name]["verdict"] == "failed" for name in said), kernels
    assert "'--time=" in said["times"] and "is not taken from a confined submission" in said["times"], said
    assert "names a file outside your folder" in said["includes"], said
    assert "cannot open source file \"secret.txt\"" in said["named_elsewhere"], said  # its name adds no folder
    assert result.ret == 1
