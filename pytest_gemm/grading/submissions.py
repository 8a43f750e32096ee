"""A class's submissions: finding them in a folder, and the pytest command that grades one."""
from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence


PLUGIN = "gemm"  # pytest-gemm's pytest11 entry point (pyproject.toml)


@dataclass(frozen=True)
class Submission:
    student: str
    kernel_file: Path | None     # None: nothing to run (see problem)
    problem: str | None = None



def find_submissions(root: Path, filename: str = "kernel.py") -> list[Submission]:
    """One per subfolder (its ``filename``) or top-level ``.py`` file, sorted by name."""
    found = []
    for entry in sorted(root.iterdir(), key=lambda p: p.name):
        if entry.name.startswith((".", "_")):
            continue
        if entry.is_dir():
            target = entry / filename
            if target.is_file():
                found.append(Submission(entry.name, target.resolve()))
            else:
                present = sorted(p.name for p in entry.iterdir() if p.suffix == ".py")
                found.append(Submission(entry.name, None, f"no {filename} in {entry}"
                                        + (f" (found {', '.join(present)}; see --file)" if present else "")))
        elif entry.suffix == ".py" and entry.is_file():
            found.append(Submission(entry.stem, entry.resolve()))
    return found


def build_command(kernel_file: Path | str, attr: str, results_path: Path | str, *,
                  check_timeout: float | None = None, ini: Path | str | None = None,
                  extra_args: Sequence[str] = (), python: str | None = None) -> list[str]:
    """The pytest command line that grades one submission into ``results_path``. It loads
    pytest-gemm's plugin by name (``-p gemm``, its entry point), so that it runs whether or not
    pytest loads the installed plugins by itself (``students.grade_one`` turns that off)."""
    cmd = [python or sys.executable, "-m", "pytest", "--gemm-kernel", f"{kernel_file}:{attr}",
           "--gemm-gradescope", str(results_path)]
    if check_timeout is not None:
        cmd += ["--gemm-timeout", f"{check_timeout:g}"]
    cmd += ["-p", "no:cacheprovider", "-p", PLUGIN, "-q"]
    if ini is not None:
        cmd += ["-c", str(ini), "--rootdir", str(Path(ini).parent)]
    return cmd + list(extra_args)
