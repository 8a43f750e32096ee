"""The kernel's child process confined (``kernels/confine.py``): its command and Popen arguments."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from ..kernels import confine
from ..kernels.declared import spec_folder
from ..measure.shared_files import shared_files


def confined_command(cmd: list[str], spec: str, rootdir: str, env: dict[str, str]) -> tuple[list[str], dict[str, Any]]:
    """The child's command and Popen arguments under the run's confinement (``kernels/confine.py``)."""
    if confine.active() == "none" or spec.startswith("gemm:"):  # the shipped ladder is ours
        return cmd, {}
    folder = spec_folder(spec, Path(rootdir))
    files, folders = shared_files(env)
    return (confine.command(cmd, readable=[folder], chdir=folder, files=files, folders=folders,
                            caches=confine.compile_caches(spec)), confine.popen_kwargs())
