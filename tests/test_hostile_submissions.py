"""Hostile submissions of ours (tests/hostile/<attack>/kernel.py), graded by the gradebook beside
honest ones on the fake GPU (tests/fakegpu.py: no GPU needed), under each confinement this
machine offers (docs/security.md). Each hostile kernel is wrong on purpose and names itself
"ok" (which the fake GPU passes) only when its attack worked, so a forged grade shows.

In every case: the honest students' gradebook rows are byte for byte those of a run without the
hostile ones, each hostile one scores what a wrong kernel scores, nothing it started is left
running (its daemon's delay is cut from 20 s to 3 s so that the test waits it out), the files
it could write outside its scratch are as they were, and the gradebook finishes.

"Nothing left running" is every process below a subreaper that runs the gradebook
(``tests/reaper.py``), not those whose command line names the submission: a kernel's process
(``checks/sandbox_child.py``) names none, nor does what it spawns. "As they were"
(``tests/snapshot.py``) covers the class folder (every submission's files), the gradebook's
outputs (as the gradebook left them, and no new file beside them), the grader's temporary folder
(``TMPDIR``, where each student's working folder is made), the installed ``pytest_gemm`` and
the environment's site-packages. ``tests/test_hostile_checks.py`` shows both checks catch what
an unconfined submission leaves."""
from __future__ import annotations

import csv
import os
import shutil
import socket
import subprocess
import sys
import sysconfig
import threading
from pathlib import Path

import pytest

import fakegpu
import pytest_gemm
from reaper import Reaped
from snapshot import changes, snapshot
from pytest_gemm.kernels import confine

HOSTILE = Path(__file__).resolve().parent / "hostile"
ATTACKS = sorted(p.name for p in HOSTILE.iterdir() if (p / "kernel.py").is_file())
HONEST = {"alice": "ok", "bob": "wrong"}
LEVELS = [pytest.param(level, marks=pytest.mark.skipif(confine.why_not(level) is not None,
                                                          reason=f"{level}: {confine.why_not(level)}"))
          for level in ("bubblewrap", "landlock")]


def _submissions(root: Path, hostile: bool) -> Path:
    subs = root / ("with-hostile" if hostile else "honest")
    for name, fake in HONEST.items():
        (subs / name).mkdir(parents=True)
        (subs / name / "kernel.py").write_text(fakegpu.FAKE_KERNELS + f"\nkernel = {fake}\n")
    for name in ATTACKS if hostile else ():
        shutil.copytree(HOSTILE / name, subs / name)
    for folder in [root, subs, *subs.iterdir()]:
        folder.chmod(0o755)  # a confined child run by root reads them as a user of its own
    return subs


def _server() -> tuple[int, list[bytes]]:
    """A server on 127.0.0.1 that keeps what it is sent, by TCP and by UDP on the same port."""
    got: list[bytes] = []
    srv = socket.create_server(("127.0.0.1", 0))
    srv.settimeout(1)
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("127.0.0.1", srv.getsockname()[1]))
    udp.settimeout(1)

    def datagrams() -> None:
        for _ in range(600):
            try:
                got.append(udp.recv(100))
            except OSError:
                continue
    threading.Thread(target=datagrams, daemon=True).start()

    def serve() -> None:
        for _ in range(600):
            try:
                conn, _ = srv.accept()
                got.append(conn.recv(100))
                conn.close()
            except OSError:
                continue
    threading.Thread(target=serve, daemon=True).start()
    return srv.getsockname()[1], got


def outside_scratch(tmp_path: Path) -> list[Path]:
    """What a submission graded in ``tmp_path`` could write outside its scratch: ``tmp_path``
    (the class folders, the gradebook's outputs and working folder, the grader's ``TMPDIR``),
    the installed ``pytest_gemm`` and site-packages; not the GPU lock's files, which the judging
    processes write for the students' (checks/lock_broker.py; the students' cannot reach them)."""
    paths = sysconfig.get_paths()
    return [tmp_path, Path(pytest_gemm.__file__).parent, Path(paths["purelib"]), Path(paths["platlib"])]


