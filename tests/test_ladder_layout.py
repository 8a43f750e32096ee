"""The ladder's files and its declarations agree, with no GPU and no compiler.

A rung is one numbered file in reference_kernels/ (``NN_name.cu``, NN its place in the ladder)
and one declaration in reference_kernels/__init__.py (``name = CudaKernel(source="NN_name.cu",
...)``; the order of the declarations is the ladder's order). Adding a rung touches exactly:

1. ``reference_kernels/NN_name.cu``: the kernel, its header's first line ``// Rung NN, ...`` and a
   line ``// Over rung NN-1 ...`` saying the one idea it adds;
2. its declaration in ``reference_kernels/__init__.py`` (CUDA_RUNGS and ``__all__`` follow from it);
3. its row in reference_kernels/README.md's table, in ladder order (tests/test_ladder_offline.py).

A rung placed anywhere but last renumbers the files after it (``git mv``; the CUDA rungs come
before the Hopper rung, so a new CUDA rung renumbers at least ``12_wgmma.cu``): then every file
of the repository that names a rung's file by its old name is listed, to be fixed. Each failure
below names the file to add or fix.
"""
from __future__ import annotations

import re
from pathlib import Path

import reference_kernels

FOLDER = Path(reference_kernels.__file__).resolve().parent
_NUMBERED = re.compile(r"^(\d\d)_\w+\.cu$")


def declared_sources() -> list[str]:
    """The .cu files of the declared ladder, in ladder order, each once."""
    sources: list[str] = []
    for rung in reference_kernels.CUDA_RUNGS:
        sources.append(str(rung.source))
    for rung in reference_kernels.HOPPER_RUNGS:
        sources.extend(str(build.source) for build in rung.builds)
    return list(dict.fromkeys(sources))


def ladder_problems(folder: Path, declared: list[str]) -> list[str]:
    """What disagrees between the .cu files in ``folder`` and the declared sources, in words."""
    problems = []
    files = sorted(p.name for p in folder.glob("*.cu"))
    for name in files:
        if not _NUMBERED.match(name):
            problems.append(f"{name}: a rung's file is numbered in ladder order (NN_name.cu); rename it "
                            f"with git mv, or move a file no rung uses to bench/")
        elif name not in declared:
            problems.append(f"{name} has no declaration: add `name = CudaKernel(source=\"{name}\", ...)` to "
                            f"reference_kernels/__init__.py at its place in the ladder, and its row to README.md's table")
    for name in declared:
        if name not in files:
            problems.append(f"a declared rung's source {name} is not a file of reference_kernels/")
    numbered = [n for n in declared if _NUMBERED.match(n)]
    numbers = [int(_NUMBERED.match(n).group(1)) for n in numbered]
    if numbers != list(range(1, len(numbers) + 1)):
        problems.append(f"the declared ladder's files, in ladder order, are numbered {numbers}, not "
                        f"1..{len(numbers)}: renumber the files (git mv) or reorder the declarations")
    for name in files:
        match = _NUMBERED.match(name)
        if not match:
            continue
        head = (folder / name).read_text().splitlines()[:40]
        number = int(match.group(1))
        if not head or not re.match(rf"// Rung {number}\b", head[0]):
            problems.append(f"{name}: its first line says `// Rung {number}, ...` (the rung's number)")
        if number > 1 and not any(re.match(rf"// Over rung {number - 1}\b", line) for line in head):
            problems.append(f"{name}: its header says the one idea over the previous rung "
                            f"(a line `// Over rung {number - 1} ...`)")
    return problems


ROOT = FOLDER.parent
# Where a rung's file may be named: every text file of the repository but this test (its fake
# rungs) and CONTRIBUTING.md (its worked example names files that do not exist yet).
_NAMED = re.compile(r"\b\d\d_\w+\.cu\b")
_TEXT = {".py", ".cu", ".cuh", ".md", ".sh", ".toml", ".ini", ".txt", ".json", ".cfg"}
_SKIP_DIRS = {".git", ".venv", "venv", "build", "dist", "node_modules", "__pycache__", "gpu-out"}


