"""Confinement of every process that runs submitted code (docs/security.md says why and how).

Three levels, strongest first:

- ``bubblewrap``: ``bwrap`` (``PYTEST_GEMM_BWRAP``, else found on PATH) with new user, PID,
  network, mount, IPC and UTS namespaces, ``--die-with-parent``: a filesystem of read-only
  binds (the Python environment, the system and CUDA libraries, the submission's own folder),
  the GPU device files, and a size-limited tmpfs as ``/tmp`` (its scratch, ``HOME`` and
  ``TMPDIR``); nothing else of the machine is there (no other submissions, no home, no
  course files), and no network but a loopback that is down.
- ``landlock``: util-linux ``unshare`` (user, PID, network, mount, IPC namespaces; the child
  is killed with it) and Landlock through its maintained Python binding (``landlock``):
  read-only access to the same folders, write access to a scratch folder only, which gets a
  size-limited tmpfs of its own inside the mount namespace (``kernels/confine_boot.py``).
- ``none``: today's child processes, named as such in the terminal and the reports.

Both confinements run under resource limits set before the confining command starts
(``RLIMIT_NPROC`` tasks, ``RLIMIT_DATA`` memory, ``RLIMIT_FSIZE`` file size, no core files),
and, when the grader runs as root, as an unprivileged user of their own (``SANDBOX_UID_BASE``
plus the grading process's pid, under bubblewrap: Linux does not enforce ``RLIMIT_NPROC`` on
root, and counts it per user, so each student's processes get a user of their own). Every process a
submission starts lives in the confinement's PID namespace: when its first process ends, or
is killed, the kernel kills every other one, whether or not it left its session or group.
"""
from __future__ import annotations

import atexit
import glob
import hashlib
import json
import os
import resource
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Sequence

from .cache_seed import seed_cupy_cache

LEVELS = ("none", "landlock", "bubblewrap")  # weakest to strongest
CHOICES = ("auto", *LEVELS)
BWRAP_ENV = "PYTEST_GEMM_BWRAP"
SCRATCH_MB_ENV = "PYTEST_GEMM_SCRATCH_MB"
TASKS_ENV = "PYTEST_GEMM_MAX_TASKS"
MEMORY_MB_ENV = "PYTEST_GEMM_MEMORY_MB"
COMPILE_CACHES_ENV = "PYTEST_GEMM_COMPILE_CACHES"  # the run's per-kernel compile caches (compile_caches)
SANDBOX_UID_BASE = 200000
DEFAULT_SCRATCH_MB = 1024
DEFAULT_TASKS = 1024       # processes and threads (a CUDA process uses a few dozen)
SYSTEM_RO = ("/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32", "/etc/ld.so.cache", "/etc/ld.so.conf",
             "/etc/ld.so.conf.d", "/etc/alternatives", "/etc/localtime", "/usr/local/nvidia", "/sys", "/opt/conda")
DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom")

_active = "none"


def use(level: str) -> None:
    """Confine this process's later children at ``level`` (set once by the run's configuration)."""
    global _active
    if level not in LEVELS:
        raise ValueError(f"unknown confinement {level!r}; valid: {', '.join(LEVELS)}")
    _active = level


def active() -> str:
    return _active


def _env_int(name: str, default: int) -> int:
    try:
        return int(os.environ.get(name, "") or default)
    except ValueError:
        return default


def sandbox_uid() -> int | None:
    """The user submitted code runs as when this process is root (else None: its own user)."""
    return SANDBOX_UID_BASE + os.getpid() if os.geteuid() == 0 else None


def memory_limit_bytes() -> int:
    """``PYTEST_GEMM_MEMORY_MB`` (0: none), default half the machine's memory."""
    mb = _env_int(MEMORY_MB_ENV, -1)
    if mb < 0:
        try:
            return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2
        except (ValueError, OSError):
            return 0
    return mb * 2 ** 20


