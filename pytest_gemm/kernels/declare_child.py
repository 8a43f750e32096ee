"""The child that reads a submission's declarations (``kernels/declared.py`` is the parent's side).

    python -m pytest_gemm.kernels.declare_child FD ROOTDIR SPEC

imports the spec (confined, when the run is) and writes ``{"kernels": [...]}`` (each kernel's
declaration as data, or its one-line error) or ``{"error": ...}`` (the spec cannot be read) to FD.
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any, Sequence

from ..model.declaration import GemmSpecError
from .declared import describe
from .loader import load_spec


def main(argv: Sequence[str]) -> int:
    fd, rootdir, spec = int(argv[0]), Path(argv[1]), argv[2]
    try:
        answer: dict[str, Any] = {"kernels": [describe(k) for k in load_spec(spec, rootdir, each=True)]}
    except GemmSpecError as exc:
        answer = {"error": str(exc)}
    with os.fdopen(fd, "w") as out:
        out.write(json.dumps(answer))
    return 0


if __name__ == "__main__":  # run as the package's module, so its classes are the loader's
    from pytest_gemm.kernels.declare_child import main as _main

    sys.exit(_main(sys.argv[1:]))
