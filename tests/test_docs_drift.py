"""The words that drift: every path the docs, --help and comments name exists, and the lists
and counts they give (architectures, GPU session stages, quick shapes, the ladder's timed runs)
come from the one place in the code that decides them. No GPU, no NVRTC."""
from __future__ import annotations

import importlib
import importlib.util
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md")),
        *sorted((ROOT / "examples").rglob("*.md")), *sorted((ROOT / "reference_kernels").glob("*.md"))]
SOURCES = [p for folder in ("pytest_gemm", "conformance", "reference_kernels", "examples", "tools")
           for p in sorted((ROOT / folder).rglob("*.py"))]
PACKAGE_DIRS = ("checks", "kernels", "model", "runner", "outputs", "grading", "judges", "measure")
TOP = ("pytest_gemm", "reference_kernels", "conformance", "examples", "tools", "tests", "docs")
_PATH = re.compile(r"(?<![\w/.-])((?:%s)/[\w./-]*\w\.(?:py|cu|md|sh|yml|yaml|ini|json|txt|toml))" % "|".join(TOP + PACKAGE_DIRS))
_MODULE = re.compile(r"(?<![\w./-])(pytest_gemm(?:\.\w+)+)")


def _text(path: Path) -> str:
    return path.read_text(encoding="utf-8", errors="replace")


def _named_paths() -> list[tuple[str, str]]:
    out = []
    for path in DOCS + SOURCES:
        for match in _PATH.finditer(_text(path)):
            out.append((str(path.relative_to(ROOT)), match.group(1)))
    return out


def _exists(named: str, where: str) -> bool:
    if (ROOT / named).exists():
        return True
    if named.split("/")[0] in PACKAGE_DIRS:  # a path inside the package, written from within it
        return (ROOT / "pytest_gemm" / named).exists()
    return (ROOT / where).parent.joinpath(named).exists()


#: Paths that name what a reader writes (their own test file, a check the guide adds), not ours.
EXAMPLES = {"tests/test_mine.py", "kernels/mine.py", "pytest_gemm/checks/same_data.py"}


def test_every_path_the_docs_and_comments_name_exists():
    missing = sorted({f"{where}: {named}" for where, named in _named_paths()
                      if named not in EXAMPLES and not _exists(named, where)})
    assert not missing, "paths named but not in the repository:\n" + "\n".join(missing)


_COMMIT = re.compile(r"(?:`|\bcommits? `?|\bat `?)((?=[0-9]*[a-f])[0-9a-f]{7,40})\b")  # a letter: not a number
#: Said beside a commit of a branch that was dropped: the figures stand, the commit cannot be read.
NOT_KEPT = "not kept in this repository"
#: Commits that stand for any commit in an example of output.
EXAMPLE_COMMITS = {"1a2b3c4"}


def _git_history() -> bool:
    import subprocess

    try:
        out = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--is-shallow-repository"],
                             capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return out.returncode == 0 and out.stdout.strip() == "false"


def test_every_commit_the_docs_name_is_in_the_history_or_said_not_to_be():
    # a figure's commit is how a reader checks it: one that is not in the history (a branch
    # that was dropped) must say so where it is named
    if not _git_history():
        pytest.skip("no full git history here (an sdist, or a shallow clone): commits cannot be looked up")
    import subprocess

    named = {}
    for path in [*DOCS, *sorted((ROOT / "reference_kernels").glob("*.cu"))]:
        text = _text(path)
        for m in _COMMIT.finditer(text):
            after = " ".join(text[m.start():m.end() + 300].split())  # the words, across line breaks
            if NOT_KEPT not in after and m.group(1) not in EXAMPLE_COMMITS:
                named.setdefault(m.group(1), str(path.relative_to(ROOT)))
    assert len(named) >= 10, named  # the pattern still finds the docs' commits
    missing = sorted(f"{where}: {commit}" for commit, where in named.items()
                     if subprocess.run(["git", "-C", str(ROOT), "merge-base", "--is-ancestor", commit, "HEAD"],
                                       capture_output=True).returncode != 0)  # in HEAD's history
    assert not missing, (f"commits named but not in this repository's history (say '{NOT_KEPT}' "
                         "beside one from a dropped branch):\n" + "\n".join(missing))


