"""Resolve ``--gemm-kernel`` specs (``module:attr`` or ``path/to/file.py:attr``) into kernels.

Every way a spec can be wrong raises GemmSpecError with one message naming the
spec and the fix; the plugin turns it into a pytest.UsageError (no traceback).
"""
from __future__ import annotations

import ast
import dataclasses
import importlib
import importlib.util
import os
import sys
import threading
import traceback
from pathlib import Path
from types import ModuleType
from typing import Any

from ..model.contract import GemmKernel, is_kernel
from ..model.declaration import GemmSpecError
from .modules import looks_like_module, module_kernel
from .declared import is_bad, read_in_child
from .declared import BadDeclaration, declared_precision

#: The folders pytest-gemm ships beside its own package: the ladder and the conformance suite.
SHIPPED = ("reference_kernels", "conformance")
#: A spec for something shipped with pytest-gemm, found through its own files, never by a
#: top-level import that a user's folder of the same name could shadow:
#: ``gemm:reference_kernels:LADDER``.
SHIPPED_PREFIX = "gemm:"
#: The names the shipped packages are loaded under (not ``reference_kernels``: that name is
#: the user's to have).
SHIPPED_MODULE = "_pytest_gemm_shipped_{}"
#: Seconds of importing a spec's module in this process after which the run says it is waiting.
SAY_IMPORTING_AFTER = 5.0


def shipped_dir(name: str) -> Path:
    """The folder of a package shipped with pytest-gemm (``reference_kernels``, ``conformance``):
    the installed distribution's own files, beside ``pytest_gemm``."""
    if name not in SHIPPED:
        raise ValueError(f"{name!r} is not shipped with pytest-gemm; shipped: {', '.join(SHIPPED)}")
    here = Path(__file__).resolve().parent.parent.parent / name
    if not (here / "__init__.py").is_file():
        raise GemmSpecError(f"pytest-gemm's {name} folder is missing from {here.parent}; "
                            f"reinstall pytest-gemm: pip install --force-reinstall pytest-gemm")
    return here


def import_shipped(name: str) -> ModuleType:
    """The shipped package ``name``, loaded from :func:`shipped_dir` under its own module name.
    When ``import name`` already gave the shipped package (no folder shadows it), that module
    is returned, so the kernels are the same objects."""
    folder = shipped_dir(name)
    existing = sys.modules.get(name)
    if existing is not None and getattr(existing, "__file__", None) \
            and Path(existing.__file__).resolve().parent == folder:
        return existing
    return _load_as(SHIPPED_MODULE.format(name), folder / "__init__.py", package_dir=folder)


def import_shipped_module(name: str, path: Path) -> ModuleType:
    """A module file of the shipped package ``name`` (a conformance test module), loaded as
    ``_pytest_gemm_shipped_<name>.<stem>``: a user's package of the same name, imported by
    pytest as ``conformance.test_x``, never clashes with ours."""
    package = SHIPPED_MODULE.format(name)
    folder = shipped_dir(name)
    _load_as(package, folder / "__init__.py", package_dir=folder)
    return _load_as(f"{package}.{path.stem}", path)


def _load_as(modname: str, path: Path, package_dir: Path | None = None) -> ModuleType:
    """``path`` executed as the module ``modname`` (a package when ``package_dir`` is given),
    once per process; a module whose execution fails is not left in ``sys.modules``."""
    if modname in sys.modules:
        return sys.modules[modname]
    module_spec = importlib.util.spec_from_file_location(
        modname, path, submodule_search_locations=None if package_dir is None else [str(package_dir)])
    assert module_spec is not None and module_spec.loader is not None
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[modname] = module
    try:
        module_spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[modname]
        raise
    return module


def _where(exc: BaseException) -> str:
    """file:line of the innermost frame of an exception outside pytest-gemm, for import failures:
    a declaration pytest-gemm rejects (``tiles=``) is the user's line, not the check's."""
    frames = traceback.extract_tb(exc.__traceback__)
    if isinstance(exc, SyntaxError) and exc.filename:
        return f"{exc.filename}:{exc.lineno}"
    package = str(Path(__file__).resolve().parent.parent) + os.sep
    theirs = [f for f in frames if not str(Path(f.filename).resolve()).startswith(package)] or frames
    if not theirs:
        return "?"
    line = _keyword_line(theirs[-1].filename, theirs[-1].lineno or 0, getattr(exc, "keyword", None))
    return f"{theirs[-1].filename}:{line or theirs[-1].lineno}"


