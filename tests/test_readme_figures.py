"""Measured figures carry their commit: every README block of tools/readme_figures.py names the
commit and date it was measured at, every paragraph quoting H200 figures names a commit, and the
script rewrites exactly the blocks whose sources a GPU run's folder holds."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from suite_helpers import load_declarations

ROOT = Path(__file__).resolve().parent.parent
figures = load_declarations(ROOT / "tools" / "readme_figures.py", "gemm_tools_readme_figures")


def _documents() -> dict[str, str]:
    return {str(p.relative_to(ROOT)): p.read_text() for p in figures.documents()}


def test_every_figures_block_names_its_commit_and_date():
    docs = _documents()
    names = [m["name"] for text in docs.values() for m in figures.BLOCK.finditer(text)]
    assert {"gpu-tests", "ladder", "class", "course", "ecosystems"} <= set(names), names
    assert len(names) == len(set(names)), names  # one home for each block
    assert {path: figures.unproven_blocks(text) for path, text in docs.items() if figures.unproven_blocks(text)} == {}


#: A measured figure: a time, a rate, a clock, a percentage, a ratio (1.21x), a fraction of cuBLAS; a
#: number inside a name (cupy-cuda13x) is none.
MEASURED = re.compile(r"(?<![\w.])\d+(\.\d+)? ?(s\b|ms\b|TFLOP/s|GB/s|[GM]Hz|%|x\b(?! ?\d)|of cuBLAS)|\b0\.\d{2,} (of|against)\b")
#: A paragraph names where its figures come from: a commit, or it says it is no measurement.
SOURCED = re.compile(r"commits? `?[0-9a-f]{7}|\bat `[0-9a-f]{7}|`[0-9a-f]{7}`|not a measurement|not measurements")
#: ... or each figure says, next to it, that it is a setting, a limit or a target ("at most 2x",
#: "200 ms (a setting)"): a word elsewhere in the paragraph excuses nothing ("By default the rung
#: reaches 1.37x of cuBLAS" passed when any "default" in the paragraph did)
NOT_MEASURED = re.compile(r"targets?\b|at most|<=|\b(?:limit|default|setting)s?\b")
BEFORE, AFTER = 24, 40  # characters either side of a figure where that word must be


def _unexcused(paragraph: str) -> bool:
    """A measured figure in ``paragraph`` with no setting word next to it (code spans, an
    option's syntax such as `--fail 2%`, are no figures)."""
    text = re.sub(r"`[^`]*`", "``", paragraph)
    return any(not NOT_MEASURED.search(text[max(0, m.start() - BEFORE):m.end() + AFTER])
               for m in MEASURED.finditer(text))


def bare_figures(text: str) -> list[str]:
    """Paragraphs (outside figure blocks and code) with a measured figure and no commit."""
    text = figures.BLOCK.sub("", text)
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    paragraphs = re.split(r"\n\s*\n|\n(?=[-*] )", text)  # a list's items are paragraphs of their own
    return [p.strip()[:160] for p in paragraphs if not SOURCED.search(p) and _unexcused(p)]


def test_every_paragraph_with_a_measured_figure_names_a_commit():
    bare = {path: found for path, text in _documents().items() if (found := bare_figures(text))}
    assert not bare, "figures without the commit they were measured at:\n" + "\n---\n".join(
        f"{path}: {p}" for path, found in bare.items() for p in found)


@pytest.mark.parametrize("paragraph", [
    "The cp.async rungs run 1.21x their synchronous twin at 4096^3.",
    "Earlier figures put cuBLAS fp16 at 552 to 636 TFLOP/s.",
    "The SM clock held 1.72 GHz throughout.",
    "`python bench/edge_cost.py`: vectorized -0.2 %, warptile -2.0 %.",
    "By default the warptile rung reaches 1.37x of cuBLAS.",
    "The gate's limit is a setting. The warptile rung reaches 1.37x of cuBLAS.",
])
def test_a_figure_with_no_commit_is_caught_wherever_it_is(paragraph):
    assert bare_figures(f"intro\n\n{paragraph}\n") == [paragraph[:160]]
    assert bare_figures(f"{paragraph} (commit `1a2b3c4`, NVIDIA H200)\n") == []


@pytest.mark.parametrize("paragraph", [
    "Each check waits 200 ms (a setting) before it times.",
    "An accuracy failure at most 2x its bound is kept apart.",
    "`--gemm-compare-fail=5%` makes it a gate.",
])
def test_a_setting_said_next_to_its_figure_is_no_measurement(paragraph):
    assert bare_figures(f"intro\n\n{paragraph}\n") == []


def test_a_runs_folder_rewrites_its_blocks_and_leaves_the_others(tmp_path):
    (tmp_path / "meta.json").write_text(json.dumps({"commit": "abcdef1", "date": "2026-12-02", "device": "NVIDIA H200"}))
    (tmp_path / "gpu-tests-summary.txt").write_text("gpu-tests at abcdef1 (...): 9 passed, 0 failed, 0 skipped, 0 errors in 1.0 s\n")
    (tmp_path / "course.json").write_text(json.dumps({"wall_s": 12.5, "students": [
        {"student": "alice", "status": "graded", "score": 93.5, "elapsed_s": 10.0, "reason": "compiles"}]}))
    readme = ("intro\n<!-- figures:gpu-tests -->\nold\n<!-- /figures:gpu-tests -->\n"
              "<!-- figures:ladder -->\nMeasured at commit `1234567` (2026-11-30, H200): old table\n<!-- /figures:ladder -->\n"
              "<!-- figures:course -->\nold\n<!-- /figures:course -->\n")
    new, done = figures.regenerate(readme, tmp_path)
    assert done == ["gpu-tests", "course"]
    assert "9 passed" in new and "old\n<!-- /figures:gpu-tests" not in new
    assert "| alice | graded | 93.5 | 10.0 | compiles |" in new and "1 students graded in 12.5 s" in new
    assert "Measured at commit `1234567` (2026-11-30, H200): old table" in new  # no ladder.json: kept
    assert figures.unproven_blocks(new) == []
    assert figures.unproven_blocks(readme) == ["gpu-tests", "course"]


def test_some_files_gpu_tests_are_not_published_as_the_suite_s_line(tmp_path):
    (tmp_path / "meta.json").write_text(json.dumps({"commit": "abcdef1", "date": "2026-12-02", "device": "H200"}))
    (tmp_path / "gpu-tests-summary.txt").write_text(
        "gpu-tests at abcdef1: 9 passed, 0 failed in 1 s\n  (only GPU_TESTS=tests/test_x.py: not the whole suite)\n")
    readme = "<!-- figures:gpu-tests -->\nold\n<!-- /figures:gpu-tests -->\n"
    assert figures.regenerate(readme, tmp_path) == (readme, [])


def test_check_mode_says_whether_the_readme_is_current(tmp_path):
    (tmp_path / "meta.json").write_text(json.dumps({"commit": "abcdef1", "date": "2026-12-02", "device": "H200"}))
    (tmp_path / "gpu-tests-summary.txt").write_text("gpu-tests at abcdef1: 1 passed, 0 failed in 1 s\n")
    readme = tmp_path / "README.md"
    readme.write_text("<!-- figures:gpu-tests -->\nold\n<!-- /figures:gpu-tests -->\n")
    assert figures.main([str(tmp_path), "--readme", str(readme), "--check"]) == 1
    assert figures.main([str(tmp_path), "--readme", str(readme)]) == 0
    assert figures.main([str(tmp_path), "--readme", str(readme), "--check"]) == 0


def test_the_class_block_says_the_wall_time_the_targets_and_each_kinds_speed_spread(tmp_path):
    (tmp_path / "meta.json").write_text(json.dumps({"commit": "abcdef1", "date": "2026-12-02", "device": "NVIDIA H200"}))
    (tmp_path / "class.json").write_text(json.dumps({"students": [
        {"student": "s000-correct", "score": 93.4, "elapsed_s": 20.0, "fraction_of_cublas": 0.1688},
        {"student": "s001-correct", "score": 93.5, "elapsed_s": 30.0, "fraction_of_cublas": 0.1690},
        {"student": "s002-hanging", "score": 0, "elapsed_s": 44.0}]}))
    (tmp_path / "class.txt").write_text("CLASS: 3 students graded in 50.0 s with --jobs 12 (16.7 s per student)\n"
                                        "  MISSED  class: 3 students in 50.0 s; target <= 40 s\n"
                                        "GPU LOCK: 10 holds over 49.0 s\n  alone (timed checks): 2 holds\n"
                                        "TARGETS (issue 26)\n  MISSED  class: 3 students in 50.0 s; target <= 40 s\n"
                                        "  MET   alone: 1 students graded again\n")
    readme = "<!-- figures:class -->\nold\n<!-- /figures:class -->\n"
    new, done = figures.regenerate(readme, tmp_path)
    assert done == ["class"] and figures.unproven_blocks(new) == []
    assert "CLASS: 3 students graded in 50.0 s with --jobs 12" in new
    assert new.count("**MISSED** class: 3 students in 50.0 s") == 1 and "**MET** alone" in new
    assert "| correct | 2 | 20.0 to 30.0 | 93.4 to 93.5 | 0.1688 to 0.1690 |" in new
    assert "| hanging | 1 | 44.0 to 44.0 | 0 to 0 | not timed |" in new
    assert "GPU LOCK: 10 holds over 49.0 s" in new


def test_the_ladder_block_says_how_the_whole_run_went(tmp_path):
    (tmp_path / "meta.json").write_text(json.dumps({"commit": "abcdef1", "date": "2026-12-02", "device": "NVIDIA H200"}))
    (tmp_path / "ladder.json").write_text(json.dumps({"schema_version": 2, "device": {}, "roofs": {}, "kernels": []}))
    (tmp_path / "ladder.txt").write_text("...\n==== 4 failed, 1462 passed, 22 skipped in 353.10s (0:05:53) ====\n")
    new, done = figures.regenerate("<!-- figures:ladder -->\nold\n<!-- /figures:ladder -->\n", tmp_path)
    assert done == ["ladder"] and "The run: 4 failed, 1462 passed, 22 skipped in 353.10s (0:05:53)." in new


def test_the_class_block_gives_the_command_its_log_shows_was_run(tmp_path):
    (tmp_path / "meta.json").write_text(json.dumps({"commit": "abcdef1", "date": "2026-12-02", "device": "H200"}))
    (tmp_path / "class.json").write_text(json.dumps({"students": [
        {"student": "s000-correct", "score": 93.4, "elapsed_s": 20.0}, {"student": "s001-hanging", "score": 0, "elapsed_s": 40.0}]}))
    log = ["CLASS: 2 students graded in 50.0 s with --jobs 12 (25.0 s per student)", "GPU LOCK: 10 holds over 49.0 s",
           "", "SOLO: 1 students one at a time in 9.0 s", "TARGETS (issue 26)", "  MET   class: 2 students in 50.0 s",
           "RESULT: 1 of 1 targets met"]
    (tmp_path / "class.txt").write_text("\n".join(log) + "\n")
    block, _ = figures.regenerate("<!-- figures:class -->\nold\n<!-- /figures:class -->\n", tmp_path)
    # finished, one student alone, none a second time, the lock's holds read
    assert "`python tools/class_benchmark.py --students 2 --solo 1 --again 0 --lock-log`." in block
    assert "| hanging | 1 | 40.0 to 40.0 | 0 to 0 | not timed |" in block
    cut = [line for line in log if not line.startswith(("SOLO", "RESULT", "GPU LOCK"))]
    (tmp_path / "class.txt").write_text("\n".join(cut) + "\n")  # cut short: what was asked is not known
    block, _ = figures.regenerate("<!-- figures:class -->\nold\n<!-- /figures:class -->\n", tmp_path)
    assert "`python tools/class_benchmark.py --students 2`." in block
    # the class's size from its first line, though fewer were graded; a pass skipped for the deadline
    skipped = ["class of 100 in /tmp/c/class: 55 correct", *log[:2], "SOLO: skipped, about 90 s would not fit",
               "AGAIN: 15 students graded a second time in 40.0 s (--jobs 12)", "RESULT: 4 of 4 targets met"]
    (tmp_path / "class.txt").write_text("\n".join(skipped) + "\n")
    block, _ = figures.regenerate("<!-- figures:class -->\nold\n<!-- /figures:class -->\n", tmp_path)
    assert "`python tools/class_benchmark.py --students 100 --again 15 --lock-log`." in block


def test_a_number_inside_a_name_is_no_figure():
    assert bare_figures("intro\n\nInstall `cupy-cuda13x` beside `cuda-toolkit==13.*`.\n") == []
    assert bare_figures("intro\n\nIt ran 13x faster.\n") == ["It ran 13x faster."]
