"""Hostile submission: kills its parent. Its kernel is wrong on purpose (the fake GPU fails every check of a
kernel named "wrong"); if the attack works, it names itself "ok" and would pass: a forged grade shows."""
import os
import sys

from pytest_gemm import kernel

SUCCEEDED = False

import signal
try:
    if os.getppid() > 1:
        os.kill(os.getppid(), signal.SIGKILL)
        SUCCEEDED = True
except OSError:
    pass


@kernel(name="ok" if SUCCEEDED else "wrong")
def fake(a, b, c):
    raise AssertionError("the fake dispatcher never launches a kernel")


kernel = fake