def _keyword_line(filename: str, lineno: int, keyword: str | None) -> int | None:
    """The line of ``keyword=`` in the call that starts at ``lineno`` of ``filename`` (a
    declaration written one keyword a line reports ``tiles=`` at its own line); None if not found."""
    if not keyword:
        return None
    try:
        tree = ast.parse(Path(filename).read_text())
    except (OSError, SyntaxError, ValueError):
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and node.lineno <= lineno <= (node.end_lineno or node.lineno):
            found = [k.lineno for k in node.keywords if k.arg == keyword]
            if found:
                return found[0]
    return None


#: Packages a kernel's module may import that an extra of pytest-gemm installs (its name in
#: pip install 'pytest-gemm[EXTRA]').
EXTRA_FOR_PACKAGE = {"triton": "triton", "torch": "torch", "numba": "numba", "cupy": "cuda12", "cupyx": "cuda12"}


def _import_failure(spec: str, what: str, exc: BaseException) -> GemmSpecError:
    """The error for a kernel's module that raised while importing; a package it imports that is
    not installed gets what to install, and in which Python (a newcomer's torch is often in
    another environment than the pytest they run)."""
    text = f"--gemm-kernel {spec!r}: importing {what} failed at {_where(exc)}: {type(exc).__name__}: {exc}"
    if isinstance(exc, ModuleNotFoundError) and exc.name:
        package = exc.name.split(".")[0]
        extra = EXTRA_FOR_PACKAGE.get(package)
        if extra == "cuda12":
            how = "pip install 'pytest-gemm[cuda12]' ('pytest-gemm[cuda13]' for a CUDA 13 driver)"
        elif extra:
            how = f"pip install 'pytest-gemm[{extra}]'"
        else:
            how = "install it there (or, if it is a file of yours, put it beside the kernel's file)"
        text += f"; {exc.name!r} cannot be imported by the Python running pytest ({sys.executable}): {how}"
    return GemmSpecError(text)


def _import_file(spec: str, path: Path) -> ModuleType:
    if not path.is_file():
        raise GemmSpecError(f"--gemm-kernel {spec!r}: file {str(path)!r} not found; "
                            "give a path relative to where pytest runs, e.g. kernels/mine.py:kernel")
    name = f"_gemm_user_{path.stem}_{abs(hash(str(path.resolve()))) % 10**8}"
    if name in sys.modules:
        return sys.modules[name]
    module_spec = importlib.util.spec_from_file_location(name, path)
    assert module_spec is not None and module_spec.loader is not None
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[name] = module
    if str(path.parent.resolve()) not in sys.path:
        sys.path.insert(0, str(path.parent.resolve()))  # so the file can import its neighbours
    try:
        module_spec.loader.exec_module(module)
    except (Exception, SystemExit) as exc:  # a module that calls sys.exit() at import is a bad spec too
        del sys.modules[name]
        raise _import_failure(spec, str(path), exc) from None
    return module


def _import_module(spec: str, modname: str, rootdir: Path) -> ModuleType:
    if str(rootdir) not in sys.path:
        sys.path.insert(0, str(rootdir))  # plain `pytest` does not put the cwd on sys.path
    try:
        return importlib.import_module(modname)
    except ModuleNotFoundError as exc:
        if exc.name and (modname == exc.name or modname.startswith(exc.name + ".")):
            raise GemmSpecError(
                f"--gemm-kernel {spec!r}: module {modname!r} not found (looked in {rootdir} and sys.path); "
                f"check the spelling, or give a file path such as path/to/{modname.split('.')[-1]}.py:attr"
            ) from None
        raise _import_failure(spec, repr(modname), exc) from None
    except (Exception, SystemExit) as exc:  # a module that calls sys.exit() at import is a bad spec too
        raise _import_failure(spec, repr(modname), exc) from None


def _kernel_names(module: ModuleType) -> list[str]:
    return sorted(n for n, v in vars(module).items() if is_kernel(v) or
                  (isinstance(v, (list, tuple, dict)) and v and all(is_kernel(x) for x in
                   (v.values() if isinstance(v, dict) else v))))


def _as_kernels(spec: str, attr: str, value: Any) -> list[GemmKernel]:
    if is_kernel(value):
        return [value]
    if isinstance(value, dict) and value:
        items = list(value.items())
    elif isinstance(value, (list, tuple)) and value:
        items = [(None, v) for v in value]
    else:
        items = []
    bad = [(k, v) for k, v in items if not is_kernel(v)]
    if not items or bad:
        what = bad[0][1] if bad else value
        hint = ("decorate it with @pytest_gemm.kernel(...)" if callable(what)
                else "make it a pytest_gemm.CudaKernel(...)")
        where = f"{attr}[{bad[0][0]!r}]" if bad and bad[0][0] is not None else attr
        raise GemmSpecError(
            f"--gemm-kernel {spec!r}: {where} is a {type(what).__name__}, not a kernel; {hint}, "
            "or point at a kernel, a list of kernels or a dict of them"
        )
    kernels = []
    for key, k in items:
        if key is not None:  # dict keys name the kernels
            k = dataclasses.replace(k, name=str(key))
        kernels.append(k)
    return kernels