def _limits() -> Callable[[], None]:
    tasks, memory, scratch = _env_int(TASKS_ENV, DEFAULT_TASKS), memory_limit_bytes(), scratch_bytes()

    def apply() -> None:  # in the child, between fork and exec of the confining command
        resource.setrlimit(resource.RLIMIT_NPROC, (tasks, tasks))
        if memory:
            resource.setrlimit(resource.RLIMIT_DATA, (memory, memory))
        resource.setrlimit(resource.RLIMIT_FSIZE, (scratch, scratch))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    return apply


def scratch_env(scratch: str) -> dict[str, str]:
    """HOME, TMPDIR and the compile caches (CuPy, Triton, XDG) in the scratch: the grader's own
    would be outside the confinement, so a cache named there could not be written."""
    return {"HOME": scratch, "TMPDIR": scratch, "XDG_CACHE_HOME": f"{scratch}/.cache",
            "CUPY_CACHE_DIR": f"{scratch}/.cupy", "TRITON_CACHE_DIR": f"{scratch}/.triton"}


def compile_caches(key: str, level: str | None = None, seed: bool = True) -> str:
    """The kernel ``key``'s own compile caches for this run (CuPy's and Triton's): shared by its
    processes (xdist workers, restarts after a fault), by no other kernel. A confined process's
    scratch starts empty, so without them each of its processes compiled the harness's CuPy
    kernels and every Triton config again. The run's folder is ``PYTEST_GEMM_COMPILE_CACHES``:
    made by the first process that needs one (``run_compile_caches``), inherited by the
    processes it starts; only the key's own folder is bound into a sandbox. Where bubblewrap runs
    the kernel as a user of each worker's own (``sandbox_uid``, root's graders) the folder is that
    user's too: CuPy writes its cache files readable by their owner only (a ``NamedTemporaryFile``,
    mode 0600) and Triton a folder per kernel writable by its owner only, so another worker's user
    could neither read the one nor finish the other (PermissionError). A class graded by the
    gradebook starts each CuPy cache as a copy of its trusted seed (``kernels/cache_seed.py``; not
    with ``seed=False``)."""
    uid = sandbox_uid() if (level or _active) == "bubblewrap" else None
    name = key if uid is None else f"{key}\0uid {uid}"
    folder = Path(run_compile_caches()) / hashlib.sha256(name.encode()).hexdigest()[:20]
    for sub in (folder, folder / "cupy", folder / "triton"):
        sub.mkdir(exist_ok=True)
        os.chmod(sub, 0o1777)  # root's graders run the sandbox as a user of its own
    if seed:
        seed_cupy_cache(folder / "cupy")
    return str(folder)


def run_compile_caches() -> str:
    """This run's folder of per-kernel compile caches, made (and removed when this process ends)
    where ``PYTEST_GEMM_COMPILE_CACHES`` names none yet."""
    base = os.environ.get(COMPILE_CACHES_ENV, "")
    if not base or not os.path.isdir(base):
        base = tempfile.mkdtemp(prefix="pytest-gemm-compile-")
        os.chmod(base, 0o711)  # a sandbox's user may pass through to its own folder, not list the others
        os.environ[COMPILE_CACHES_ENV] = base
        atexit.register(shutil.rmtree, base, True)
    return base


def cache_env(caches: str | None) -> dict[str, str]:
    """CuPy's and Triton's cache folders in the kernel's own ``compile_caches`` (none: nothing)."""
    return {} if not caches else {"CUPY_CACHE_DIR": f"{caches}/cupy", "TRITON_CACHE_DIR": f"{caches}/triton"}


def scratch_bytes() -> int:
    return max(1, _env_int(SCRATCH_MB_ENV, DEFAULT_SCRATCH_MB)) * 2 ** 20


def bwrap_path() -> str | None:
    given = os.environ.get(BWRAP_ENV, "").strip()
    return given if given and os.access(given, os.X_OK) else (None if given else shutil.which("bwrap"))


