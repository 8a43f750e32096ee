"""The package's shape (CONTRIBUTING.md): dependencies point one way between the role packages,
no import circle between modules, no private name imported across modules, no module over 400
lines. Read from the source with ast: no GPU, nothing imported."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "pytest_gemm"
LAYERS = ("model", "judges", "kernels", "measure", "checks", "outputs", "grading", "runner")
MAX_LINES = 400


def _modules() -> dict[str, Path]:
    return {".".join(p.relative_to(PACKAGE.parent).with_suffix("").parts).removesuffix(".__init__"): p
            for p in PACKAGE.rglob("*.py")}


def _imports(name: str, path: Path) -> list[tuple[str, list[str]]]:
    """(module imported, names imported from it) for every pytest_gemm import, function-level too."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.startswith("pytest_gemm"):
                found.append((target, [a.name for a in node.names]))
        elif isinstance(node, ast.Import):
            found += [(a.name, []) for a in node.names if a.name.startswith("pytest_gemm")]
    return found


def _layer(module: str) -> int:
    parts = module.split(".")
    if len(parts) < 2:
        return len(LAYERS) + 1  # pytest_gemm itself: its __init__ re-exports the public names
    if parts[1] in LAYERS:
        return LAYERS.index(parts[1])
    return len(LAYERS)  # plugin.py


def _resolve(target: str, names: list[str], modules: dict[str, Path]) -> list[str]:
    """The modules an import reaches: ``from pkg import mod`` reaches pkg.mod."""
    reached = [f"{target}.{n}" for n in names if f"{target}.{n}" in modules]
    return reached or [target]


def test_dependencies_point_one_way():
    modules = _modules()
    wrong = []
    for name, path in modules.items():
        for target, names in _imports(name, path):
            for reached in _resolve(target, names, modules):
                if _layer(reached) > _layer(name):
                    wrong.append(f"{name} imports {reached}")
    assert not wrong, "\n".join(wrong)


def test_no_import_circle():
    modules = _modules()
    graph = {name: {r for t, ns in _imports(name, path) for r in _resolve(t, ns, modules) if r in modules and r != name}
             for name, path in modules.items()}
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if nxt.endswith("__init__") or nxt in ("pytest_gemm",):
                continue
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if state.get(nxt) is None and (cycle := visit(nxt)):
                return cycle
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if state.get(node) is None and (cycle := visit(node)):
            pytest.fail("import circle: " + " -> ".join(cycle))


def test_no_private_name_is_imported_across_modules():
    modules = _modules()
    private = [f"{name} imports {target}.{n}" for name, path in modules.items()
               for target, names in _imports(name, path) for n in names if n.startswith("_")]
    assert not private, "\n".join(private)


@pytest.mark.parametrize("name", sorted(_modules()))
def test_no_module_is_over_400_lines(name: str):
    lines = len(_modules()[name].read_text().splitlines())
    assert lines <= MAX_LINES, f"{name} has {lines} lines"


#: Imports inside functions in files others are editing now (issue 49): the lead adds each one's
#: reason (or moves it to the top) and removes it here; an entry whose import has its reason fails.
AWAITING_A_REASON: dict[str, int] = {}


def _unexplained_function_imports(package: Path) -> dict[str, list[str]]:
    """Per file: each import inside a function whose line, or the comment line above, gives no reason
    (``# lazy: ...`` or ``# cycle: ...``). An import stays in a function only for a reason:
    CuPy or numpy kept out of the plugin's load, an optional package, a test that replaces the
    name on its module, a rare path; otherwise it belongs at the module's top."""
    found: dict[str, list[str]] = {}
    for path in sorted(package.rglob("*.py")):
        lines = path.read_text().splitlines()
        starts = {node.lineno for fn in ast.walk(ast.parse("\n".join(lines)))
                  if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef))
                  for node in ast.walk(fn) if isinstance(node, (ast.Import, ast.ImportFrom))}
        for line in sorted(starts):
            above = lines[line - 2] if line > 1 else ""
            said = lines[line - 1] + (above if above.lstrip().startswith("#") else "")
            if "# lazy:" not in said and "# cycle:" not in said:
                found.setdefault(path.relative_to(package).as_posix(), []).append(f"{line}: {lines[line - 1].strip()}")
    return found


def test_every_import_inside_a_function_says_why():
    found = _unexplained_function_imports(PACKAGE)
    unexplained = [f"pytest_gemm/{name}:{line}" for name, lines in found.items()
                   if name not in AWAITING_A_REASON for line in lines]
    assert not unexplained, ("imports inside functions with no '# lazy: <why>' or '# cycle: <module> imports "
                             "this one' on their line or the line above (move them to the top, or say why):\n"
                             + "\n".join(unexplained))
    stale = {name: n for name, n in AWAITING_A_REASON.items() if len(found.get(name, [])) != n}
    assert not stale, f"AWAITING_A_REASON is out of date (files: unexplained imports now): { {k: len(found.get(k, [])) for k in stale} }"


def test_an_import_with_no_reason_is_caught(tmp_path: Path):
    (tmp_path / "mod.py").write_text("import os\n\n\ndef f():\n    import json\n\n    # lazy: optional (scipy)\n"
                                     "    import scipy\n    from . import g  # cycle: g imports this one\n"
                                     "    import re  # lazy: only on this rare path\n    import csv\n    return json, scipy, g, os, re, csv\n")
    assert _unexplained_function_imports(tmp_path) == {"mod.py": ["5: import json", "11: import csv"]}


def test_the_plugin_and_its_verdicts_load_without_numpy_or_cupy():
    """The pytest process that collects, judges and writes the report loads the plugin and, at the
    first test report, the verdict (runner/results.py -> outputs/records.py -> outputs/verdicts.py):
    none of them may pull in numpy or CuPy (DESIGN: lazy CUDA imports; the judges' numpy stays in
    the kernel's process). A constant the verdict shares with judges/bounds.py once did, and a test
    whose pytester restored sys.modules then broke the next import of numpy in that process."""
    import subprocess
    import sys

    code = ("import sys, pytest_gemm.plugin, pytest_gemm.runner.results, pytest_gemm.outputs.records\n"
            "print(sorted(m for m in ('numpy', 'cupy', 'scipy') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          cwd=PACKAGE.parent)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]", done.stdout
