"""The harness's own CuPy kernels compiled once for a class graded confined (issues 44, 47).

A confined student's kernel process starts with a CuPy cache of its own, empty
(``kernels/confine.py`` ``compile_caches``), so every student compiled again the kernels that
pytest-gemm's checks use (filling sentinels, comparing, references): 37.4 s of a correct
student's 81.2 s at the median, in a class of 100 on an H200 at ``805b9ae``. As such a class
starts, the gradebook runs pytest-gemm's own checks on shipped reference kernels
(``PRIMING_KERNELS``, two runs each, side by side), unconfined, with ``CUPY_CACHE_DIR`` in a fresh
folder of their own, and names that folder to the students' runs (``PYTEST_GEMM_CUPY_SEED``):
each kernel's CuPy cache starts as a copy of what it holds then (``kernels/cache_seed.py``). Only
our code and our kernels ran in those runs, so what they compiled is trusted, whether they pass
or not; the folder is the grader's, in its temporary directory, and bound into no sandbox.

The runs go beside the first students, not before them: the first round compiles for itself, as
the first unconfined students do for the machine's shared cache, and every later student starts
from the seed. One run of each kernel runs every check last first (``priming_order.py``), the
other in the students' order (``priming_commands``), and before each check of a
confined student its cache takes what the seed gained since (``checks/sandbox_confine.py``
``reseed_confined``): the first round then finds the kernels of its later checks compiled, where
copied only at its start it compiled all of them, 12 students at once in caches of their own
(at ``8cc0511``, an H100, the confined class's 10th student was graded at 104.5 s against 56.1 s
unconfined, and from there on the two kept pace). Run before the class (commit ``cb1ae07``, an
H100) they took 65.7 s of its wall time.
They cover the full shape set: some CuPy kernels are compiled only at some shapes. Primed at the
quick shapes alone (commit ``f47b585``, an H100), every confined student still compiled at exact
16^3, 31^3, 500x700x1 and 1x128x1 and coverage 17x33x65, about 3.3 s each, and the class took
405.2 s against 219.5 s unconfined. Runs still going when the class ends, or past
``PRIME_TIMEOUT_S``, are stopped; one line after the class says what they compiled.

``PYTEST_GEMM_HARNESS_SEED``: ``auto`` (the default) seeds a confined class with more students
than are graded at once (``--jobs``): a class graded in one round compiles them in every student
at the same time, so there the runs would only compete with it; ``on`` seeds any confined class,
``off`` none.
"""
from __future__ import annotations

import contextlib
import os
import sys
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable, Iterator, Sequence

from ..kernels import confine
from ..kernels.cache_seed import SEED_ENV, still_written
from .gradebook_files import clip
from .processes import RunOutcome, run_with_limit

SWITCH_ENV = "PYTEST_GEMM_HARNESS_SEED"  # auto (the default), on or off: see the module's docstring
DISPATCH_ENV = "PYTEST_GEMM_DISPATCH"    # the fake GPU's test hook (checks/sandbox_child.py): nothing compiles
PRIME_TIMEOUT_S = 300.0  # beside the class, off its critical path: 65.7 s alone at cb1ae07 (an H100)
# fp32 with alpha and beta: every check's kernels at fp32, alphabeta's and beta_zero's included
# (tf32 inputs are fp32 too); fp16: those of 2-byte inputs (their guard bands and comparisons),
# which bf16's, stored as uint16, share. The speed check's own, at a size of its own (they do not
# depend on it): left out at e38e841 (an H100), the confined students' timed holds took 1.66 s at
# the median against 1.29 s unconfined, while the GPU waited for each; primed at cb1ae07, 1.26 s
# against 1.22 s. Not primed: the sweep's, what only bf16 uses, what only a failing kernel's
# diagnosis uses, and anything at another GPU's architecture: compiled on first use in each
# student's cache, as without a seed.
PRIMING_KERNELS = ("reference_kernels:regtile2d", "reference_kernels:wmma_fp16")
PRIMING_CHECKS = "not sweep and not compile"  # -k: the compile check is NVRTC's, not CuPy's
PRIMING_SPEED_SHAPE = "256x256x256"
PRIMING_ORDER = "pytest_gemm.grading.priming_order"  # -p: every check, last first (see that module)


