"""The GPU-wide lock taken by the judging process for a confined kernel's child
(checks/lock_broker.py): the lock's files are not in the child's sandbox, so a submission cannot
hold the lock from its import or a daemon; a confined timed check still waits its turn, uncharged
to its timeout, and its hold is the parent's (the parent's pid in the lock log); a child killed
mid-hold leaves the lock free. No GPU: the fake GPU's checks (tests/fakegpu.py) take the lock
as checks/speed.py does; the confinements are real."""
from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

import fakegpu
from pytest_gemm.checks import sandbox
from pytest_gemm.kernels import confine
from pytest_gemm.measure import gpu_lock as lock_module
from pytest_gemm.measure.gpu_lock import LOCK_DIR_ENV, LOG_ENV, gpu_key, gpu_lock, lock_paths
from pytest_gemm.model.categories import GemmCheckFailure

LEVELS = [pytest.param(level, marks=pytest.mark.skipif(confine.why_not(level) is not None,
                                                          reason=f"{level}: {confine.why_not(level)}"))
          for level in ("bubblewrap", "landlock")]

TAKE = textwrap.dedent("""
    import sys, time
    from pytest_gemm.measure.gpu_lock import gpu_lock
    asked = time.monotonic()
    with gpu_lock(True, what="another student"):
        print(round(time.monotonic() - asked, 3), flush=True)
        open(sys.argv[1], "w").close()
        time.sleep(float(sys.argv[2]))
""")


def _other_student(env: dict[str, str], tmp_path: Path, hold_s: float) -> tuple[subprocess.Popen, Path]:
    """Another process that takes the GPU lock alone and holds it ``hold_s``: (it, its flag file)."""
    flag = tmp_path / f"holding-{time.monotonic_ns()}"
    proc = subprocess.Popen([sys.executable, "-c", TAKE, str(flag), str(hold_s)], env=env,
                            stdout=subprocess.PIPE, text=True)
    return proc, flag


def _wait_for(proc: subprocess.Popen, flag: Path, limit_s: float) -> float | None:
    """Seconds the other process waited for the lock, or None if it had not got it within ``limit_s``."""
    deadline = time.monotonic() + limit_s
    while not flag.exists():
        if time.monotonic() > deadline or proc.poll() is not None:
            return None
        time.sleep(0.02)
    assert proc.stdout is not None
    return float(proc.stdout.readline())


def _lock_free_for_another(env: dict[str, str], tmp_path: Path) -> float | None:
    proc, flag = _other_student(env, tmp_path, 0.0)
    try:
        return _wait_for(proc, flag, 15.0)  # its own start-up included; the wait it reports is the point
    finally:
        proc.kill()
        proc.wait()


def _client(folder: Path, kernel: str, env: dict[str, str], source: str = fakegpu.FAKE_KERNELS) -> sandbox.SandboxClient:
    (folder / "fake_kernels.py").write_text(source)
    return sandbox.SandboxClient(f"fake_kernels.py:{kernel}", 0, str(folder), env=env)


@pytest.fixture
def lock_env(tmp_path, monkeypatch) -> dict[str, str]:
    """The child's environment (the fake GPU's, the lock beside ``tmp_path``, outside the
    submission's folder) and the same lock folder and log for this, the judging, process."""
    log = tmp_path / "lock.jsonl"
    env = fakegpu.env(tmp_path, PYTEST_GEMM_LOCK_LOG=str(log))
    monkeypatch.setenv(LOCK_DIR_ENV, env[LOCK_DIR_ENV])
    monkeypatch.setenv(LOG_ENV, str(log))  # a gradebook sets it for its judging processes too
    # this process judges: the folders its PYTHONPATH names are what a confined child may import
    # from (kernels/confine.py), and the child's dispatch is fakegpu's, in tests/ (a clean clone
    # with no PYTHONPATH set bound only pytest_gemm/: CI at f8b3c1d, "No module named 'fakegpu'")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(Path(fakegpu.__file__).parent),
                                                      os.environ.get("PYTHONPATH", "")]))
    return env


def _holds(env: dict[str, str]) -> list[dict]:
    path = Path(env[LOG_ENV])
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


@pytest.mark.parametrize("level", LEVELS)
def test_a_confined_timed_check_waits_its_turn_uncharged_and_the_parent_holds_for_it(
        tmp_path, open_folder, lock_env, monkeypatch, level):
    monkeypatch.setattr(confine, "_active", level)
    client = _client(open_folder, "slow", lock_env)  # its speed check holds the lock alone 0.3 s
    holder = None
    try:
        client.start()
        holder, flag = _other_student(lock_env, tmp_path, 2.0)  # longer than the check's 1 s timeout
        assert _wait_for(holder, flag, 30) is not None
        started = time.monotonic()
        client.run("speed", [64, 64, 64], {}, {}, timeout=1.0)
        took = time.monotonic() - started
    finally:
        client.stop()
        if holder is not None:
            holder.wait(timeout=30)
    assert took >= 1.5                        # it did wait for the other holder...
    assert 0.3 <= client.last_seconds < 1.0  # ...its own time is the check's 0.3 s...
    assert client.last_lock_wait_s >= 1.0     # ...and the child said it waited
    holds = _holds(lock_env)
    assert {h["pid"] for h in holds} == {os.getpid(), holder.pid}, holds  # nothing logged by the child
    ours = [h for h in holds if h["pid"] == os.getpid()]
    other = next(h for h in holds if h["pid"] == holder.pid)
    assert [h["kind"] for h in ours] == ["x"] and ours[0]["held"] >= other["released"] - 0.01, holds


