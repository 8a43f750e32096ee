"""Each kernel's own compile caches under confinement (kernels/confine.py ``compile_caches``): a
confined process's scratch starts empty, so without them every process of a kernel compiled the
harness's CuPy kernels and every Triton config again; with them a kernel's processes (xdist
workers, restarts) share CuPy's and Triton's caches, and no other kernel sees them."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from pytest_gemm.kernels import cache_seed, confine


@pytest.fixture
def run_folder(monkeypatch):
    """The run's folder as ``run_compile_caches`` makes it: in the temporary directory, passable by
    the sandbox's own user (pytest's tmp_path is closed to it: root graders run it as another)."""
    base = Path(tempfile.mkdtemp(prefix="gemm-test-caches-"))
    os.chmod(base, 0o711)
    monkeypatch.setenv(confine.COMPILE_CACHES_ENV, str(base))
    yield base
    shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def folder(open_folder):
    """A submission's folder the sandbox's user may read."""
    return open_folder


def test_a_kernels_caches_are_its_own_and_the_same_for_each_of_its_processes(run_folder):
    mine = confine.compile_caches("/course/alice/kernel.py")
    again = confine.compile_caches("/course/alice/kernel.py")
    other = confine.compile_caches("/course/bob/kernel.py")
    assert mine == again != other
    assert Path(mine).parent == Path(other).parent == run_folder
    for folder in (mine, other):
        assert (Path(folder) / "cupy").is_dir() and (Path(folder) / "triton").is_dir()
    assert confine.cache_env(mine) == {"CUPY_CACHE_DIR": f"{mine}/cupy", "TRITON_CACHE_DIR": f"{mine}/triton"}
    assert confine.cache_env(None) == {}


def test_the_runs_folder_is_made_once_inherited_and_removed_when_its_maker_ends(tmp_path):
    code = ("import os, subprocess, sys; from pytest_gemm.kernels import confine; "
            "base = confine.run_compile_caches(); assert confine.run_compile_caches() == base; "
            "child = subprocess.run([sys.executable, '-c', 'import os; print(os.environ[\"PYTEST_GEMM_COMPILE_CACHES\"])'], "
            "capture_output=True, text=True).stdout.strip(); print(base, child, oct(os.stat(base).st_mode & 0o777))")
    env = {k: v for k, v in os.environ.items() if k != confine.COMPILE_CACHES_ENV}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    base, inherited, mode = done.stdout.split()
    assert inherited == base and mode == "0o711"
    assert not os.path.exists(base)  # removed when the process that made it ended


def test_bubblewrap_binds_the_kernels_caches_and_points_cupy_and_triton_there(run_folder, folder):
    caches = confine.compile_caches("k.py")
    cmd = confine.command(["true"], readable=[folder], chdir=folder, level="bubblewrap", caches=caches)
    assert cmd[cmd.index(caches) - 1] == "--bind"
    setenv = [(cmd[i + 1], cmd[i + 2]) for i, word in enumerate(cmd) if word == "--setenv"]
    assert ("CUPY_CACHE_DIR", f"{caches}/cupy") in setenv and ("TRITON_CACHE_DIR", f"{caches}/triton") in setenv
    assert ("CUPY_CACHE_DIR", "/tmp/.cupy") not in setenv and ("HOME", "/tmp") in setenv  # the rest stays scratch


def test_landlock_may_write_the_kernels_caches_and_its_boot_points_cupy_and_triton_there(run_folder, folder):
    caches = confine.compile_caches("k.py")
    cmd = confine.command(["true"], readable=[folder], chdir=folder, level="landlock", caches=caches)
    plan = json.loads(cmd[cmd.index("pytest_gemm.kernels.confine_boot") + 1])
    assert caches in plan["write"] and plan["env"] == confine.cache_env(caches)
    assert confine.command(["true"], readable=[folder], chdir=folder, level="none", caches=caches) == ["true"]


@pytest.mark.skipif(confine.why_not("bubblewrap") is not None, reason=f"bubblewrap: {confine.why_not('bubblewrap')}")
def test_under_bubblewrap_a_kernels_next_process_finds_what_its_first_cached_and_another_kernel_does_not(
        run_folder, folder):
    write = "import os; open(os.path.join(os.environ['CUPY_CACHE_DIR'], 'kern.cubin'), 'w').write('cubin')"
    read = ("import os; d = os.environ['CUPY_CACHE_DIR']; "
            "print(os.path.exists(os.path.join(d, 'kern.cubin')), os.path.exists(sys_argv_other))")

    def confined(key: str, code: str) -> subprocess.CompletedProcess:
        cmd = confine.command([sys.executable, "-c", code], readable=[folder], chdir=folder, level="bubblewrap",
                              caches=confine.compile_caches(key))
        return subprocess.run(cmd, capture_output=True, text=True, timeout=60, **confine.popen_kwargs("bubblewrap"))

    assert confined("alice.py", write).returncode == 0
    alice = confine.compile_caches("alice.py")
    assert (Path(alice) / "cupy" / "kern.cubin").read_text() == "cubin"
    probe = read.replace("sys_argv_other", repr(f"{alice}/cupy/kern.cubin"))
    again, bob = confined("alice.py", probe), confined("bob.py", probe)
    assert again.stdout.split() == ["True", "True"], again.stderr
    assert bob.stdout.split() == ["False", "False"], bob.stderr  # neither in its own cache nor through alice's path


# CuPy's kernel cache (cupy/cuda/_compiler_cache.py, DiskKernelCacheBackend): save writes a
# NamedTemporaryFile (mode 0600) and renames it; load opens the file if it exists. Triton's
# (triton/runtime/cache.py, FileCacheManager): a folder per kernel (os.makedirs, 0755), and put
# writes through a temporary folder made inside it.
_CUPY_SAVE = ("import os, tempfile; d = os.environ['CUPY_CACHE_DIR']; "
              "tf = tempfile.NamedTemporaryFile(dir=d, delete=False); tf.write(b'cubin'); tf.close(); "
              "os.replace(tf.name, os.path.join(d, 'kern.cubin')); "
              "os.makedirs(os.path.join(os.environ['TRITON_CACHE_DIR'], 'KEY'), exist_ok=True)")
_CUPY_LOAD = ("import os; d = os.environ['CUPY_CACHE_DIR']; p = os.path.join(d, 'kern.cubin'); "
              "print(open(p, 'rb').read() if os.path.exists(p) else None); "
              "t = os.path.join(os.environ['TRITON_CACHE_DIR'], 'KEY'); os.makedirs(t, exist_ok=True); "
              "os.makedirs(os.path.join(t, 'tmp.pid_1'), exist_ok=True)")


@pytest.mark.skipif(confine.why_not("bubblewrap") is not None, reason=f"bubblewrap: {confine.why_not('bubblewrap')}")
def test_under_bubblewrap_two_workers_users_of_one_kernel_each_use_its_caches(run_folder, folder, monkeypatch):
    """Run by root, bubblewrap runs each xdist worker's kernel process as a user of its own
    (``sandbox_uid``, from the worker's pid): what one worker's process cached (CuPy: readable by
    its owner only) must not make the other's fail with PermissionError."""
    def confined(uid: int, code: str) -> subprocess.CompletedProcess:
        monkeypatch.setattr(confine, "sandbox_uid", lambda: uid if os.geteuid() == 0 else None)
        cmd = confine.command([sys.executable, "-c", code], readable=[folder], chdir=folder, level="bubblewrap",
                              caches=confine.compile_caches("alice.py", level="bubblewrap"))
        return subprocess.run(cmd, capture_output=True, text=True, timeout=60, **confine.popen_kwargs("bubblewrap"))

    first = confined(confine.SANDBOX_UID_BASE + 11, _CUPY_SAVE)
    assert first.returncode == 0, first.stderr
    again = confined(confine.SANDBOX_UID_BASE + 11, _CUPY_LOAD)  # the same worker's next process
    assert again.returncode == 0 and again.stdout.split() == ["b'cubin'"], again.stderr
    other = confined(confine.SANDBOX_UID_BASE + 12, _CUPY_LOAD)  # another worker's
    assert other.returncode == 0, other.stderr


# ---- the gradebook's seed (kernels/cache_seed.py): each kernel's CuPy cache starts as a copy --------

SEED_FILES = {"0f1e.cubin": b"hash+cubin of a fill kernel", "9a8b.cubin": b"hash+cubin of a compare kernel"}
LEVELS = [pytest.param(level, marks=pytest.mark.skipif(confine.why_not(level) is not None,
                                                          reason=f"{level}: {confine.why_not(level)}"))
          for level in ("bubblewrap", "landlock")]


@pytest.fixture
def seed(monkeypatch):
    """A planted seed as the gradebook's priming run leaves it: a folder of the grader's only, in
    the temporary directory, of files CuPy wrote for their owner only; named to the run."""
    made = Path(tempfile.mkdtemp(prefix="gemm-test-seed-"))
    for name, payload in SEED_FILES.items():
        (made / name).write_bytes(payload)
        os.chmod(made / name, 0o600)
    (made / "not-a-cache-file").mkdir()
    monkeypatch.setenv(cache_seed.SEED_ENV, str(made))
    yield made
    shutil.rmtree(made, ignore_errors=True)


def test_each_kernels_cupy_cache_starts_as_a_copy_of_the_seed_of_its_own(run_folder, seed):
    alice, bob = (Path(confine.compile_caches(key)) / "cupy" for key in ("alice.py", "bob.py"))
    for cache in (alice, bob):
        assert {p.name: p.read_bytes() for p in cache.iterdir()} == SEED_FILES  # files only, no leftovers
        for path in cache.iterdir():
            st = path.lstat()
            assert not path.is_symlink() and st.st_nlink == 1 and st.st_mode & 0o777 == 0o644, path
    name = next(iter(SEED_FILES))
    (alice / name).write_bytes(b"poisoned by alice")  # a submission may change its own copy only
    assert (seed / name).read_bytes() == SEED_FILES[name] and (bob / name).read_bytes() == SEED_FILES[name]
    confine.compile_caches("alice.py")  # alice's next process: its cache is its own, not copied again
    assert (alice / name).read_bytes() == b"poisoned by alice"


def test_a_file_cupy_is_still_writing_in_the_seed_is_not_copied_and_a_later_process_gets_what_came_since(
        run_folder, seed):
    """The priming runs fill the seed beside the class: CuPy writes each file under a temporary
    name ("tmp...") and renames it whole, so a copy never takes a half-written one."""
    (seed / "tmpk2x9_q").write_bytes(b"half a cubin")
    cache = Path(confine.compile_caches("carol.py")) / "cupy"
    assert {p.name for p in cache.iterdir()} == set(SEED_FILES)
    (seed / "tmpk2x9_q").rename(seed / "77aa.cubin")  # CuPy's os.replace once written
    confine.compile_caches("carol.py")  # carol's next kernel process (after a fault, say)
    assert (cache / "77aa.cubin").read_bytes() == b"half a cubin" and len(list(cache.iterdir())) == 3


def test_before_each_check_a_kernels_cache_takes_what_the_seed_gained_since(run_folder, seed, monkeypatch):
    """A student of a class's first round starts with the seed as it is then (empty, at the
    class's start); ``reseed_confined`` (called before each of its checks) copies in what came since."""
    from pytest_gemm.checks import sandbox_confine

    cache = Path(confine.compile_caches("erin.py")) / "cupy"
    (cache / "own.cubin").write_bytes(b"erin's own compile")
    (seed / "5c5c.cubin").write_bytes(b"compiled by a priming run since")
    (seed / "own.cubin").write_bytes(b"the seed's")
    monkeypatch.setattr(confine, "active", lambda: "none")
    assert sandbox_confine.reseed_confined("erin.py") == 0  # unconfined: its cache is CuPy's own
    assert not (cache / "5c5c.cubin").exists()
    monkeypatch.setattr(confine, "active", lambda: "bubblewrap")
    assert sandbox_confine.reseed_confined("gemm:naive") == 0  # the shipped ladder is not confined
    assert sandbox_confine.reseed_confined("erin.py") == 1
    assert (cache / "5c5c.cubin").read_bytes() == b"compiled by a priming run since"
    assert (cache / "5c5c.cubin").stat().st_mode & 0o777 == 0o644
    assert (cache / "own.cubin").read_bytes() == b"erin's own compile"  # a file it has is its own
    assert sandbox_confine.reseed_confined("erin.py") == 0
    (cache / "6d6d.cubin").symlink_to(seed / "own.cubin")  # a link the kernel planted: left alone
    (seed / "6d6d.cubin").write_bytes(b"later still")
    assert sandbox_confine.reseed_confined("erin.py") == 0 and (cache / "6d6d.cubin").is_symlink()
    assert (seed / "own.cubin").read_bytes() == b"the seed's"
    monkeypatch.delenv(cache_seed.SEED_ENV)  # a run with no seed (no gradebook): nothing to do, nothing made
    before = sorted(run_folder.iterdir())
    assert sandbox_confine.reseed_confined("fay.py") == 0 and sorted(run_folder.iterdir()) == before


def test_with_no_seed_or_a_seed_gone_a_kernels_caches_start_empty(run_folder, monkeypatch):
    monkeypatch.setenv(cache_seed.SEED_ENV, str(run_folder / "removed-after-its-class"))
    assert not any((Path(confine.compile_caches("k.py")) / "cupy").iterdir())


@pytest.mark.parametrize("level", LEVELS)
def test_a_confined_kernel_reads_its_seeded_cache_and_cannot_reach_the_seed(run_folder, folder, seed, level):
    name = next(iter(SEED_FILES))
    code = ("import json, os, sys\n"
            "seed, cache = sys.argv[1], os.environ['CUPY_CACHE_DIR']\n"
            "def attempt(do):\n"
            "    try:\n        do()\n        return 'done'\n"
            "    except OSError as exc:\n        return type(exc).__name__\n"
            "print(json.dumps({'cache': {n: open(os.path.join(cache, n)).read() for n in sorted(os.listdir(cache))},\n"
            "    'exists': os.path.exists(seed), 'list': attempt(lambda: os.listdir(seed)),\n"
            f"    'read': attempt(lambda: open(os.path.join(seed, {name!r})).read()),\n"
            "    'write': attempt(lambda: open(os.path.join(seed, 'planted'), 'w').write('x'))}))\n")
    cmd = confine.command([sys.executable, "-c", code, str(seed)], readable=[folder], chdir=folder, level=level,
                          caches=confine.compile_caches("alice.py", level=level))
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=60, **confine.popen_kwargs(level))
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["cache"] == {n: p.decode() for n, p in SEED_FILES.items()}
    assert "done" not in (seen["list"], seen["read"], seen["write"]), seen
    if level == "bubblewrap":
        assert not seen["exists"]  # not bound: no such path (Landlock does not hide a path from stat)
    assert sorted(p.name for p in seed.iterdir()) == sorted([*SEED_FILES, "not-a-cache-file"])