def priming_commands() -> list[list[str]]:
    """The priming runs, two per kernel: our checks on our kernels, unconfined, one run last first
    (``PRIMING_ORDER``) and one in the students' order, at every shape of the full set, the speed
    check at ``PRIMING_SPEED_SHAPE`` (they run only where the gradebook found a GPU: ``why_no_seed``).
    The run in order keeps pace with the first round, so that a student who starts when one of
    them ends (a fault's, a hang's) finds its first checks' kernels in the seed: with the runs
    last first alone, such students compiled them again in caches of their own and were still
    warming up 7 to 10 s after the first round was (``7253405``, an H100). The roofs their speed
    checks need are the class's shared measurements, where the gradebook names them
    (``PYTEST_GEMM_MEASURE_CACHE``): measured once for the class."""
    base = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--gemm-confine", "none",
            "--gemm-shapes", "full", "--gemm-bench-shape", PRIMING_SPEED_SHAPE, "-k", PRIMING_CHECKS]
    orders = (["-p", PRIMING_ORDER], [])  # last first, then as the students run them
    return [base + order + ["--gemm-kernel", spec] for spec in PRIMING_KERNELS for order in orders]


class Priming:
    """The priming runs, started side by side in the background, their CuPy cache ``folder``/cupy
    (``seed``): CuPy writes each file whole under a temporary name, then renames it, so two runs
    may fill one cache and a student's copy never takes a half-written file. Their working folder,
    ``folder``/run, holds an empty ini so that no course's ini around the temporary directory applies."""

    def __init__(self, folder: Path, env: dict[str, str], timeout: float = PRIME_TIMEOUT_S):
        self.seed, work = folder / "cupy", folder / "run"
        self.seed.mkdir()
        work.mkdir()
        (work / "pytest.ini").write_text("[pytest]\n")
        run_env = dict(env, CUPY_CACHE_DIR=str(self.seed), PYTHONDONTWRITEBYTECODE="1")
        run_env.pop("PYTEST_GEMM_LOCK_LOG", None)  # the lock log is the students' holds
        self.timeout, self.stop = timeout, threading.Event()

        def one(cmd: list[str]) -> RunOutcome | OSError:
            try:
                return run_with_limit(cmd, cwd=work, timeout=timeout, env=run_env, grace=5.0, stop=self.stop)
            except OSError as exc:
                return exc

        commands = priming_commands()
        self._pool = ThreadPoolExecutor(len(commands))
        self._runs = [self._pool.submit(one, cmd) for cmd in commands]

    def finish(self, stop: bool = True) -> tuple[int, float, str | None]:
        """Wait for the runs (``stop``: stop those still running first): (the cache's files, the
        runs' seconds, what went wrong or None)."""
        if stop:
            self.stop.set()
        runs = [run.result() for run in self._runs]
        self._pool.shutdown()
        files = sum(1 for p in self.seed.iterdir() if p.is_file() and not still_written(p.name))
        seconds = max((run.elapsed_s for run in runs if not isinstance(run, OSError)), default=0.0)
        for run in runs:
            if isinstance(run, OSError):
                return files, seconds, f"a priming run could not start ({run})"
        for run in runs:
            if run.timed_out:
                if seconds < self.timeout and self.stop.is_set():
                    return files, seconds, f"the class ended before the priming runs did ({seconds:.1f} s)"
                return files, seconds, f"a priming run was still running after {self.timeout:g} s, so it was stopped"
        for run in runs:
            if run.returncode != 0:
                said = [line for line in run.output.splitlines() if line.strip()]
                return files, seconds, (f"a priming run failed (pytest exit status {run.returncode}: "
                                        f"{clip(said[-1] if said else 'no output', 200)})")
        if not files:
            return files, seconds, "the priming runs compiled nothing"
        return files, seconds, None


def students_confinement(extra_args: Sequence[str]) -> str:
    """The confinement the students' runs ask for: ``--gemm-confine`` among the gradebook's
    pytest arguments (the last one given), else ``auto``, the default of a grading run."""
    asked = "auto"
    for i, arg in enumerate(extra_args):
        if arg == "--gemm-confine" and i + 1 < len(extra_args):
            asked = extra_args[i + 1]
        elif arg.startswith("--gemm-confine="):
            asked = arg.split("=", 1)[1]
    return asked