HOSTILE = fakegpu.FAKE_KERNELS + textwrap.dedent('''
    import fcntl, os, sys, threading, time
    from pytest_gemm.measure.gpu_lock import gpu_lock, lock_paths, running_path, warming_path

    _KEPT = []


    def _attack(when):
        for path in (*lock_paths(), running_path(), warming_path()):
            for flags in (os.O_RDWR | os.O_CREAT, os.O_RDONLY):
                try:
                    fd = os.open(path, flags)
                except OSError as exc:
                    print(when, "open failed:", path.name, type(exc).__name__, flush=True)
                    continue
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    _KEPT.append(fd)
                    print(when, "flocked", path.name, flush=True)
                except OSError as exc:
                    print(when, "flock failed:", path.name, type(exc).__name__, flush=True)
        if os.environ.get("GEMM_HOSTILE_ATTACK") == "files":
            return
        if when == "daemon":  # a request written straight to the parent, outside any check
            os.write(int(sys.argv[2]), b'{"lock": "acquire", "exclusive": true, "what": "raw"}\\n')
            print(when, "raw request sent", flush=True)
        try:
            hold = gpu_lock(True, what="hostile")
            hold.__enter__()  # never left
            _KEPT.append(hold)
            print(when, "gpu_lock held", flush=True)
        except Exception as exc:
            print(when, "gpu_lock failed:", exc, flush=True)


    def _daemon():
        time.sleep(1.0)  # after its process is loaded and prepared: the parent is idle
        _attack("daemon")


    _attack("import")
    threading.Thread(target=_daemon, daemon=True).start()
''')


@pytest.mark.parametrize("attack", ["files", "files and requests"])
@pytest.mark.parametrize("level", LEVELS)
def test_a_hostile_confined_submission_cannot_hold_the_gpu_lock(tmp_path, open_folder, lock_env, monkeypatch, level,
                                                               attack):
    # files: it opens and flocks the lock's files (bound writable into its sandbox before, it held
    # the lock from its import); requests: it also asks for the lock at import and, from a daemon,
    # writes a request straight to its parent outside any check
    monkeypatch.setattr(confine, "_active", level)
    client = _client(open_folder, "ok", dict(lock_env, GEMM_HOSTILE_ATTACK=attack), HOSTILE)
    try:
        client.start()  # imported: its attack at import has run
        time.sleep(2.0)  # its daemon's too
        waited = _lock_free_for_another(lock_env, tmp_path)
        alive, output = client.alive, client.output_tail(limit=6000)
    finally:
        client.stop()
    assert alive, output  # it was loaded all along
    assert waited is not None and waited < 2.0, f"another process waited {waited} s for the lock:\n{output}"
    assert "import flock failed" in output or "import open failed" in output, output
    assert "daemon flock failed" in output or "daemon open failed" in output, output
    assert "flocked" not in output and "gpu_lock held" not in output, output
    if attack != "files":
        assert "import gpu_lock failed: gpu_lock: the judging process refused the GPU lock" in output, output
        assert "daemon raw request sent" in output, output
    assert not lock_module._HELD  # this process took nothing for it


@pytest.mark.parametrize("level", LEVELS)
def test_a_confined_child_timing_out_while_it_holds_the_lock_leaves_it_free(
        tmp_path, open_folder, lock_env, monkeypatch, level):
    monkeypatch.setattr(confine, "_active", level)
    client = _client(open_folder, "hang", lock_env)  # its speed check takes the lock alone, then hangs
    try:
        with pytest.raises(GemmCheckFailure, match=r"\[timeout\] speed at 64x64x64 did not finish within 1 s"):
            client.run("speed", [64, 64, 64], {}, {}, timeout=1.0)
    finally:
        client.stop()
    assert not lock_module._HELD
    waited = _lock_free_for_another(lock_env, tmp_path)
    assert waited is not None and waited < 1.0
    assert [h["kind"] for h in _holds(lock_env) if h["pid"] == os.getpid()] == ["x"]  # it was the parent's


