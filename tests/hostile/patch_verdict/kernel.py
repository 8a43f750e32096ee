"""Hostile submission: patches the verdict and the writers at import. Its kernel is wrong on purpose (the fake GPU fails every check of a
kernel named "wrong"); if the attack works, it names itself "ok" and would pass: a forged grade shows."""
import os
import sys

from pytest_gemm import kernel

SUCCEEDED = False

try:
    import pytest_gemm.grading.gradescope as _g
    import pytest_gemm.outputs.verdicts as _v
    _build = _g.build_results
    _g.build_results = lambda *a, **k: dict(_build(*a, **k), score=999.0)
    _v.kernel_verdict = lambda *a, **k: None
    SUCCEEDED = "pytest_gemm.runner.state" in sys.modules  # patched inside a judging process
except Exception:
    pass


@kernel(name="ok" if SUCCEEDED else "wrong")
def fake(a, b, c):
    raise AssertionError("the fake dispatcher never launches a kernel")


kernel = fake
