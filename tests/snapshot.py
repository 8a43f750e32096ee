"""A cheap picture of folders' files, to tell whether anything wrote there: each path with its
kind, size and modification time, and the SHA-256 of each file of at most ``HASHED_BYTES`` (so a
small file rewritten to the same size, its time set back, still shows; a large one so rewritten
does not: the price of reading site-packages in about a second).

``changes(before, after)`` lists what was added, removed or changed. Bytecode that an import
writes (a new ``__pycache__`` entry) is not a change: any process, an honest test's included,
may add one at any time; one replaced or removed is.

Used by tests/test_hostile_submissions.py ("the machine is as it was"); tested by
tests/test_hostile_checks.py.
"""
from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Iterable

HASHED_BYTES = 64 * 1024

Entry = tuple[str, int, int, str]  # kind ("file", "dir", "link"), size, mtime in ns, digest ("" when not hashed)
Snapshot = dict[str, Entry]


def _entry(path: str, st: os.stat_result) -> Entry:
    if os.path.islink(path):
        return ("link", 0, 0, os.readlink(path))
    if os.path.isdir(path):
        return ("dir", 0, 0, "")  # its mtime moves with any entry added, bytecode too: its entries say it
    digest = ""
    if st.st_size <= HASHED_BYTES:
        try:
            with open(path, "rb") as fh:
                digest = hashlib.sha256(fh.read()).hexdigest()
        except OSError as exc:
            digest = f"unreadable: {exc.strerror}"
    return ("file", st.st_size, st.st_mtime_ns, digest)


def snapshot(roots: Iterable[str | os.PathLike[str]], skip: Iterable[str | os.PathLike[str]] = ()) -> Snapshot:
    """Every path under ``roots`` (a root that is a file: that file), not below ``skip``; links
    are recorded, not followed."""
    skipped = {os.path.realpath(p) for p in skip}
    out: Snapshot = {}
    for root in {os.path.realpath(r) for r in roots}:
        if not os.path.lexists(root):
            continue
        todo = [root]
        while todo:
            path = todo.pop()
            if path in skipped:
                continue
            try:
                st = os.lstat(path)
            except OSError:
                continue  # removed while we looked
            out[path] = _entry(path, st)
            if out[path][0] == "dir":
                try:
                    todo += [os.path.join(path, name) for name in os.listdir(path)]
                except OSError:
                    pass
    return out


def _bytecode(path: str) -> bool:
    return "__pycache__" in Path(path).parts


def changes(before: Snapshot, after: Snapshot) -> list[str]:
    """What differs, one line each ("added PATH", "removed PATH", "changed PATH: how"), sorted."""
    out = [f"removed {p}" for p in before if p not in after]
    out += [f"added {p}" for p in after if p not in before and not _bytecode(p)]
    for path in before.keys() & after.keys():
        was, now = before[path], after[path]
        if was != now:
            how = [name for name, a, b in zip(("kind", "size", "mtime", "content"), was, now) if a != b]
            out.append(f"changed {path}: {', '.join(how)}")
    return sorted(out)
