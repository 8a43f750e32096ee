"""The checks of tests/test_hostile_submissions.py, each against what it is there to catch:
the reaper (``tests/reaper.py``: every process a graded submission left running) and the
snapshot (``tests/snapshot.py``: every file it wrote outside its scratch). A submission graded
unconfined (``--gemm-confine none``) really does leave a daemon forked from its kernel's process
(``checks/sandbox_child.py``, whose command line names no submission) and really does write its
neighbour's files and the grader's temporary folder: both checks must say so."""
from __future__ import annotations

import os
import sys
import textwrap
import time
from pathlib import Path

import fakegpu
from reaper import Reaped
from snapshot import HASHED_BYTES, changes, snapshot
from test_hostile_submissions import grade

ESCAPES = textwrap.dedent("""
    import os, sys, time

    def _daemon():  # left its session and its process group, twice forked: re-parented at once
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                time.sleep({sleep})
            os._exit(0)

    def _own_group():  # still a child of its parent, in a process group of its own
        if os.fork() == 0:
            os.setpgid(0, 0)
            time.sleep({sleep})
            os._exit(0)
""")


def test_the_reaper_finds_every_process_left_running_whatever_its_session_or_name():
    script = ESCAPES.format(sleep=60) + "_daemon()\n_own_group()\n" + \
        "os.execv(sys.executable, [sys.executable, '-c', 'import time; time.sleep(0.2)', 'renamed'])\n"
    with Reaped([sys.executable, "-c", script], timeout=60) as run:
        assert run.wait().returncode == 0
        left = run.leftovers(0.5)
    assert len(left) == 2, left  # the daemon and the one in its own group; neither names the command
    pids = [int(line.split()[0]) for line in left]
    time.sleep(0.2)
    assert not [p for p in pids if Path(f"/proc/{p}").exists()
                and Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()[0] not in "ZX"], left  # killed


def test_the_reaper_finds_nothing_when_nothing_is_left():
    script = ESCAPES.format(sleep=0.1) + "_daemon()\n_own_group()\n"
    with Reaped([sys.executable, "-c", script], timeout=60) as run:
        done = run.wait()
        assert run.leftovers(1.0) == []
    assert done.returncode == 0


def test_the_reaper_says_the_commands_status_and_output():
    with Reaped([sys.executable, "-c", "import sys; print('out'); print('err', file=sys.stderr); sys.exit(3)"]) as run:
        done = run.wait()
    assert done.returncode == 3 and "out" in done.stdout and "err" in done.stdout


def _tree(root: Path) -> None:
    (root / "pkg" / "__pycache__").mkdir(parents=True)
    (root / "pkg" / "mod.py").write_text("x = 1\n")
    (root / "pkg" / "__pycache__" / "mod.cpython-3.pyc").write_bytes(b"\0" * 16)
    (root / "big.bin").write_bytes(b"b" * (HASHED_BYTES + 1))
    (root / "locks").mkdir()


def _same_time(path: Path, write: bytes) -> None:
    """Rewrite ``path`` with ``write`` and set its modification time back: only its bytes differ."""
    st = path.stat()
    path.write_bytes(write)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def test_a_snapshot_sees_each_way_a_file_can_change(tmp_path):
    _tree(tmp_path)
    before = snapshot([tmp_path], skip=[tmp_path / "locks"])
    assert changes(before, snapshot([tmp_path], skip=[tmp_path / "locks"])) == []
    _same_time(tmp_path / "pkg" / "mod.py", b"x = 2\n")                         # same size, same time
    (tmp_path / "big.bin").write_bytes(b"b" * (HASHED_BYTES + 2))                # too big to hash: its size
    (tmp_path / "pkg" / "evil.pth").write_text("import os\n")                    # a new file
    (tmp_path / "pkg" / "__pycache__" / "mod.cpython-3.pyc").write_bytes(b"\1" * 16)  # bytecode replaced
    (tmp_path / "pkg" / "__pycache__" / "new.cpython-3.pyc").write_bytes(b"\0")  # bytecode an import writes
    (tmp_path / "locks" / "gpu0.lock").write_text("")                            # skipped
    (tmp_path / "pkg" / "sub").mkdir()                                           # a new folder
    (tmp_path / "out").symlink_to("/etc")                                        # a link, not followed
    got = changes(before, snapshot([tmp_path], skip=[tmp_path / "locks"]))
    assert sorted(line.split(":")[0] for line in got) == sorted([
        f"added {tmp_path}/pkg/evil.pth", f"added {tmp_path}/pkg/sub", f"added {tmp_path}/out",
        f"changed {tmp_path}/big.bin", f"changed {tmp_path}/pkg/__pycache__/mod.cpython-3.pyc",
        f"changed {tmp_path}/pkg/mod.py"]), got
    assert f"changed {tmp_path}/pkg/mod.py: content" in got  # its bytes only: the hash saw it
    (tmp_path / "pkg" / "mod.py").unlink()
    assert f"removed {tmp_path}/pkg/mod.py" in changes(before, snapshot([tmp_path]))


HONEST = fakegpu.FAKE_KERNELS + "\nkernel = wrong\n"
UNCONFINED = ESCAPES.format(sleep=60) + textwrap.dedent("""
    import tempfile
    from pytest_gemm import kernel as _kernel

    here = os.path.dirname(os.path.abspath(__file__))
    if sys.argv[0].endswith("sandbox_child.py"):  # its kernel's process (python -m ...): named nowhere
        _daemon()
        with open(os.path.join(here, "..", "alice", "kernel.py"), "a") as fh:  # a neighbour's file
            fh.write("# edited\\n")
        open(os.path.join(tempfile.gettempdir(), "left-by-a-submission"), "w").close()  # the grader's TMPDIR

    @_kernel(name="wrong")
    def fake(a, b, c):
        raise AssertionError("the fake dispatcher never launches a kernel")

    kernel = fake
""")


def test_the_checks_catch_what_a_submission_graded_unconfined_leaves(tmp_path):
    subs = tmp_path / "class"
    for name, text in {"alice": HONEST, "mallory": UNCONFINED}.items():
        (subs / name).mkdir(parents=True)
        (subs / name / "kernel.py").write_text(text)
    done, left, changed = grade(tmp_path, subs, "none", after_s=1.0)
    assert done.returncode == 0, done.stdout
    # its daemon, forked from its kernel's process: "python -m pytest_gemm.checks.sandbox_child FD FD"
    assert [line for line in left if "pytest_gemm.checks.sandbox_child" in line and str(subs) not in line], left
    assert f"changed {subs}/alice/kernel.py" in [c.split(":")[0] for c in changed], changed
    assert f"added {tmp_path}/tmp/left-by-a-submission" in changed, changed
    assert not [c for c in changed if "class.csv" in c or "class.json" in c], changed  # its own outputs are not


def test_the_gradebook_graded_unconfined_leaves_nothing_of_its_own(tmp_path):
    """The same checks on honest submissions, unconfined: what the checks find is the submission's."""
    subs = tmp_path / "class"
    (subs / "alice").mkdir(parents=True)
    (subs / "alice" / "kernel.py").write_text(HONEST)
    done, left, changed = grade(tmp_path, subs, "none", after_s=0.5)
    assert done.returncode == 0, done.stdout
    assert (left, changed) == ([], [])
