"""Where a timed-out check was: before the parent kills a kernel's child past its timeout, it
asks the child for its main thread's Python stack (``faulthandler`` on ``SIGUSR1``, written into
a file the parent gave it), so the timeout names the line it was at: a launcher spinning in its
own Python, waiting in ``torch.cuda.synchronize``, or a warm-up the watcher did not see
(``checks/warmup.py``). Not for a confined child (the parent's pid for it is the sandbox's).
``frames`` reads a faulthandler dump (the no-GPU dry run's too: ``kernels/dry_run.py``);
``frames`` and ``where`` are pure: tested on dumps of the form faulthandler writes."""
from __future__ import annotations

import faulthandler
import os
import re
import signal
import time
from typing import IO

STACK_FD_ENV = "PYTEST_GEMM_STACK_FD"  # the child's file descriptor for its stack (checks/sandbox_child.py)
WAIT_S = 0.3      # for the child to write it (faulthandler writes from its signal handler at once)
FRAMES = 6        # innermost frames quoted
_FRAME = re.compile(r'^\s*File "(.+)", line (\d+) in (.+)$', re.M)


def listen(environ: dict[str, str]) -> None:
    """In the child: write the main thread's stack into the parent's file on SIGUSR1."""
    fd = environ.get(STACK_FD_ENV)
    if fd and fd.isdigit():
        faulthandler.register(signal.SIGUSR1, file=int(fd), all_threads=False)


def ask(pid: int, dump: IO[bytes]) -> str:
    """In the parent: signal the child, then ``where`` from what it wrote ("" when nothing)."""
    try:
        os.kill(pid, signal.SIGUSR1)
    except OSError:
        return ""
    time.sleep(WAIT_S)
    dump.seek(0)
    return where(dump.read().decode(errors="replace"))


def frames(text: str) -> list[tuple[str, str, str]]:
    """(file, line, function) of each frame of a faulthandler dump, innermost first."""
    return [(path, line, func.strip()) for path, line, func in _FRAME.findall(text)]


def where(text: str) -> str:
    """One line from a faulthandler dump: its innermost ``FRAMES`` frames, innermost first."""
    found = [f"{path}:{line} in {func}" for path, line, func in frames(text)]
    if not found:
        return ""
    more = f" (and {len(found) - FRAMES} outer frames)" if len(found) > FRAMES else ""
    return "where it was, innermost first: " + " <- ".join(found[:FRAMES]) + more
