"""Hostile submission: spawns thousands of processes that outlive it. Its kernel is wrong on purpose (the fake GPU fails every check of a
kernel named "wrong"); if the attack works, it names itself "ok" and would pass: a forged grade shows."""
import os
import sys

from pytest_gemm import kernel

SUCCEEDED = False

import time
COUNT = int(os.environ.get("GEMM_HOSTILE_FORKS", "3000"))
made = 0
for _ in range(COUNT):
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        os.setsid()
        time.sleep(60)
        os._exit(0)
    made += 1
SUCCEEDED = made >= COUNT


@kernel(name="ok" if SUCCEEDED else "wrong")
def fake(a, b, c):
    raise AssertionError("the fake dispatcher never launches a kernel")


kernel = fake