def _probe(cmd: list[str]) -> str | None:
    """None when ``cmd`` runs confined as a submission would (same user, same limits), else why not."""
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=30, preexec_fn=_limits())
    except (OSError, subprocess.SubprocessError) as exc:
        return str(exc)
    return None if done.returncode == 0 else (done.stderr.strip().splitlines() or [f"status {done.returncode}"])[-1]


@lru_cache(maxsize=None)
def why_not(level: str) -> str | None:
    """None when ``level`` works on this machine, else the reason (one line, with what to do)."""
    if level == "none":
        return None
    if not sys.platform.startswith("linux"):
        return f"{level} needs Linux"
    if level == "bubblewrap":
        bwrap = bwrap_path()
        if bwrap is None:
            return (f"bwrap not found (set {BWRAP_ENV} to its path, or install bubblewrap: apt-get install bubblewrap)")
        problem = _probe(_bubblewrap(["true"], [], [], Path("/")))
        return None if problem is None else f"bwrap cannot make its namespaces here: {problem}"
    try:
        import landlock  # lazy: optional (landlock)
        abi = landlock.landlock_abi_version()
    except Exception as exc:  # noqa: BLE001 - not installed, or the kernel has no Landlock
        return f"Landlock is not usable ({type(exc).__name__}: {exc}); pip install landlock, on a kernel >= 5.13"
    if abi < 1 or shutil.which("unshare") is None:
        return "Landlock needs ABI >= 1 and util-linux's unshare"
    problem = _probe(["unshare", "--user", "--map-root-user", "--pid", "--fork", "--mount-proc", "--net", "true"])
    return None if problem is None else f"unshare cannot make user namespaces here: {problem}"


def strongest() -> str:
    return next(level for level in reversed(LEVELS) if why_not(level) is None)


def resolve(asked: str) -> str:
    """The level ``asked`` (``auto``: the strongest available); raises ValueError with why and what
    to do when a named one does not work here."""
    if asked == "auto":
        return strongest()
    problem = why_not(asked)
    if problem is not None:
        raise ValueError(f"confinement {asked!r} is not available on this machine: {problem}")
    return asked


def rank(level: str) -> int:
    return LEVELS.index(level)


def describe(level: str) -> str:
    return {"bubblewrap": "bubblewrap (user, PID, network, mount and IPC namespaces; read-only environment; "
                          "size-limited scratch)",
            "landlock": "Landlock with user, PID, network and mount namespaces (util-linux unshare); "
                        "size-limited scratch",
            "none": "none (submitted code runs as this user, with this machine's files and network)"}[level]


# ---- the command that starts a confined child ------------------------------------------------

def _python_paths() -> list[str]:
    """What the child must read to run Python and pytest-gemm: the interpreter's prefixes and the
    import path entries that are installed packages or the grader's own PYTHONPATH (never a
    test folder pytest put on sys.path: a course's hidden tests stay hidden)."""
    # pytest-gemm's own packages, not the folder holding them: installed from a checkout
    # (pip install -e), that folder is the checkout, with whatever else a course keeps there
    package_root = Path(__file__).resolve().parent.parent.parent
    packages = [str(package_root / name) for name in ("pytest_gemm", "reference_kernels", "conformance")]
    given = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    roots = {sys.prefix, sys.base_prefix, sys.exec_prefix, *packages, *given}
    for entry in sys.path:
        if entry and ("site-packages" in entry or "dist-packages" in entry):
            roots.add(entry)
    exe = os.path.realpath(sys.executable)
    roots.add(str(Path(exe).parent.parent))
    return sorted({os.path.realpath(p) for p in roots if os.path.isdir(p)})


