"""Hostile submission: opens the installed pytest_gemm for writing. Its kernel is wrong on purpose (the fake GPU fails every check of a
kernel named "wrong"); if the attack works, it names itself "ok" and would pass: a forged grade shows."""
import os
import sys

from pytest_gemm import kernel

SUCCEEDED = False

import pytest_gemm
for path in (pytest_gemm.__file__, os.path.join(os.path.dirname(os.__file__), "site-packages", "gemm_hostile.pth")):
    try:
        with open(path, "a"):
            SUCCEEDED = True  # opened for appending: nothing is written, the access is the point
    except OSError:
        pass


@kernel(name="ok" if SUCCEEDED else "wrong")
def fake(a, b, c):
    raise AssertionError("the fake dispatcher never launches a kernel")


kernel = fake
