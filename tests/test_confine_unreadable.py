"""A root grader's submissions run as a user of their own under bubblewrap: a submission folder
or a file in it that others cannot read is named, with the command that opens it, before any
child starts (an unzipped submission's files are often of mode 0600)."""
from __future__ import annotations

from pathlib import Path

from pytest_gemm.kernels import confine


def test_a_closed_folder_or_file_inside_it_is_named_with_the_chmod_that_opens_it(tmp_path, monkeypatch):
    monkeypatch.setattr(confine, "sandbox_uid", lambda: 200001)
    sub = tmp_path / "alice"
    (sub / "src").mkdir(parents=True)
    for path in (tmp_path, sub, sub / "src"):
        path.chmod(0o755)
    (sub / "kernel.py").write_text("kernel = None\n")
    (sub / "src" / "matmul.cu").write_text("// a kernel\n")
    (sub / "kernel.py").chmod(0o644)
    (sub / "src" / "matmul.cu").chmod(0o644)
    assert confine.unreadable(sub, "bubblewrap") is None
    (sub / "src" / "matmul.cu").chmod(0o600)  # unzipped as the grader's own
    said = confine.unreadable(sub, "bubblewrap")
    assert said is not None and str(sub / "src" / "matmul.cu") in said and f"chmod -R o+rX {sub}" in said
    (sub / "src" / "matmul.cu").chmod(0o644)
    (sub / "src").chmod(0o750)  # a folder others cannot search
    assert str(sub / "src") in (confine.unreadable(sub, "bubblewrap") or "")
    (sub / "src").chmod(0o755)
    assert confine.unreadable(sub, "landlock") is None  # the sandbox runs as the grader there: nothing to open
    (sub / "scratch").mkdir(mode=0o700)  # not the submission's code (a grader's temporary files): not looked at
    (sub / "scratch" / "log.txt").write_text("")
    (sub / ".git").mkdir(mode=0o700)
    (sub / ".git" / "config.json").write_text("{}")
    assert confine.unreadable(sub, "bubblewrap") is None