def stale_rung_names(root: Path, folder: Path, skip: set[Path]) -> list[str]:
    """``path:line: NAME`` for every rung file named in a text file under ``root`` that ``folder``
    does not have (a renumbered rung's old name, say)."""
    present = {p.name for p in folder.glob("*.cu")}
    found = []
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if (path.suffix not in _TEXT or path in skip or not path.is_file()
                or any(part in _SKIP_DIRS or part.startswith(".") for part in rel.parts)):
            continue
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            found += [f"{rel}:{number}: {name}" for name in _NAMED.findall(line) if name not in present]
    return found


def test_no_file_names_a_rung_file_that_is_not_there():
    stale = stale_rung_names(ROOT, FOLDER, {Path(__file__).resolve(), ROOT / "CONTRIBUTING.md"})
    assert not stale, ("these name a rung's file that reference_kernels/ does not have (renumbered or "
                       "renamed? name the new file):\n" + "\n".join(stale))


def test_a_renumbered_rung_is_found_where_it_is_still_named(tmp_path):
    folder = tmp_path / "reference_kernels"
    folder.mkdir()
    _rung(folder, "01_a.cu", 1)
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "ladder.md").write_text("see 01_a.cu\nthen 02_old.cu, renumbered\n")
    (tmp_path / ".hidden").mkdir()
    (tmp_path / ".hidden" / "x.md").write_text("03_gone.cu\n")
    assert stale_rung_names(tmp_path, folder, set()) == ["docs/ladder.md:2: 02_old.cu"]


def test_every_cuda_kernel_declared_is_a_rung():
    # CUDA_RUNGS is read from the module's globals where it is defined: a declaration placed below
    # that line would be no rung (no LADDER, no by_name) and nothing would say so
    declared = {name for name, v in vars(reference_kernels).items() if isinstance(v, reference_kernels.CudaKernel)}
    rungs = {name for name, v in vars(reference_kernels).items() if any(v is r for r in reference_kernels.CUDA_RUNGS)}
    assert declared == rungs, (f"{sorted(declared - rungs)}: declared below the `CUDA_RUNGS =` line of "
                               f"reference_kernels/__init__.py; move each above it, at its place in the ladder")


def test_the_numbered_files_are_the_declared_ladder():
    assert not ladder_problems(FOLDER, declared_sources()), "\n".join(ladder_problems(FOLDER, declared_sources()))


def _rung(folder: Path, name: str, number: int) -> None:
    over = f"// Over rung {number - 1}: one idea.\n" if number > 1 else ""
    (folder / name).write_text(f"// Rung {number}, x: a kernel.\n{over}extern \"C\" __global__ void k() {{}}\n")


def test_a_rung_file_with_no_declaration_fails(tmp_path):
    _rung(tmp_path, "01_a.cu", 1)
    _rung(tmp_path, "02_b.cu", 2)
    (problem,) = ladder_problems(tmp_path, ["01_a.cu"])
    assert problem.startswith("02_b.cu has no declaration: add `name = CudaKernel(source=\"02_b.cu\"")


def test_a_declared_rung_with_no_file_fails(tmp_path):
    _rung(tmp_path, "01_a.cu", 1)
    assert ladder_problems(tmp_path, ["01_a.cu", "02_b.cu"]) == [
        "a declared rung's source 02_b.cu is not a file of reference_kernels/"]


def test_numbering_against_the_declared_order_fails(tmp_path):
    _rung(tmp_path, "01_a.cu", 1)
    _rung(tmp_path, "02_b.cu", 2)
    (problem,) = ladder_problems(tmp_path, ["02_b.cu", "01_a.cu"])
    assert "numbered [2, 1], not 1..2" in problem


def test_an_unnumbered_file_and_a_header_without_its_idea_fail(tmp_path):
    _rung(tmp_path, "01_a.cu", 1)
    (tmp_path / "02_b.cu").write_text("// Rung 2, b: no line about the previous rung.\n")
    (tmp_path / "variant.cu").write_text("// a build no rung uses\n")
    problems = ladder_problems(tmp_path, ["01_a.cu", "02_b.cu"])
    assert [p.split(":")[0] for p in problems] == ["variant.cu", "02_b.cu"]
    assert "// Over rung 1" in problems[1]