def exposed_lock_dir(lock_dir: str, readable: Sequence[str] | None = None) -> str | None:
    """The folder a confined child reads that holds the GPU lock's folder ``lock_dir`` (it, or
    one it is inside), or None. ``readable`` defaults to what every confined child reads: the
    Python environment, CUDA and the system folders. A file that can be opened, even read-only,
    can be flocked: a submission could hold the lock from its import and stall every other
    kernel on that GPU."""
    folder = os.path.realpath(lock_dir)
    if readable is None:
        readable = _python_paths() + _cuda_paths() + [p for p in SYSTEM_RO if os.path.isdir(p)]
    for path in sorted({os.path.realpath(p) for p in readable}, key=len):
        if path != "/" and (folder == path or folder.startswith(path.rstrip("/") + "/")):
            return path
    return None


def _outermost(paths: Sequence[str]) -> list[str]:
    """Real paths, without those inside another one or inside the system folders (bound already)."""
    real = sorted({os.path.realpath(p) for p in paths if os.path.exists(p)})
    system = [os.path.realpath(p) for p in SYSTEM_RO if os.path.isdir(p)]
    return [p for p in real if not any(p != q and p.startswith(q.rstrip("/") + "/") for q in real + system)]


def _cuda_paths() -> list[str]:
    return sorted(set(glob.glob("/usr/local/cuda*")) | {p for p in ("/usr/local/nvidia",) if os.path.isdir(p)})


_SCRATCH_POINT: list[str] = []


def _scratch_point() -> str:
    """The empty folder each Landlock child mounts its own scratch tmpfs on, inside its own mount
    namespace: one per process that starts children, removed when it ends (a folder per child was
    left behind by each: 1,890 in this machine's /tmp)."""
    if not _SCRATCH_POINT or not os.path.isdir(_SCRATCH_POINT[0]):
        point = tempfile.mkdtemp(prefix="pytest-gemm-scratch-")
        os.chmod(point, 0o777)
        if not _SCRATCH_POINT:
            atexit.register(lambda: _SCRATCH_POINT and shutil.rmtree(_SCRATCH_POINT[0], ignore_errors=True))
        _SCRATCH_POINT[:] = [point]
    return _SCRATCH_POINT[0]


def command(cmd: Sequence[str], *, readable: Sequence[Path | str], chdir: Path,
            level: str | None = None, caches: str | None = None) -> list[str]:
    """``cmd`` wrapped in the active confinement (unchanged with ``none``): it may read
    ``readable`` and the Python environment, write its scratch only and its kernel's own
    ``caches`` (``compile_caches``); no file of the run's (the GPU lock is taken for it by its
    parent: ``checks/lock_broker.py``)."""
    level = level or _active
    if level == "none":
        return list(cmd)
    ro = _outermost(_python_paths() + _cuda_paths() + [str(Path(p).resolve()) for p in readable])
    own = [caches] if caches and os.path.isdir(caches) else []
    if level == "bubblewrap":
        return _bubblewrap(cmd, ro, own, chdir, cache_env(caches if own else None))
    scratch = _scratch_point()
    plan = {"read": sorted(set(ro + [p for p in SYSTEM_RO if os.path.exists(p)])), "write": [scratch, *own],
            "devices": sorted(glob.glob("/dev/nvidia*")) + list(DEVICES),
            "scratch": scratch, "scratch_bytes": scratch_bytes(), "chdir": str(chdir),
            "env": cache_env(caches if own else None)}
    return ["unshare", "--user", "--map-root-user", "--pid", "--fork", "--kill-child", "--mount-proc", "--net",
            "--ipc", "--", sys.executable, "-m", "pytest_gemm.kernels.confine_boot", json.dumps(plan), "--", *cmd]


