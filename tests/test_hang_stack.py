"""Where a timed-out check was (kernels/hang_stack.py): the line quoted from faulthandler's dump.
The whole path, a child signalled before it is killed, is tests/test_sandbox.py's hang test."""
from __future__ import annotations

from pytest_gemm.kernels.hang_stack import FRAMES, where

DUMP = """Stack (most recent call first):
  File "/home/u/launch.py", line 12 in wait_for_it
  File "/home/u/launch.py", line 30 in matmul
  File "/opt/pytest_gemm/checks/sandbox_child.py", line 120 in __call__
"""


def test_the_innermost_frames_are_quoted_innermost_first():
    assert where(DUMP) == ("where it was, innermost first: /home/u/launch.py:12 in wait_for_it <- "
                           "/home/u/launch.py:30 in matmul <- /opt/pytest_gemm/checks/sandbox_child.py:120 in __call__")


def test_a_deep_stack_is_cut_to_its_innermost_frames_and_says_so():
    deep = "Stack (most recent call first):\n" + "".join(
        f'  File "/x/f{i}.py", line {i} in g{i}\n' for i in range(FRAMES + 4))
    line = where(deep)
    assert line.count(" <- ") == FRAMES - 1 and line.endswith("(and 4 outer frames)") and "/x/f0.py:0 in g0" in line


def test_nothing_written_is_nothing_said():
    assert where("") == "" and where("garbage") == ""
