"""The ladder's files and its declarations agree, with no GPU and no compiler.

A rung is one numbered file in reference_kernels/ (``NN_name.cu``, NN its place in the ladder)
and one declaration in reference_kernels/__init__.py (``name = CudaKernel(source="NN_name.cu",
...)``; the order of the declarations is the ladder's order). Adding a rung touches exactly:

1. ``reference_kernels/NN_name.cu``: the kernel, its header's first line ``// Rung NN, ...`` and a
   line ``// Over rung NN-1 ...`` saying the one idea it adds;
2. its declaration in ``reference_kernels/__init__.py`` (CUDA_RUNGS and ``__all__`` follow from it);
3. its row in reference_kernels/README.md's table, in ladder order (tests/test_ladder_offline.py).

A rung placed anywhere but last renumbers the files after it (``git mv``; the CUDA rungs come
before the Hopper rung, so a new CUDA rung renumbers at least the Hopper rung's file): then every file
of the repository that names a rung's file by its old name is listed, to be fixed, and so is every
``rung N (NN_x.cu)`` whose numbers disagree and every copy of a rung's first line (bench/candidates)
left at its old number; CONTRIBUTING.md's worked example is held to the ladder as it is. Each
failure below names the file to add or fix.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Iterator

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
    return [f"{rel}:{number}: {name}" for rel, number, line in text_lines(root, skip)
            for name in _NAMED.findall(line) if name not in present]


def text_lines(root: Path, skip: set[Path]) -> Iterator[tuple[Path, int, str]]:
    """(path relative to ``root``, line number, line) of every text file under ``root`` but
    ``skip``, hidden folders and build output."""
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if (path.suffix not in _TEXT or path in skip or not path.is_file()
                or any(part in _SKIP_DIRS or part.startswith(".") for part in rel.parts)):
            continue
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            yield rel, number, line


def test_no_file_names_a_rung_file_that_is_not_there():
    stale = stale_rung_names(ROOT, FOLDER, {Path(__file__).resolve(), ROOT / "CONTRIBUTING.md"})
    assert not stale, ("these name a rung's file that reference_kernels/ does not have (renumbered or "
                       "renamed? name the new file):\n" + "\n".join(stale))


def example_names_not_there(text: str, folder: Path, new_stem: str) -> list[str]:
    """The rung files ``text`` (CONTRIBUTING.md) names that neither exist in ``folder``, nor are the
    worked example's new rung (``NN_<new_stem>.cu``), nor are a rung's file renumbered one place on
    (``NN+1_x.cu`` for ``NN_x.cu``: the example renumbers the rungs after the new one)."""
    present = {p.name: int(p.name[:2]) for p in folder.glob("*.cu") if _NUMBERED.match(p.name)}
    by_stem = {name[3:]: number for name, number in present.items()}
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        for name in _NAMED.findall(line):
            stem, at = name[3:], int(name[:2])
            if name not in present and stem != f"{new_stem}.cu" and by_stem.get(stem) != at - 1:
                found.append(f"CONTRIBUTING.md:{number}: {name}")
    return found


def test_contributing_names_the_ladder_as_it_is():
    # CONTRIBUTING.md's worked example adds `NN_splitk.cu` and renumbers the rungs after it; every
    # other name of a rung's file there (where things live, the example's starting point) must exist
    stale = example_names_not_there((ROOT / "CONTRIBUTING.md").read_text(), FOLDER, "splitk")
    assert not stale, ("CONTRIBUTING.md names a rung's file that reference_kernels/ does not have: the ladder "
                       "was renumbered; name the files as they are now (the worked example too):\n" + "\n".join(stale))


def test_a_renumbered_ladder_makes_contributing_stale(tmp_path):
    for number, name in enumerate(["01_a.cu", "02_b.cu"], 1):
        _rung(tmp_path, name, number)
    text = "ladder 01_a.cu .. 02_b.cu\nadd 02_splitk.cu: 02_b.cu becomes 03_b.cu\nold 03_a.cu, 01_b.cu\n"
    assert example_names_not_there(text, tmp_path, "splitk") == ["CONTRIBUTING.md:3: 03_a.cu",
                                                                "CONTRIBUTING.md:3: 01_b.cu"]


#: ``rung N (NN_x.cu)``: a rung named by its number and its file, which must agree.
_NUMBER_AND_FILE = re.compile(r"\brung (\d+) \((\d\d)_\w+\.cu\)", re.IGNORECASE)
#: ``// Rung 6, vectorized: ...``: a rung's first line, or a copy of it (bench/candidates).
_RUNG_LINE = re.compile(r"^// Rung (\d+), ([^:]+):")


def rung_number_mismatches(root: Path, folder: Path, skip: set[Path]) -> list[str]:
    """``path:line: why`` where a text file under ``root`` gives a rung a number its file does not
    have: ``rung 5 (06_x.cu)``, or a copy of a rung's first line (``// Rung N, name:``, as
    bench/candidates' copies keep it) whose number is not that rung's any more."""
    names_at = {}
    for path in folder.glob("*.cu"):
        match = _RUNG_LINE.match(path.read_text().split("\n", 1)[0])
        if match:
            names_at[int(match.group(1))] = match.group(2)
    found = []
    for rel, number, line in text_lines(root, skip):
        found += [f"{rel}:{number}: rung {said} is not its file's number ({file}_...)"
                  for said, file in _NUMBER_AND_FILE.findall(line) if int(said) != int(file)]
        match = _RUNG_LINE.match(line)
        if match and (root / rel).parent != folder and names_at.get(int(match.group(1))) != match.group(2):
            found.append(f"{rel}:{number}: `// Rung {match.group(1)}, {match.group(2)}:` is not rung "
                         f"{match.group(1)}'s first line (copied before a renumbering?)")
    return found


def test_every_rung_number_agrees_with_its_file():
    wrong = rung_number_mismatches(ROOT, FOLDER, {Path(__file__).resolve()})
    assert not wrong, "these give a rung a number that is not its file's now:\n" + "\n".join(wrong)


def test_a_copied_header_left_at_its_old_number_is_found(tmp_path):
    folder = tmp_path / "reference_kernels"
    folder.mkdir()
    _rung(folder, "01_a.cu", 1)
    (folder / "02_b.cu").write_text("// Rung 2, b: a kernel.\n// Over rung 1 (01_a.cu): one idea.\n")
    (tmp_path / "bench").mkdir()
    (tmp_path / "bench" / "b.cu").write_text("// Rung 2, b: a kernel.\n// Over rung 1 (02_a.cu): stale\n")
    (tmp_path / "bench" / "c.cu").write_text("// Rung 1, b: a kernel.\n")
    assert rung_number_mismatches(tmp_path, folder, set()) == [
        "bench/b.cu:2: rung 1 is not its file's number (02_...)",
        "bench/c.cu:1: `// Rung 1, b:` is not rung 1's first line (copied before a renumbering?)"]


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
