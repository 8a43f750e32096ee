"""Hostile submission: kills its parent. Its kernel is wrong on purpose (the fake GPU fails every check of a
kernel named "wrong"); if the attack works, it names itself "ok" and would pass: a forged grade shows."""
import os
import sys

from pytest_gemm import kernel

SUCCEEDED = False

import signal

# Its parent, and every grading process it can see: in its own PID namespace it sees none of them
# (its parent there is the namespace's first process, pid 0 or 1 from inside, which it spares).
mine = {os.getpid()}
pid = os.getpid()
while pid > 1:  # its own ancestors inside the namespace
    try:
        pid = int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        break
    mine.add(pid)
targets = {os.getppid()} if os.getppid() > 1 else set()
for entry in os.listdir("/proc"):
    if entry.isdigit() and int(entry) not in mine:
        try:
            line = open(f"/proc/{entry}/cmdline", "rb").read()
        except OSError:
            continue
        if b"gradebook" in line or b"pytest" in line:
            targets.add(int(entry))
for target in sorted(targets - {1}):
    try:
        os.kill(target, signal.SIGKILL)
        SUCCEEDED = True
    except OSError:
        pass


@kernel(name="ok" if SUCCEEDED else "wrong")
def fake(a, b, c):
    raise AssertionError("the fake dispatcher never launches a kernel")


kernel = fake
