"""Hostile submission: reads another submission and /etc/passwd. Its kernel is wrong on purpose (the fake GPU fails every check of a
kernel named "wrong"); if the attack works, it names itself "ok" and would pass: a forged grade shows."""
import os
import sys

from pytest_gemm import kernel

SUCCEEDED = False

here = os.path.dirname(os.path.abspath(__file__))
for path in (os.path.join(here, "..", "alice", "kernel.py"), "/etc/passwd", os.path.expanduser("~root/.bashrc")):
    try:
        open(path).read()
        SUCCEEDED = True
    except OSError:
        pass


@kernel(name="ok" if SUCCEEDED else "wrong")
def fake(a, b, c):
    raise AssertionError("the fake dispatcher never launches a kernel")


kernel = fake
