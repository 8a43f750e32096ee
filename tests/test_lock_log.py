"""tools/lock_log.py: where a run's GPU time went, from the GPU lock's log. No GPU."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from suite_helpers import load_declarations

ROOT = Path(__file__).resolve().parent.parent
lock_log = load_declarations(ROOT / "tools" / "lock_log.py", "gemm_tools_lock_log")


def _hold(kind, what, asked, held, released, pid=1):
    return {"pid": pid, "kind": kind, "what": what, "asked": asked, "held": held, "released": released}


LOG = [
    _hold("s", "exact at 64x64x64", 0.0, 0.0, 2.0),   # in progress when the timed check asks
    _hold("x", "speed", 1.0, 2.0, 3.0, pid=2),         # waits 1 s for it: the drain
    _hold("s", "start-up", 1.5, 3.0, 3.5, pid=3),      # queued behind the timed check
    _hold("s", "exact at 1x1x1", 4.0, 4.0, 5.0),       # nothing held from 3.5 to 4
    _hold("r", "launch at 64x64x64", 4.2, 4.2, 4.8),   # presumed hung from 4.2 to 4.8
    _hold("w", "exact at 8x8x8", 4.5, 4.5, 4.9),       # warming up from 4.5 to 4.9
]


def test_the_summary_splits_the_span_into_alone_draining_and_unheld():
    s = lock_log.summarize(LOG)
    assert s["span_s"] == 5.0 and s["holds"] == 6
    assert s["presumed_hung"] == {"holds": 1, "marked_s": pytest.approx(0.6), "longest": pytest.approx(0.6)}
    assert s["warming"] == {"holds": 1, "marked_s": pytest.approx(0.4), "longest": pytest.approx(0.4)}
    assert s["alone"] == {"holds": 1, "held_s": 1.0, "wait_s": 1.0, "max_s": 1.0}
    assert s["draining_s"] == pytest.approx(1.0)
    assert s["unheld_s"] == pytest.approx(0.5)
    assert s["shared"]["wait_s"] == pytest.approx(1.5)
    assert s["by_group"]["exact"] == {"holds": 2, "held_s": 3.0, "max_s": 2.0, "wait_s": 0.0}
    assert s["by_group"]["start-up"]["wait_s"] == 1.5
    assert [h["what"] for h in s["longest_shared"]][:1] == ["exact at 64x64x64"]


def test_a_timed_check_that_waits_for_no_one_drains_nothing():
    s = lock_log.summarize([_hold("x", "speed", 0.0, 0.0, 1.0), _hold("s", "exact at 8x8x8", 0.5, 1.0, 1.5)])
    assert s["draining_s"] == 0.0 and s["alone"]["held_s"] == 1.0 and s["unheld_s"] == 0.0


def test_the_command_reads_a_log_file(tmp_path, capsys):
    path = tmp_path / "lock.jsonl"
    path.write_text("".join(json.dumps(h) + "\n" for h in LOG))
    assert lock_log.main([str(path)]) == 0
    out = capsys.readouterr().out
    assert "presumed hung (no timing while they ran, the other checks went on): 1 checks, 0.6 s" in out
    assert "warming up (timed checks wait for them a while only): 1 checks, 0.4 s" in out
    assert "GPU LOCK: 6 holds over 5.0 s" in out and "alone (timed checks): 1 holds, 1.0 s held (20 % of the span)" in out
    assert "draining" in out and "held by no one: 0.5 s (10 %)" in out
    with pytest.raises(SystemExit) as no_log:
        lock_log.main([])
    assert no_log.value.code == 2
    assert lock_log.render(lock_log.summarize([])) == "GPU LOCK: no holds logged"
