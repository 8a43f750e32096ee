"""Hostile submission: opens the installed pytest_gemm for writing. Its kernel is wrong on purpose (the fake GPU fails every check of a
kernel named "wrong"); if the attack works, it names itself "ok" and would pass: a forged grade shows."""
import os
import sys

from pytest_gemm import kernel

SUCCEEDED = False

import sysconfig
import tempfile

import pytest_gemm

try:
    os.close(os.open(pytest_gemm.__file__, os.O_WRONLY | os.O_APPEND))  # opened for writing: nothing written
    SUCCEEDED = True
except OSError:
    pass
for folder in {sysconfig.get_paths()["purelib"], os.path.dirname(os.path.dirname(pytest_gemm.__file__))}:
    try:
        fd, path = tempfile.mkstemp(dir=folder, prefix="gemm_hostile_", suffix=".pth")
        os.close(fd)
        os.remove(path)  # created (a .pth there runs at every Python start): the point is made, nothing is left
        SUCCEEDED = True
    except OSError:
        pass


@kernel(name="ok" if SUCCEEDED else "wrong")
def fake(a, b, c):
    raise AssertionError("the fake dispatcher never launches a kernel")


kernel = fake