def _bubblewrap(cmd: Sequence[str], ro: list[str], rw: list[str], chdir: Path,
                env: dict[str, str] | None = None) -> list[str]:
    """The bwrap command. Run by root, bwrap makes the namespaces but a user namespace (its
    mapped root would still be root to the kernel's process limit), and the command starts as
    the sandbox's own user (``setpriv``), which the mounts let read what it needs."""
    root = os.geteuid() == 0
    out = [bwrap_path() or "bwrap", "--die-with-parent", "--new-session", "--unshare-pid", "--unshare-net",
           "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
    out += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"] if root else ["--unshare-user"]
    out += ["--proc", "/proc", "--dev", "/dev", "--perms", "1777", "--size", str(scratch_bytes()), "--tmpfs", "/tmp"]
    targets = [p for p in SYSTEM_RO if os.path.exists(p)] + ro + rw
    for parent in sorted({str(a) for t in targets for a in Path(t).parents if str(a) not in ("/", "/tmp")}):
        out += ["--perms", "0755", "--dir", parent]  # bwrap would make them 0700: closed to the sandbox's user
    for path in SYSTEM_RO:
        out += ["--ro-bind-try", path, path]
    for dev in sorted(glob.glob("/dev/nvidia*")) + sorted(glob.glob("/dev/dri")):
        out += ["--dev-bind", dev, dev]
    for path in ro:
        out += ["--ro-bind", path, path]
    for path in rw:
        out += ["--bind", path, path]
    for name, value in {**scratch_env("/tmp"), **(env or {})}.items():
        out += ["--setenv", name, value]
    out += ["--chdir", str(chdir), "--"]
    uid = sandbox_uid()
    if uid is not None:
        out += ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--inh-caps=-all",
                "--bounding-set=-all", "--no-new-privs", "--"]
    return out + list(cmd)


def unreadable(folder: Path, level: str | None = None) -> str | None:
    """Why the sandbox's own user (root's graders, bubblewrap) cannot read ``folder``, or None."""
    if (level or _active) != "bubblewrap" or sandbox_uid() is None:
        return None
    try:
        mode = folder.stat().st_mode
    except OSError as exc:
        return f"{folder} cannot be read: {exc}"
    closed = folder if mode & 0o005 != 0o005 else _closed_inside(folder)
    if closed is not None:
        return (f"{closed} is closed to the sandbox's user (submitted code runs as uid {sandbox_uid()}, not root): "
                f"chmod -R o+rX {folder}")
    return None


SOURCE_SUFFIXES = frozenset({".py", ".cu", ".cuh", ".h", ".hpp", ".hh", ".c", ".cc", ".cpp", ".cxx", ".ptx", ".json"})


def _closed_inside(folder: Path, limit: int = 5000) -> Path | None:
    """The first source file under ``folder`` (``SOURCE_SUFFIXES``) that others cannot read, or a
    folder on its way that others cannot search: an unzipped submission's files are often of
    mode 0600. Hidden folders and whatever else lies there (a grader's own temporary files) are
    not the submission's code and are not looked at."""
    seen = 0
    for top, dirs, files in os.walk(folder):
        dirs[:] = [d for d in dirs if not d.startswith(".") and d != "__pycache__"]
        for name in files:
            seen += 1
            if seen > limit:
                return None
            path = Path(top) / name
            if path.suffix not in SOURCE_SUFFIXES:
                continue
            try:
                st = path.lstat()
            except OSError:
                continue
            if not stat.S_ISLNK(st.st_mode) and st.st_mode & 0o004 != 0o004:
                return path
            for parent in [*path.relative_to(folder).parents][:-1][::-1]:  # the folders on its way
                where = folder / parent
                if where.stat().st_mode & 0o005 != 0o005:
                    return where
    return None


def popen_kwargs(level: str | None = None) -> dict[str, Any]:
    """What ``subprocess.Popen`` needs besides the command: the limits and the user."""
    level = level or _active
    return {} if level == "none" else {"preexec_fn": _limits()}


def kill(proc: subprocess.Popen[Any]) -> None:
    """End a child started in its own session and every process it started: its group, and
    (confined) its PID namespace, whose processes die with its first one."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()