def _resolves(dotted: str) -> bool:
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        name = ".".join(parts[:cut])
        try:
            found = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            found = None
        if found is None:
            continue
        obj = importlib.import_module(name)
        for attr in parts[cut:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


def test_every_pytest_gemm_module_the_docs_and_comments_name_exists():
    named = {(str(p.relative_to(ROOT)), m.group(1).rstrip(".")) for p in DOCS + SOURCES
             for m in _MODULE.finditer(_text(p))}
    missing = sorted(f"{where}: {name}" for where, name in named if not _resolves(name))
    assert not missing, "modules or attributes named but not found:\n" + "\n".join(missing)


def test_architecture_lists_in_the_docs_are_the_code_s():
    """"N with CUDA 12.9's NVRTC: sm_X up to sm_Y" is what model/arches.py claims without NVRTC."""
    from pytest_gemm.model.arches import FALLBACK_ARCHES, claimable_arches

    generic = [a for a in claimable_arches(FALLBACK_ARCHES) if not a.endswith("a")]
    want = f"{len(generic)} with CUDA 12.9's NVRTC: {generic[0]} up to {generic[-1]}"
    pattern = re.compile(r"\d+ with CUDA [\d.]+'s NVRTC: sm_\d+ up to sm_\d+")
    seen = 0
    for path in DOCS + SOURCES:
        for found in pattern.findall(_text(path)):
            seen += 1
            assert found == want, f"{path.relative_to(ROOT)} says {found!r}; the code says {want!r}"
        # the list the run compiles is never spelled as a short fixed list
        assert "sm_75, sm_80 and sm_90" not in _text(path), path
    assert seen >= 3  # README, the course README, the starter kernel


def test_the_gpu_session_stages_in_the_readme_are_the_script_s():
    script = _text(ROOT / "tools" / "gpu_session.sh")
    stages = re.search(r'^stages="([\w -]+)"$', script, re.M)
    assert stages, "tools/gpu_session.sh: its stage list moved"
    listed = [s for doc in DOCS for s in re.findall(r"bash tools/gpu_session\.sh ([\w|-]+)`", _text(doc)) if "|" in s]
    assert listed and all(s.split("|") == stages.group(1).split() for s in listed), listed


def test_the_candidates_the_gpu_session_times_exist():
    """A stage that names a candidate renamed since (perf_candidates --only) would fail on the
    GPU only, after a machine start; here it fails on CPU."""
    import sys

    sys.path.insert(0, str(ROOT / "bench"))
    from perf_candidates import valid_names

    script = _text(ROOT / "tools" / "gpu_session.sh")
    lists = re.findall(r"perf_candidates\.py[^\n]*?--only ([\w.,-]+)", script)
    assert lists, "tools/gpu_session.sh names no --only list any more: update this test"
    unknown = sorted({name for names in lists for name in names.split(",")} - set(valid_names()))
    assert not unknown, f"tools/gpu_session.sh times builds perf_candidates does not know: {unknown}"


def test_the_quick_shapes_in_the_readme_are_the_registry_s():
    from pytest_gemm.checks.registry import quick_summary

    assert any(f"a small representative set per check ({quick_summary()};" in _text(doc) for doc in DOCS)


def checks_judging_their_own_launch() -> set[str]:
    """The registry's checks whose module calls ``reject_launch_damage`` (writes outside C, changed
    inputs) on its launches, read from their sources."""
    from pytest_gemm.checks.registry import CHECKS

    folder = ROOT / "pytest_gemm" / "checks"
    return {c.name for c in CHECKS if (folder / f"{c.module}.py").is_file()
            and "reject_launch_damage(" in _text(folder / f"{c.module}.py")}


def test_the_checks_courses_md_says_judge_their_own_launch_are_the_code_s():
    sentence = re.search(r"fails as `out_of_bounds_write` whatever its values \(([^)]*)\)",
                         _text(ROOT / "docs" / "courses.md"))
    assert sentence, "docs/courses.md no longer lists the checks that judge their own launch"
    said = set(re.findall(r"`(\w+)`", sentence.group(1)))
    assert said == checks_judging_their_own_launch(), (
        f"docs/courses.md lists {sorted(said)}; the checks calling reject_launch_damage are "
        f"{sorted(checks_judging_their_own_launch())}: say those")


def test_the_plugin_s_help_counts_nothing_it_would_have_to_load():
    """--help cannot count the ladder's rungs without importing the ladder when the plugin loads
    (which stays thin): it says what the runs are, and types no number of them."""
    from pytest_gemm import plugin

    help_text = " ".join(_text(Path(plugin.__file__)).split())
    assert "one more timed run per rung and cuBLAS baseline of its precision" in help_text
    assert not re.search(r"\d+ (more )?(timed )?(runs|rungs|kernels|checks)\b", help_text), "a typed count in --help"


@pytest.mark.parametrize("doc", ["README.md", "examples/course/README.md"])
def test_the_no_gpu_reason_quoted_in_the_docs_is_the_code_s(doc):
    from pytest_gemm.kernels.driver import explain

    no_driver = explain("x", libcuda=False, driver=None, runtime=None)
    text = " ".join(_text(ROOT / doc).split())
    quoted = re.findall(r"`no usable GPU: ([^`]*)`", text)
    for q in quoted:
        q = q.rstrip(". ")
        assert q in ("...", "…") or no_driver.startswith(q.rstrip(".… ")), (doc, q)


_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def _anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def broken_links(path: Path) -> list[str]:
    """The relative links of a markdown file whose file, or heading (#anchor), does not exist."""
    bad = []
    for target in _LINK.findall(_text(path)):
        if re.match(r"[a-z]+:", target):
            continue  # https:, mailto:
        file, _, anchor = target.partition("#")
        where = (path.parent / file).resolve() if file else path
        if not where.exists():
            bad.append(f"{path.relative_to(ROOT)}: {target} (no such file)")
        elif anchor and where.suffix == ".md" and anchor not in {
                _anchor(h) for h in re.findall(r"^#+ (.*)$", _text(where), re.M)}:
            bad.append(f"{path.relative_to(ROOT)}: {target} (no such heading)")
    return bad


def test_every_link_of_the_docs_leads_somewhere():
    bad = [b for path in DOCS for b in broken_links(path)]
    assert not bad, "links to nothing:\n" + "\n".join(bad)


def test_a_broken_link_is_caught(tmp_path, monkeypatch):
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    (tmp_path / "a.md").write_text("# Top\n## The accuracy bound\n[ok](#the-accuracy-bound) [b](b.md) [c](a.md#nothing)\n")
    assert broken_links(tmp_path / "a.md") == ["a.md: b.md (no such file)", "a.md: a.md#nothing (no such heading)"]


def test_the_readme_is_what_a_newcomer_needs_and_points_to_docs():
    text = _text(ROOT / "README.md")
    assert len(text.splitlines()) <= 220, "README.md: keep it to what a newcomer needs; the rest goes to docs/"
    named = set(re.findall(r"`(docs/[\w.-]+\.md)`", text)) | {f"docs/{p}" for p in re.findall(r"\(docs/([\w.-]+\.md)", text)}
    pages = {str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md")}
    # every page that was cut from the README is named in it (pages other issues add get their line at merge)
    assert {f"docs/{n}.md" for n in ("options", "kernels", "checks", "fixtures", "ladder", "courses", "ci", "report",
                                     "tools")} <= named & pages, sorted(named)


def test_every_gemm_option_and_ini_key_is_in_the_options_page(pytester):
    """docs/options.md says it lists every --gemm-* option and ini key: `pytest --help` (the plugin's
    own registrations) is the list it is held to."""
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parent.parent / "docs" / "options.md").read_text()
    shown = pytester.runpytest("--help").stdout.str()
    options = set(re.findall(r"(--gemm-[a-z-]+)", shown))
    keys = set(re.findall(r"^  (gemm_[a-z_]+) ", shown, re.M))
    assert len(options) >= 20 and keys, shown[-3000:]
    documents = [text] + [(Path(__file__).resolve().parent.parent / "docs" / name).read_text()
                          for name in ("courses.md",)]  # the grading keys (weights, visibility) live there
    missing = sorted(o for o in options | keys if not any(o in d for d in documents))
    assert missing == [], f"not in docs/options.md: {missing}"


def _help_entries(shown: str) -> dict[str, str]:
    """`pytest --help`'s gemm options and ini keys, each with its help text on one line."""
    entries: dict[str, str] = {}
    name = None
    for line in shown.splitlines():
        head = re.match(r"^  (--gemm-[a-z-]+|gemm_[a-z_]+)\b(.*)$", line)
        if head:
            name, rest = head.group(1), head.group(2)
            entries[name] = rest
        elif name and line.startswith(" " * 10):
            entries[name] += " " + line.strip()
        else:
            name = None
    return {k: " ".join(v.split()) for k, v in entries.items()}


def help_default(text: str) -> str | None:
    """The default a help text states ("full (default)", "(default 4096x4096x4096)", "default none"):
    its first words, up to the first ';', ')' or ','."""
    found = re.search(r"(\S+) \((?:the )?default\)", text) or re.search(r"\bdefault:? ([^;),]+)", text)
    return " ".join(found.group(1).split()[:6]) if found else None


def options_row(doc: str, name: str) -> str | None:
    """The row of docs/options.md's table that documents ``name`` (an option, or an ini key
    spelled `gemm_x`) in its first cell (another row may mention it), backticks dropped."""
    rows = [row for row in doc.splitlines() if row.startswith("|") and f"`{name}" in row.split("|")[1]]
    return rows[0].replace("`", "") if rows else None


def stale_defaults(shown: str, doc: str) -> list[str]:
    bad = []
    for name, text in sorted(_help_entries(shown).items()):
        default = help_default(text)
        row = options_row(doc, name)
        if default is None or row is None:
            continue
        if not any(form in row for form in (f"{default} (default", f"(default {default}", f"(default: {default}")):
            bad.append(f"{name}: --help says the default is {default!r}; docs/options.md: {row[:160]}...")
    return bad


def test_the_defaults_in_the_options_page_are_the_help_s(pytester):
    """docs/options.md states each option's and ini key's default as `pytest --help` does."""
    shown = pytester.runpytest("--help").stdout.str()
    doc = _text(ROOT / "docs" / "options.md")
    stated = {n for n, t in _help_entries(shown).items() if help_default(t) and options_row(doc, n)}
    assert {"--gemm-bench-shape", "--gemm-timeout", "--gemm-shapes", "--gemm-isolation", "--gemm-confine",
            "--gemm-trace", "gemm_compile_arches", "gemm_speed_budget"} <= stated, sorted(stated)
    assert stale_defaults(shown, doc) == []


def test_a_stale_default_is_caught():
    shown = ("  --gemm-bench-shape=MxNxK\n                        shape of the timed speed check (default\n"
             "                        4096x4096x4096)\n  --gemm-isolation={process,none}\n"
             "                        process (default): each kernel\n")
    doc = ("| `--gemm-bench-shape MxNxK` | shape of the timed speed check (default `2048x2048x2048`). |\n"
           "| `--gemm-isolation process\\|none` | `process` (default): each kernel runs in its own process |\n")
    assert [b.split(":")[0] for b in stale_defaults(shown, doc)] == ["--gemm-bench-shape"]


#: Variables the package reads that are no user's business: none so far (a test hook is still
#: documented, in CONTRIBUTING.md, so that nobody sets it by accident).
_UNDOCUMENTED_ENV: set[str] = set()


def undocumented_env(sources: list[Path], docs: list[Path]) -> list[str]:
    read = {m for p in sources for m in re.findall(r"PYTEST_GEMM_[A-Z0-9_]+", _text(p))}
    said = " ".join(_text(p) for p in docs)
    return sorted(v for v in read - _UNDOCUMENTED_ENV if not re.search(rf"{v}(?![A-Z0-9_])", said))


def test_every_environment_variable_the_package_reads_is_documented():
    """Each PYTEST_GEMM_* name in pytest_gemm/ is in the README, CONTRIBUTING.md or docs/."""
    sources = sorted((ROOT / "pytest_gemm").rglob("*.py"))
    docs = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md"))]
    assert len({m for p in sources for m in re.findall(r"PYTEST_GEMM_[A-Z0-9_]+", _text(p))}) >= 10
    missing = undocumented_env(sources, docs)
    assert missing == [], f"read by pytest_gemm/ but named in no doc: {missing}"


def test_an_undocumented_environment_variable_is_caught(tmp_path):
    (tmp_path / "m.py").write_text('A = "PYTEST_GEMM_LOCK_DIR"\nB = "PYTEST_GEMM_LOCK"\n')
    (tmp_path / "d.md").write_text("`PYTEST_GEMM_LOCK_DIR` is the folder\n")
    assert undocumented_env([tmp_path / "m.py"], [tmp_path / "d.md"]) == ["PYTEST_GEMM_LOCK"]