def load_spec(spec: str, rootdir: Path | None = None, each: bool = False) -> list[GemmKernel]:
    """The kernels a spec names, each validated. With ``each``, a kernel whose declaration is
    wrong is a ``declared.BadDeclaration`` carrying its message (its tests fail with it, the
    others run) instead of ending the whole spec."""
    rootdir = (rootdir or Path.cwd()).resolve()
    target, sep, attr = spec.rpartition(":")
    if not sep or not target or not attr:
        raise GemmSpecError(
            f"--gemm-kernel {spec!r}: expected module:attr or path/to/file.py:attr, e.g. mymod:kernel"
        )
    if target.startswith(SHIPPED_PREFIX):
        try:
            module = import_shipped(target[len(SHIPPED_PREFIX):])
        except ValueError as exc:
            raise GemmSpecError(f"--gemm-kernel {spec!r}: {exc}") from None
    elif target.endswith(".py") or "/" in target or "\\" in target:
        path = Path(target)
        module = _import_file(spec, path if path.is_absolute() else rootdir / path)
    else:
        module = _import_module(spec, target, rootdir)
    value: Any = module
    for part in attr.split("."):
        if not hasattr(value, part):
            found = _kernel_names(module)
            hint = f"kernels it defines: {', '.join(found)}" if found else "it defines no kernels"
            raise GemmSpecError(f"--gemm-kernel {spec!r}: {module.__name__ if not target.endswith('.py') else target} "
                                f"has no attribute {attr!r}; {hint}")
        value = getattr(value, part)
    if looks_like_module(value):  # a KernelBench-style solution: solution.py:ModelNew
        try:
            value = module_kernel(value, name=attr.rsplit(".", 1)[-1],
                                  init_inputs=getattr(module, "get_init_inputs", None))
        except GemmSpecError as exc:
            raise GemmSpecError(f"--gemm-kernel {spec!r}: {exc}") from None
    kernels: list[Any] = _as_kernels(spec, attr, value)
    for index, k in enumerate(kernels):
        try:
            k.validate()
        except GemmSpecError as exc:
            if not each:
                raise GemmSpecError(f"--gemm-kernel {spec!r}: {exc}") from None

            k = kernels[index] = BadDeclaration(str(k.name), f"--gemm-kernel {spec!r}: {exc}",
                                                precision=declared_precision(getattr(k, "precision", None)))
        k.origin_spec = (spec, index)  # how a sandbox process finds the same kernel again
    return kernels


def _load_saying_if_slow(spec: str, rootdir: Path) -> list[GemmKernel]:
    """``load_spec`` in this process; a module whose top level runs long (a hang, a slow import)
    is not waited on in silence: after a few seconds the run says what it is waiting for."""
    def say() -> None:
        print(f"pytest-gemm: --gemm-kernel {spec!r}: importing it has taken {SAY_IMPORTING_AFTER:g} s so far; "
              "its module's top-level code runs in this process, so --gemm-timeout does not bound it "
              "(Ctrl-C stops the run)", file=sys.stderr, flush=True)

    timer = threading.Timer(SAY_IMPORTING_AFTER, say)
    timer.daemon = True
    timer.start()
    try:
        return load_spec(spec, rootdir, each=True)
    finally:
        timer.cancel()


def load_specs(specs: list[str], rootdir: Path | None = None, in_child: bool = False) -> list[GemmKernel]:
    """Kernels of all specs, with unique display names (a repeated name gets a suffix). A kernel
    whose declaration is wrong is a ``BadDeclaration`` (its tests fail, the others run), unless
    every kernel is: then there is nothing to test, and the first one's message ends the run.
    ``in_child``: the specs are imported by a confined child process, never by this one."""

    kernels: list[GemmKernel] = []
    seen: dict[str, int] = {}
    root = (rootdir or Path.cwd()).resolve()
    loaded = [k for spec in specs for k in (
        read_in_child(spec, root) if in_child and not spec.startswith(SHIPPED_PREFIX)  # ours: trusted
        else _load_saying_if_slow(spec, root))]
    if loaded and all(is_bad(k) for k in loaded):
        raise GemmSpecError(loaded[0].message)  # type: ignore[union-attr]
    for k in loaded:
        count = seen.get(str(k.name), 0)
        seen[str(k.name)] = count + 1
        if count:
            renamed = dataclasses.replace(k, name=f"{k.name}-{count + 1}")
            renamed.__dict__.update((a, v) for a, v in vars(k).items() if a not in vars(renamed))  # origin_spec, ...
            k = renamed
        kernels.append(k)
    return kernels
