"""Hostile submission: fills the disk. Its kernel is wrong on purpose (the fake GPU fails every check of a
kernel named "wrong"); if the attack works, it names itself "ok" and would pass: a forged grade shows."""
import os
import sys

from pytest_gemm import kernel

SUCCEEDED = False

import tempfile
block, wrote = b"x" * (1 << 20), 0
target = os.path.join(tempfile.gettempdir(), "gemm-hostile-fill")
try:
    with open(target, "wb") as fh:
        for _ in range(int(os.environ.get("GEMM_HOSTILE_FILL_MB", "2048"))):
            fh.write(block)
            wrote += 1
except OSError:
    pass
SUCCEEDED = wrote >= int(os.environ.get("GEMM_HOSTILE_FILL_MB", "2048"))
try:
    os.remove(target)
except OSError:
    pass


@kernel(name="ok" if SUCCEEDED else "wrong")
def fake(a, b, c):
    raise AssertionError("the fake dispatcher never launches a kernel")


kernel = fake
