"""The harness's own CuPy kernels compiled once for a class graded confined (issues 44, 47).

A confined student's kernel process starts with a CuPy cache of its own, empty
(``kernels/confine.py`` ``compile_caches``), so every student compiled again the kernels that
pytest-gemm's checks use (filling sentinels, comparing, references): 37.4 s of a correct
student's 81.2 s at the median, in a class of 100 on an H200 at ``805b9ae``. Before such a class
the gradebook runs pytest-gemm's own correctness checks once on shipped reference kernels
(``PRIMING_KERNELS``), unconfined, with ``CUPY_CACHE_DIR`` in a fresh folder of its own, and
names that folder to the students' runs (``PYTEST_GEMM_CUPY_SEED``): each kernel's CuPy cache
then starts as a copy of it (``kernels/cache_seed.py``). Only our code and our kernels ran in
that run, so what it compiled is trusted; the folder is the grader's, in its temporary
directory, and bound into no sandbox. A priming run that fails or overruns
``PRIME_TIMEOUT_S`` leaves no seed and the class is graded as before.

Not measured on a GPU yet, so it is asked for (``PYTEST_GEMM_HARNESS_SEED=on``), not the default:
the priming run costs its own time before the first student starts, which a small class (the
course example's five) may not win back. ``CLASS_SEED=on bash tools/gpu_session.sh class``
measures a class with it, against the same stage without.
"""
from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from pathlib import Path
from typing import Callable, Iterator, Sequence

from ..kernels import confine
from ..kernels.cache_seed import SEED_ENV
from .gradebook_files import clip
from .processes import run_with_limit

SWITCH_ENV = "PYTEST_GEMM_HARNESS_SEED"  # on: the priming run and the seed; off or unset (the default): neither
DISPATCH_ENV = "PYTEST_GEMM_DISPATCH"    # the fake GPU's test hook (checks/sandbox_child.py): nothing compiles
PRIME_TIMEOUT_S = 120.0
# fp32 with alpha and beta: every correctness check's kernels at fp32, alphabeta's and beta_zero's
# included (tf32 inputs are fp32 too); fp16: those of 2-byte inputs (their guard bands and
# comparisons), which bf16's, stored as uint16, share. Not primed: the speed and sweep checks' own
# (verifying the timed outputs), what only bf16 uses, and anything at another GPU's architecture:
# compiled on first use in each student's cache, as without a seed.
PRIMING_KERNELS = ("reference_kernels:regtile2d", "reference_kernels:wmma_fp16")
PRIMING_CHECKS = "not speed and not sweep and not compile"  # -k: the compile check is NVRTC's, not CuPy's


def priming_command() -> list[str]:
    """The priming run: our correctness checks on our kernels, unconfined, at the quick shapes (it
    runs only where the gradebook found a GPU: ``why_no_seed``)."""
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--gemm-confine", "none",
           "--gemm-shapes", "quick", "-k", PRIMING_CHECKS]
    for spec in PRIMING_KERNELS:
        cmd += ["--gemm-kernel", spec]
    return cmd


def prime(folder: Path, env: dict[str, str], timeout: float = PRIME_TIMEOUT_S) -> tuple[int, float, str | None]:
    """Run the priming run with its CuPy cache in ``folder``/cupy: (the cache's files, its
    seconds, why there is no seed or None). Its working folder, ``folder``/run, holds an empty
    ini so that no course's ini around the temporary directory applies."""
    seed, work = folder / "cupy", folder / "run"
    seed.mkdir()
    work.mkdir()
    (work / "pytest.ini").write_text("[pytest]\n")
    run_env = dict(env, CUPY_CACHE_DIR=str(seed), PYTHONDONTWRITEBYTECODE="1")
    run_env.pop("PYTEST_GEMM_LOCK_LOG", None)  # the lock log is the students' holds
    try:
        run = run_with_limit(priming_command(), cwd=work, timeout=timeout, env=run_env, grace=5.0)
    except OSError as exc:
        return 0, 0.0, f"the priming run could not start ({exc})"
    files = sum(1 for p in seed.iterdir() if p.is_file())
    if run.timed_out:
        return files, run.elapsed_s, f"the priming run was still running after {timeout:g} s, so it was stopped"
    if run.returncode != 0:
        said = [line for line in run.output.splitlines() if line.strip()]
        return files, run.elapsed_s, (f"the priming run failed (pytest exit status {run.returncode}: "
                                      f"{clip(said[-1] if said else 'no output', 200)})")
    if not files:
        return files, run.elapsed_s, "the priming run compiled nothing"
    return files, run.elapsed_s, None


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


def seed_asked(env: dict[str, str]) -> bool | None:
    """Whether ``PYTEST_GEMM_HARNESS_SEED`` asks for the seed (unset: no); None for a word that is
    neither on nor off."""
    return {"on": True, "off": False, "": False}.get(env.get(SWITCH_ENV, "").strip().lower())


def why_no_seed(extra_args: Sequence[str], env: dict[str, str], *, remote: str | None,
                no_gpu: Callable[[], str | None] | None) -> str | None:
    """Why this class gets no seed, or None. ``remote``: the Dask scheduler's address, whose
    workers may be other machines; ``no_gpu``: the GPU probe, where the gradebook has not run it."""
    if seed_asked(env) is None:
        return f"{SWITCH_ENV}={env[SWITCH_ENV]!r} is neither on nor off; set it to on to seed, off (the default) not to"
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
                 say: Callable[[str], None] = print) -> Iterator[dict[str, str]]:
    """What the students' environment adds for this class (``PYTEST_GEMM_CUPY_SEED``, or nothing),
    after one line on the terminal saying whether the harness's caches were seeded; the seed is
    removed when the block ends."""
    env = dict(os.environ if env is None else env)
    if seed_asked(env) is False:  # not asked for (the default until measured): no run, no line
        yield {}
        return
    why = why_no_seed(extra_args, env, remote=remote, no_gpu=no_gpu)
    with contextlib.ExitStack() as stack:
        if why is None:
            made = tempfile.TemporaryDirectory(prefix="pytest-gemm-seed-", ignore_cleanup_errors=True)
            folder = Path(stack.enter_context(made))
            inside = confine.exposed_lock_dir(str(folder))  # the GPU lock folder's rule: in nothing a sandbox reads
            if inside is None:
                files, seconds, why = prime(folder, env)
            else:
                why = f"its folder {folder} would be inside {inside}, which confined kernels read; set TMPDIR elsewhere"
            if why is None:
                say(f"gradebook: harness caches seeded: {files} CuPy cache files compiled by one priming run in "
                    f"{seconds:.1f} s, copied into each confined student's cache ({SWITCH_ENV}=on)")
                yield {SEED_ENV: str(folder / "cupy")}
                return
            why += "; each confined student compiles the harness's CuPy kernels itself, as before"
            stack.close()  # the failed run's folder, before the class
        say(f"gradebook: harness caches not seeded: {why}")
        yield {}