def seed_asked(env: dict[str, str]) -> str | None:
    """What ``PYTEST_GEMM_HARNESS_SEED`` asks for: ``on``, ``off`` or ``auto`` (unset or empty:
    auto); None for another word."""
    word = env.get(SWITCH_ENV, "").strip().lower() or "auto"
    return word if word in ("on", "off", "auto") else None


def one_round(class_size: int | None, at_once: int | None) -> str | None:
    """Why ``auto`` does not seed a class graded in one round (no more students than ``at_once``),
    or None."""
    if class_size is None or at_once is None or class_size > at_once:
        return None
    students = "its one student is" if class_size == 1 else f"its {class_size} students are"
    return (f"{students} graded in one round ({at_once} at a time), each compiling them beside the others, "
            f"as the priming runs would before them; {SWITCH_ENV}=on seeds anyway")


def why_no_seed(extra_args: Sequence[str], env: dict[str, str], *, remote: str | None,
                no_gpu: Callable[[], str | None] | None) -> str | None:
    """Why this class gets no seed, or None. ``remote``: the Dask scheduler's address, whose
    workers may be other machines; ``no_gpu``: the GPU probe, where the gradebook has not run it."""
    if seed_asked(env) is None:
        return (f"{SWITCH_ENV}={env[SWITCH_ENV]!r} is none of auto, on and off; set it to auto (the default: a class "
                "graded in more than one round), on (any confined class) or off (none)")
    try:
        level = confine.resolve(students_confinement(extra_args))
    except ValueError as exc:
        return str(exc)
    if level == "none":
        return "the students run unconfined, so they share this machine's CuPy cache already"
    if remote:
        return f"the Dask workers of {remote} may be other machines, with CuPy caches of their own"
    if env.get(DISPATCH_ENV):
        return f"the checks are faked ({DISPATCH_ENV}): nothing to compile"
    return no_gpu() if no_gpu is not None else None


@contextlib.contextmanager
def harness_seed(extra_args: Sequence[str], *, remote: str | None = None,
                 no_gpu: Callable[[], str | None] | None = None, env: dict[str, str] | None = None,
                 class_size: int | None = None, at_once: int | None = None,
                 say: Callable[[str], None] = print) -> Iterator[dict[str, str]]:
    """What the students' environment adds for this class (``PYTEST_GEMM_CUPY_SEED``, or nothing),
    after one line on the terminal saying whether the harness's caches were seeded (none when
    turned off); the seed is removed when the block ends. ``class_size``, ``at_once``: the class's
    students and how many are graded at once, for ``auto``."""
    env = dict(os.environ if env is None else env)
    asked = seed_asked(env)
    if asked == "off":  # turned off: no run, no line
        yield {}
        return
    why = why_no_seed(extra_args, env, remote=remote, no_gpu=no_gpu)
    if why is None and asked == "auto":
        why = one_round(class_size, at_once)
    with contextlib.ExitStack() as stack:
        if why is None:
            made = tempfile.TemporaryDirectory(prefix="pytest-gemm-seed-", ignore_cleanup_errors=True)
            folder = Path(stack.enter_context(made))
            inside = confine.exposed_lock_dir(str(folder))  # the GPU lock folder's rule: in nothing a sandbox reads
            if inside is None:
                priming = Priming(folder, env)
                say(f"gradebook: harness caches seeded as they are compiled: {len(priming_commands())} priming runs "
                    "compile them beside the first students, and each confined student's cache starts as a copy of "
                    f"what they have compiled by then ({SWITCH_ENV}={asked})")
                try:
                    yield {SEED_ENV: str(priming.seed)}
                finally:
                    files, seconds, wrong = priming.finish()
                    say(f"gradebook: harness caches: {files} CuPy cache files compiled by the priming runs"
                        + (f" in {seconds:.1f} s" if wrong is None else f"; {wrong}"))
                return
            why = (f"its folder {folder} would be inside {inside}, which confined kernels read; set TMPDIR elsewhere"
                   "; each confined student compiles the harness's CuPy kernels itself, as before")
            stack.close()
        say(f"gradebook: harness caches not seeded: {why}")
        yield {}
