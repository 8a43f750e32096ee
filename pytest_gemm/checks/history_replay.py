"""Replay a kernel's launches with a fresh call history. A CUDA kernel: its module loaded
again in this process (its ``__device__`` variables start from their initial values). A
Python launcher: two fresh processes at once, each loading the kernel by its spec and
launching it ``runs`` times on the determinism check's inputs (uniform random, by seed); they
report the digests of the outputs (judges/history.py compares them) and the outputs
themselves (``.npy`` beside the report, to name what changed). The sandbox
(checks/sandbox.py) is not involved, and the replay is bounded by ``DEADLINE`` so that it
never costs the check its time limit.

    python -m pytest_gemm.checks.history_replay SPEC INDEX ROOTDIR M N K RUNS SEED OUT.json
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import copy
from ..judges.history import Replay, digest
from .common import run_kernel, to_numpy
from ..judges.history import Replay
from ..judges.history import digest
from ..judges.inputs import random_inputs
from ..kernels.device import require_device
from ..kernels.harness import harness_for
from ..kernels.loader import load_spec

DEADLINE = 12.0  # seconds for both replays together (start-up, compile, launches)
REPLAYS = 2


def with_fresh_history(h: Any) -> Any:
    """A copy of the harness ``h`` whose CUDA kernel is loaded again (a fresh call history), or
    None for a Python launcher (its state lives in its process)."""

    if h.loaded.compiled is None:
        return None
    fresh = copy.copy(h)
    fresh.loaded = h.loaded.fresh()
    return fresh


def replay_fresh_history(h: Any, problem: Any, runs: int) -> Any:
    """``runs`` launches on ``problem``, twice, each time with a fresh call history."""

    if h.loaded.compiled is None:
        return replay_in_fresh_processes(h.kernel, problem.shape, runs, problem.seed)
    digests, first = [], []
    for _ in range(REPLAYS):
        fresh = with_fresh_history(h)
        outs = [to_numpy(run_kernel(fresh, problem).c) for _ in range(runs)]
        digests.append([digest(o) for o in outs])
        first = first or outs
    return Replay("replayed twice with a fresh call history (the CUDA module loaded again)", digests, first)


def replay_in_fresh_processes(kernel: Any, shape: tuple[int, int, int], runs: int, seed: int) -> Any:

    origin = getattr(kernel, "origin_spec", None)
    if origin is None:
        return Replay("a Python launcher not loaded from a --gemm-kernel spec cannot be replayed in a fresh process")
    spec, index = origin
    with tempfile.TemporaryDirectory(prefix="gemm-replay-") as tmp:
        outs = [Path(tmp) / f"replay{i}.json" for i in range(REPLAYS)]
        procs = [subprocess.Popen([sys.executable, "-m", __name__, spec, str(index), os.getcwd(), *map(str, shape),
                                   str(runs), str(seed), str(out)],
                                  stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                 # in this process's group: ending the kernel's process (a timeout) ends its replays too
                 for out in outs]
        deadline = time.monotonic() + DEADLINE
        late = False
        for proc in procs:
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                late = True
                proc.kill()
                proc.wait()
        if late:
            return Replay(f"the replays in fresh processes took longer than {DEADLINE:g} s")
        return read_replays(outs, runs)


def read_replays(reports: list[Path], runs: int) -> Any:
    """What the replay processes wrote: each its digests (``.json``, written last), the first
    also its outputs (``.<call>.npy``)."""

    try:
        digests = [json.loads(path.read_text())["digests"] for path in reports]
        outputs = [np.load(reports[0].with_suffix(f".{i}.npy")) for i in range(runs)]
    except (OSError, ValueError, KeyError):
        return Replay("a replay in a fresh process failed (the kernel could not be loaded or launched there)")
    return Replay("replayed twice in fresh processes", digests, outputs)


def main(argv: list[str]) -> int:
    spec, index, rootdir, m, n, k, runs, seed, out = argv

    if rootdir not in sys.path:
        sys.path.insert(0, rootdir)
    kernel = load_spec(spec, Path(rootdir), each=True)[int(index)]
    h = harness_for(kernel, require_device())
    problem = random_inputs(int(m), int(n), int(k), precision=kernel.precision, distribution="uniform",
                            seed=int(seed))
    outputs = [to_numpy(run_kernel(h, problem).c) for _ in range(int(runs))]
    for i, c in enumerate(outputs):  # the outputs themselves, for naming what changed
        np.save(Path(out).with_suffix(f".{i}.npy"), c)
    Path(out).write_text(json.dumps({"digests": [digest(c) for c in outputs]}))  # written last: complete
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