@pytest.mark.parametrize("level", LEVELS)
def test_a_confined_child_killed_while_it_holds_the_lock_leaves_it_free(
        tmp_path, open_folder, lock_env, monkeypatch, level):
    monkeypatch.setattr(confine, "_active", level)
    client = _client(open_folder, "hang", lock_env)
    client.start()
    lock = lock_paths(gpu_key(lock_env), lock_env[LOCK_DIR_ENV])[0]

    def kill_once_held() -> None:
        deadline = time.monotonic() + 60
        while lock_module._HELD.get(lock) is not True and time.monotonic() < deadline:
            time.sleep(0.02)
        os.killpg(client.proc.pid, 9)

    killer = threading.Thread(target=kill_once_held, daemon=True)
    killer.start()
    try:
        with pytest.raises(GemmCheckFailure, match=r"\[fault\] speed at 64x64x64: the process was killed"):
            client.run("speed", [64, 64, 64], {}, {}, timeout=60.0)
    finally:
        client.stop()
        killer.join(timeout=60)
    assert not lock_module._HELD
    waited = _lock_free_for_another(lock_env, tmp_path)
    assert waited is not None and waited < 1.0


# ---- the broker alone: what it grants, when --------------------------------------------------

class _Pipe:
    """The broker's side of a child's request pipe, and what the child would read from it."""

    def __init__(self) -> None:
        r, w = os.pipe()
        self.writer, self.reader = os.fdopen(w, "w", buffering=1), os.fdopen(r, "r")

    def answer(self) -> dict:
        return json.loads(self.reader.readline())

    def close(self) -> None:
        self.writer.close()
        self.reader.close()


def _taken_elsewhere(env: dict[str, str]) -> bool:
    """Is the lock held (exclusively or shared)? An exclusive try on a file of its own says."""
    path = lock_paths(gpu_key(env), env[LOCK_DIR_ENV])[0]
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)


def test_the_broker_grants_only_during_a_check_and_ends_the_hold_with_it(lock_env, monkeypatch):
    from pytest_gemm.checks import lock_broker
    from pytest_gemm.checks.lock_broker import LockBroker

    monkeypatch.setattr(lock_broker, "PAUSE_LIMIT_S", 0.2)
    broker, pipe = LockBroker(lock_env), _Pipe()
    acquire = {"lock": "acquire", "exclusive": True, "what": "speed"}
    try:
        broker.handle(acquire, pipe.writer)  # while the kernel loads
        assert pipe.answer()["lock"] == "refused" and not _taken_elsewhere(lock_env)
        with broker.during_check():
            broker.handle(acquire, pipe.writer)
            assert pipe.answer() == {"lock": "ok"} and _taken_elsewhere(lock_env)
            broker.handle(acquire, pipe.writer)  # a second hold: refused, the first kept
            assert pipe.answer()["lock"] == "refused" and _taken_elsewhere(lock_env)
            stepped = time.monotonic()
            broker.handle({"lock": "step_aside", "pause_s": 1e9}, pipe.writer)  # the parent sleeps it: bounded
            assert pipe.answer() == {"lock": "ok", "stepped": True} and _taken_elsewhere(lock_env)
            assert 0.2 <= time.monotonic() - stepped < 2.0
        assert not _taken_elsewhere(lock_env)  # the check ended: its hold with it
        broker.handle(acquire, pipe.writer)  # after the check's reply
        assert pipe.answer()["lock"] == "refused" and not _taken_elsewhere(lock_env)
    finally:
        broker.end()
        pipe.close()


def test_the_broker_refuses_an_exclusive_hold_inside_the_shared_one_of_a_correctness_check(lock_env):
    from pytest_gemm.checks.lock_broker import LockBroker

    broker, pipe = LockBroker(lock_env), _Pipe()
    try:
        with gpu_lock(False, what="exact"), broker.during_check():  # the parent's guard
            broker.handle({"lock": "acquire", "exclusive": True, "what": "x"}, pipe.writer)
            assert "exclusive asked for inside a shared hold" in pipe.answer()["why"]
            broker.handle({"lock": "acquire", "exclusive": False, "what": "s"}, pipe.writer)
            assert pipe.answer() == {"lock": "ok"}  # shared inside shared: passes through
    finally:
        broker.end()
        pipe.close()


def test_a_child_that_does_not_read_its_answers_gets_nothing_more(lock_env):
    from pytest_gemm.checks.lock_broker import LockBroker

    broker, pipe = LockBroker(lock_env), _Pipe()
    try:
        with broker.during_check():
            for _ in range(5000):  # unread answers would fill the pipe and block the judging process
                broker.handle({"lock": "acquire", "exclusive": False, "what": "flood"}, pipe.writer)
            assert pipe.answer() == {"lock": "ok"}
            broker.handle({"lock": "release"}, pipe.writer)
            assert not _taken_elsewhere(lock_env)
            broker.handle({"lock": "acquire", "exclusive": True, "what": "x"}, pipe.writer)  # read: answered again
            assert pipe.answer() == {"lock": "ok"} and _taken_elsewhere(lock_env)
    finally:
        broker.end()
        pipe.close()


def test_an_unconfined_child_is_refused_it_takes_the_lock_itself(lock_env):
    from pytest_gemm.checks.lock_broker import LockBroker

    broker, pipe = LockBroker(None), _Pipe()
    try:
        with broker.during_check():
            broker.handle({"lock": "acquire", "exclusive": True, "what": "x"}, pipe.writer)
            assert "takes the GPU lock itself" in pipe.answer()["why"] and not _taken_elsewhere(lock_env)
    finally:
        pipe.close()
