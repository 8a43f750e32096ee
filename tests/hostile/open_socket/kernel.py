"""Hostile submission: connects to a server on 127.0.0.1. Its kernel is wrong on purpose (the fake GPU fails every check of a
kernel named "wrong"); if the attack works, it names itself "ok" and would pass: a forged grade shows."""
import os
import sys

from pytest_gemm import kernel

SUCCEEDED = False

import socket
try:
    with socket.create_connection(("127.0.0.1", int(os.environ.get("GEMM_HOSTILE_PORT", "9"))), timeout=2) as s:
        s.sendall(b"hello from a submission")
        SUCCEEDED = True
except OSError:
    pass
try:  # UDP: whether it arrived, only the grader's listener on the same port can tell (the test asks it)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.sendto(b"hello by UDP from a submission", ("127.0.0.1", int(os.environ.get("GEMM_HOSTILE_PORT", "9"))))
except OSError:
    pass


@kernel(name="ok" if SUCCEEDED else "wrong")
def fake(a, b, c):
    raise AssertionError("the fake dispatcher never launches a kernel")


kernel = fake
