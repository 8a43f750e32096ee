"""Every tool in tools/ and bench/ starts, with no GPU: each Python tool answers ``--help``, each
shell script answers ``--help`` (gpu_session.sh its usage too), every project import a tool makes
(at the top or inside a function) resolves, and each folder's README.md lists every file there.
No GPU."""
from __future__ import annotations

import ast
import importlib
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TOOLS = ROOT / "tools"
BENCH = ROOT / "bench"
#: The kinds each folder's README.md gives its lines: tools/ holds upkeep and the project's
#: benchmarks, bench/ the research on the reference kernels.
KINDS = {TOOLS: ("upkeep", "benchmark"), BENCH: ("tool", "kernels", "notes", "package")}
PER_TOOL_S = 60
#: What git ignores in tools/ and bench/ and what a run leaves there (CUTLASS's build, bytecode).
_NOT_TOOLS = {"__pycache__", "build", "README.md"}


def _tool_files(folders: tuple[Path, ...] = (TOOLS, BENCH)) -> list[Path]:
    found = []
    for folder in folders:
        for path in sorted(folder.rglob("*")):
            rel = path.relative_to(folder)
            if path.is_file() and not _NOT_TOOLS & set(rel.parts) and path.suffix != ".pyc":
                found.append(path)
    return found


def _python_tools() -> list[Path]:
    return [p for p in _tool_files() if p.suffix == ".py"]


def _is_command(path: Path) -> bool:
    return "__main__" in path.read_text()


def _env() -> dict[str, str]:
    # no device visible: --help that touches CUDA fails here on a GPU machine too
    return {**os.environ, "PYTHONPATH": str(ROOT), "CUDA_VISIBLE_DEVICES": ""}


@pytest.mark.parametrize("folder", [TOOLS, BENCH], ids=lambda f: f.name)
def test_the_readme_lists_every_tool_and_nothing_else(folder: Path):
    readme = (folder / "README.md").read_text()
    listed = re.findall(r"^- `([\w./-]+)` \((%s)\): \S" % "|".join(KINDS[folder]), readme, re.M)
    names = [name for name, _ in listed]
    files = [str(p.relative_to(folder)) for p in _tool_files((folder,))]
    where = f"{folder.name}/README.md"
    assert len(names) == len(set(names)), f"{where} lists a file twice"
    assert not set(files) - set(names), f"{where} does not list {sorted(set(files) - set(names))}: add one line each"
    assert not set(names) - set(files), f"{where} lists files that are gone: {sorted(set(names) - set(files))}"