def grade(tmp_path: Path, subs: Path, level: str, port: int = 9, after_s: float = 5.0,
          **env: str) -> tuple[subprocess.CompletedProcess[str], list[str], list[str]]:
    """The gradebook's run on ``subs`` at ``level``: (its result, the processes it left running
    ``after_s`` seconds after it ended, what changed outside the scratch meanwhile but the
    gradebook's own outputs as it wrote them)."""
    out = tmp_path / f"{subs.name}.csv"
    (tmp_path / "tmp").mkdir(exist_ok=True)
    env = fakegpu.env(tmp_path, GEMM_HOSTILE_DELAY_S="3", GEMM_HOSTILE_FORKS="1500", GEMM_HOSTILE_FILL_MB="128",
                      GEMM_HOSTILE_PORT=str(port), PYTEST_GEMM_SCRATCH_MB="64", TMPDIR=str(tmp_path / "tmp"), **env)
    cmd = [sys.executable, "-m", "pytest_gemm.grading.gradebook", str(subs), "--out", str(out),
           "--json", str(out.with_suffix(".json")), "--jobs", "2", "--timeout", "240", "--", "-p", "fakegpu",
           "--gemm-shapes", "quick", "-k", "exact or launch", "--gemm-confine", level]
    locks = [Path(env["PYTEST_GEMM_LOCK_DIR"])]  # beside tmp_path (fakegpu.env): skipped wherever it is
    before = snapshot(outside_scratch(tmp_path), skip=locks)
    with Reaped(cmd, cwd=tmp_path, env=env, timeout=600) as run:
        done = run.wait()
        written = snapshot([out, out.with_suffix(".json")])  # the gradebook's outputs, as it left them
        left = run.leftovers(after_s)
    return done, left, changes({**before, **written}, snapshot(outside_scratch(tmp_path), skip=locks))


def _grade(tmp_path: Path, subs: Path, level: str, port: int, after_s: float) -> dict[str, list[str]]:
    done, left, changed = grade(tmp_path, subs, level, port, after_s)
    assert done.returncode == 0, done.stdout
    assert f"submitted code ran confined by: {level} (" in done.stdout, done.stdout[-2000:]  # the gradebook says so
    assert not left, f"processes a submission started outlived its grading: {left}"
    assert not changed, f"files outside the submissions' scratch changed: {changed}"
    with (tmp_path / f"{subs.name}.csv").open() as fh:
        return {row[0]: row for row in csv.reader(fh)}


@pytest.mark.parametrize("level", LEVELS)
def test_hostile_submissions_change_no_grade_but_their_own(tmp_path, level):
    port, received = _server()
    baseline = _grade(tmp_path, _submissions(tmp_path, hostile=False), level, port, after_s=0.5)
    subs = _submissions(tmp_path, hostile=True)
    rows = _grade(tmp_path, subs, level, port, after_s=5)  # 5 s: the daemon's 3 s delay, and more
    for name in HONEST:
        assert rows[name] == baseline[name], (name, rows[name], baseline[name])
    wrong = baseline["bob"]
    for name in ATTACKS:
        if name == "fork_bomb" and level == "landlock" and os.geteuid() == 0:
            continue  # Linux does not count root's processes: documented in docs/security.md
        assert rows[name][1:-1] == wrong[1:-1], (name, rows[name], wrong)  # all but the reason
    assert "999" not in (tmp_path / f"{subs.name}.csv").read_text()  # the forged score reached no file
    assert received == [], "a submission reached a server on 127.0.0.1"


def test_a_checkout_installed_with_pip_e_is_not_readable_whole(monkeypatch):
    """The confinement reads pytest-gemm's own packages, not the folder holding them: installed
    from a checkout (pip install -e), that folder is the checkout, with whatever a course keeps
    beside the package (its hidden tests, other submissions)."""
    monkeypatch.delenv("PYTHONPATH", raising=False)
    root = Path(confine.__file__).resolve().parents[2]
    paths = confine._python_paths()
    assert str(root / "pytest_gemm") in paths or any(str(root).startswith(p) for p in paths)
    if "site-packages" not in str(root) and "dist-packages" not in str(root):  # a checkout
        assert str(root) not in paths, paths
        import os
        import sys

        python = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}  # a .venv inside it
        allowed = [str(root / name) for name in ("pytest_gemm", "reference_kernels", "conformance")] + sorted(python)
        assert not [p for p in paths if p.startswith(str(root) + os.sep)
                    and not any(p == a or p.startswith(a + os.sep) for a in allowed)], paths
