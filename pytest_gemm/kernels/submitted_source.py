"""What the judging process lets NVRTC do with a confined submission's CUDA source.

The judging process never runs submitted code, but it does compile submitted CUDA C with NVRTC
(the compile checks, the offline compile before any test): with the grader's own rights. Two
things a submission declares would reach the grader's files there:

- **options**: NVRTC's ``--time=FILE`` and ``--fdevice-time-trace=FILE`` append to any file (a
  ``.pth`` in site-packages runs in every later Python process), ``--create-pch`` and
  ``--pch-dir`` write, ``-I`` and ``--pre-include`` read from anywhere. Only options that touch no
  file are taken (``FLAGS``, ``WITH_VALUE``); any other makes the declaration wrong (its tests fail saying which);
- **includes**: ``#include "/path"``, ``"../other_student/kernel.py"``, a computed ``#include MACRO``
  or a header that is a link out of the folder would put another student's or the course's files
  into NVRTC's error log, which the student reads. Includes resolve in the submission's own
  folder (``-I`` to it, ``--no-source-include``: the source's name the submission chose adds no
  folder) and CUDA's headers; every ``#include`` and ``__has_include`` names a relative path with
  no ``..``, and one found in the folder must stay inside it once links are resolved (those
  files are read for their own includes in turn).

Pure (text and paths in, a reason out), tested with no GPU (tests/test_submitted_source.py).
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Sequence

#: Options that read or write no file: macros, the language standard, code generation, warnings.
FLAGS = frozenset({"-use_fast_math", "--use_fast_math", "-lineinfo", "--generate-line-info", "-extra-device-vectorization",
                   "--extra-device-vectorization", "-restrict", "--restrict", "-w", "--disable-warnings",
                   "--display-error-number", "--no-display-error-number", "-default-device",
                   "--device-as-default-execution-space", "-device-int128", "--device-int128", "-G", "--device-debug",
                   "-dc", "-dw", "--ptxas-options=-v", "-Xptxas=-v"})
WITH_VALUE = ("-D", "--define-macro=", "-U", "--undefine-macro=", "-std=", "--std=", "-ftz=", "--ftz=",
              "-prec-sqrt=", "--prec-sqrt=", "-prec-div=", "--prec-div=", "-fmad=", "--fmad=", "-maxrregcount=",
              "--maxrregcount=", "-dopt=", "--dopt=", "-diag-suppress=", "--diag-suppress=", "-diag-error=",
              "--diag-error=", "-diag-warn=", "--diag-warn=", "-rdc=", "--relocatable-device-code=", "-arch=",
              "--gpu-architecture=", "-builtin-move-forward=", "--builtin-move-forward=",
              "-builtin-initializer-list=", "--builtin-initializer-list=")
_INCLUDE = re.compile(r"^[ \t]*#[ \t]*include(?:_next)?\b[ \t]*(.*)$", re.M)
_HAS_INCLUDE = re.compile(r"__has_include(?:_next)?[ \t]*\([ \t]*([^)]*)\)")
_MAX_FILES = 200


def _allowed(option: str) -> bool:
    # "-D" takes any macro text: a macro is only text (a computed #include of it is refused below)
    return option in FLAGS or any(option.startswith(p) and len(option) > len(p) for p in WITH_VALUE)


def option_problem(options: Sequence[str]) -> str | None:
    """Why ``options`` cannot be given to NVRTC in the judging process, or None."""
    for option in options:
        if not isinstance(option, str) or not _allowed(option):
            return (f"the compile option {option!r} is not taken from a confined submission (it may read or write "
                    "files in the grading process); options that touch no file are: macros (-D, -U), -std=, "
                    "code generation (-use_fast_math, -ftz=, -maxrregcount=, -lineinfo, ...) and warnings; put "
                    "headers in your own folder and include them by a relative name")
    return None


def _joined(text: str) -> str:
    return text.replace("\\\r\n", "").replace("\\\n", "")  # a directive continued over lines is one line


def _target(spec: str) -> tuple[str, str] | None:
    """("<" or '"', the name) of an include's operand, or None for a computed one."""
    spec = spec.strip()
    match = re.match(r'^"([^"]*)"|^<([^>]*)>', spec)
    if not match:
        return None
    return ('"', match.group(1)) if match.group(1) is not None else ("<", match.group(2))


def include_problem(text: str, folder: Path) -> str | None:
    """Why the includes of ``text`` (and of the files it includes from ``folder``) could read a file
    outside ``folder`` or CUDA's headers, or None."""
    root = folder.resolve()
    pending: list[tuple[str, str]] = [(text, "the source")]
    seen: set[Path] = set()
    while pending:
        source, where = pending.pop()
        joined = _joined(source)
        operands = [m.group(1) for m in _INCLUDE.finditer(joined)] + [m.group(1) for m in _HAS_INCLUDE.finditer(joined)]
        for operand in operands:
            target = _target(operand)
            if target is None:
                return (f"{where}: '#include {operand.strip()}' is computed (a macro); include a header by its "
                        "name, in quotes or angle brackets")
            name = target[1]
            parts = Path(name).parts
            if not name or Path(name).is_absolute() or name.startswith(("\\", "~")) or ".." in parts or ":" in name:
                return (f"{where}: '#include {target[0]}{name}{'>' if target[0] == '<' else chr(34)}' names a file "
                        "outside your folder; include your own headers by a relative name inside it")
            found = root / name
            if found.exists() or found.is_symlink():
                real = found.resolve()
                if real != root and root not in real.parents:
                    return f"{where}: {name!r} is a link out of your folder; copy the header into it instead"
                if real.is_file() and real not in seen and len(seen) < _MAX_FILES:
                    seen.add(real)
                    try:
                        pending.append((real.read_text(errors="replace"), name))
                    except OSError:
                        pass  # NVRTC will say it cannot read it
    return None
