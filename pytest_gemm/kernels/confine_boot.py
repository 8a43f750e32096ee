"""The first process inside the ``landlock`` confinement (``kernels/confine.py``): inside new
user, PID, network and mount namespaces (made by util-linux ``unshare``), it mounts a
size-limited tmpfs on its scratch folder, restricts itself and every process it will start
with a Landlock ruleset (read: the Python environment, the libraries, the submission; write:
the scratch and its kernel's compile caches; devices: the GPU's), then runs the command.

    python -m pytest_gemm.kernels.confine_boot PLAN_JSON -- COMMAND...
"""
from __future__ import annotations

import ctypes
import json
import os
import sys
from typing import Any
from .confine import scratch_env


def _mount_tmpfs(path: str, size: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.mount(b"tmpfs", path.encode(), b"tmpfs", 0, f"size={size},mode=1777".encode()) != 0:
        raise OSError(ctypes.get_errno(), f"mounting the scratch tmpfs on {path}")


def restrict(plan: dict[str, Any]) -> None:
    import landlock  # lazy: optional (landlock)
    from landlock import FSAccess  # lazy: optional (landlock)

    ruleset = landlock.Ruleset()
    read = FSAccess.READ_FILE | FSAccess.READ_DIR | FSAccess.EXECUTE
    for path in plan["read"]:
        if os.path.exists(path):
            ruleset.allow(path, rules=read if os.path.isdir(path) else FSAccess.READ_FILE | FSAccess.EXECUTE)
    for path in plan["write"]:
        ruleset.allow(path)
    file_rw = FSAccess.all_file() & ~FSAccess.EXECUTE
    for path in [d for d in plan["devices"] if os.path.exists(d)]:
        ruleset.allow(path, rules=file_rw)
    ruleset.allow("/proc", rules=read)
    ruleset.apply()


def main(argv: list[str]) -> int:
    plan = json.loads(argv[0])
    cmd = argv[argv.index("--") + 1:]
    _mount_tmpfs(plan["scratch"], int(plan["scratch_bytes"]))

    os.environ.update(scratch_env(plan["scratch"]))
    os.environ.update(plan.get("env") or {})  # the kernel's own compile caches (confine.compile_caches)
    os.chdir(plan["chdir"])
    restrict(plan)
    os.execvp(cmd[0], cmd)
    return 127  # pragma: no cover


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