def test_every_python_tool_answers_help_with_no_gpu():
    """All at once (the subprocesses mostly wait on imports), each within PER_TOOL_S."""
    tools = _python_tools()
    assert len(tools) >= 20 and any(p.parent == BENCH for p in tools)
    procs = {p: subprocess.Popen([sys.executable, str(p), "--help"], cwd=str(ROOT), env=_env(), text=True,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE) for p in tools}
    failed = []
    for path, proc in procs.items():
        try:
            out, err = proc.communicate(timeout=PER_TOOL_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            failed.append(f"{path.relative_to(ROOT)}: no answer to --help in {PER_TOOL_S} s")
            continue
        if proc.returncode != 0:
            failed.append(f"{path.relative_to(ROOT)} --help: exit {proc.returncode}: {err.strip()[-400:]}")
        elif _is_command(path) and not out.startswith("usage:"):
            failed.append(f"{path.relative_to(ROOT)} --help printed no usage (does it parse its arguments "
                          f"before it acts?): {out[:200]!r}")
    assert not failed, "\n".join(failed)


def _project_imports(path: Path) -> list[tuple[int, str, tuple[str, ...]]]:
    """(line, module, names) of every import of pytest_gemm or reference_kernels in ``path``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module, tuple(a.name for a in node.names)))
        elif isinstance(node, ast.Import):
            found.extend((node.lineno, a.name, ()) for a in node.names)
    return [f for f in found if f[1].split(".")[0] in ("pytest_gemm", "reference_kernels")]


def _unresolved(module: str, names: tuple[str, ...]) -> str | None:
    if importlib.util.find_spec(module) is None:
        return f"no module {module}"
    mod = importlib.import_module(module)
    package = hasattr(mod, "__path__")
    missing = [n for n in names if n != "*" and not hasattr(mod, n)
               and not (package and importlib.util.find_spec(f"{module}.{n}") is not None)]
    return f"{module} has no {', '.join(missing)}" if missing else None


def test_every_project_import_of_a_tool_resolves():
    """--help stops before a tool's function-level imports: a moved module would pass it."""
    failed = []
    for path in _python_tools():
        for line, module, names in _project_imports(path):
            try:
                why = _unresolved(module, names)
            except ImportError as exc:
                why = f"{module}: {exc}"
            if why:
                failed.append(f"{path.relative_to(ROOT)}:{line}: {why}")
    assert not failed, "\n".join(failed)


def test_the_import_check_sees_a_moved_module(tmp_path):
    """What made bench/mma_sync_peak.py fail: an import, inside main(), of a module that moved."""
    tool = tmp_path / "stale.py"
    tool.write_text("def main():\n    from reference_kernels.cublas import cublas_fp16\n"
                    "    from pytest_gemm.measure.cublas import cublas_fp33\n")
    found = [(line, _unresolved(module, names)) for line, module, names in _project_imports(tool)]
    assert found == [(2, "no module reference_kernels.cublas"), (3, "pytest_gemm.measure.cublas has no cublas_fp33")]


@pytest.mark.parametrize("script", [p for p in _tool_files() if p.suffix == ".sh"], ids=lambda p: p.name)
def test_every_shell_tool_answers_help(script: Path, tmp_path):
    done = subprocess.run(["bash", str(script), "--help"], cwd=str(tmp_path), env=_env(), text=True,
                          capture_output=True, timeout=PER_TOOL_S)
    assert done.returncode == 0, done.stderr
    assert len(done.stdout.splitlines()) >= 3 and not list(tmp_path.iterdir()), done.stdout


def _session_stages() -> tuple[list[str], list[str]]:
    script = (TOOLS / "gpu_session.sh").read_text()
    stages = re.search(r'^stages="([\w -]+)"$', script, re.M)
    assert stages, "tools/gpu_session.sh: its stage list moved"
    branches = re.findall(r"^    ([\w-]+)\)$", script, re.M)
    return stages.group(1).split(), branches


def test_gpu_session_says_its_usage_and_runs_nothing_without_a_stage(tmp_path):
    for args in ([], ["no-such-stage"]):
        done = subprocess.run(["bash", str(TOOLS / "gpu_session.sh"), *args], cwd=str(tmp_path), env=_env(),
                              text=True, capture_output=True, timeout=PER_TOOL_S)
        assert done.returncode == 2 and "usage: bash tools/gpu_session.sh STAGE..." in done.stderr, done.stderr
        assert not list(tmp_path.iterdir())  # not even its output folder
    stages, _ = _session_stages()
    assert "|".join(stages) in done.stderr


def test_gpu_session_has_one_branch_per_stage():
    stages, branches = _session_stages()
    assert sorted(stages) == sorted(branches), (stages, branches)


def continued_into_a_comment(text: str) -> list[int]:
    """Lines (1-based) of a shell script that end in a backslash with a comment line next: the
    continuation ends at the comment, so ``VAR=x \\`` there becomes a plain assignment and the
    command below runs without it (gpu_session.sh at 6fd4208 lost its GPU lock log so)."""
    lines = text.splitlines()
    return [n for n, (line, after) in enumerate(zip(lines, lines[1:]), 1)
            if line.rstrip().endswith("\\") and not line.lstrip().startswith("#") and after.lstrip().startswith("#")]


def test_no_shell_tool_continues_a_command_into_a_comment():
    found = {str(p.relative_to(ROOT)): n for p in _tool_files() if p.suffix == ".sh"
             if (n := continued_into_a_comment(p.read_text()))}
    assert not found, f"a line continued into a comment (move the comment above the command): {found}"
    assert continued_into_a_comment('A=1 \\\n  # why\nrun\nB=2 \\\n  run\n') == [1]
