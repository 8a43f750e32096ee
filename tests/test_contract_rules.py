"""No rule stricter than the contract it names (issue 43, item 1; docs/verdicts.md, "Where each
rule comes from"): kernels that are correct by the contract, judged by the checks' own logic with
no GPU, must not fail. Each test here failed on the code before its fix.

- The launch check read occupancy, and asked the declaration's ``shared_mem``, at 64^3 whatever
  the kernel claimed. The kernel contract says a shape outside ``multiple_of`` is skipped, not
  failed (docs/kernels.md), so a declaration may refuse one; the launch check then failed the
  kernel as ``launch_error``, its root cause, with every other check a consequence.
- The determinism check called outputs that follow the call history ``stale_output`` ("it keeps
  state between calls ...; a call must compute C from A and B every time") even when every one of
  them was right for its inputs: a launcher whose first call at a shape leaves another summation
  order's result (an autotuner of its own) computed C from A and B every time. Its launches on the
  same inputs still differ, which the determinism rule (the plugin's contract: deterministic unless
  declared otherwise) fails as ``nondeterministic``; ``stale_output`` (BLAS: each call computes C
  from this call's A and B) is kept for outputs that are wrong for their inputs.
"""
from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

import fakegpu
from pytest_gemm.checks.launch import check_launch
from pytest_gemm.judges import history
from pytest_gemm.judges.history import Replay, judge_launches
from pytest_gemm.kernels.launch import LoadedKernel
from pytest_gemm.model import categories as cat
from pytest_gemm.model.contract import CudaKernel

TILED_128 = 'extern "C" __global__ void mm128(const float* A, const float* B, float* C, int M, int N, int K) {}'


def _smem_of_claimed_shapes(m: int, n: int, k: int) -> int:
    """A shared_mem callable written for the shapes its kernel claims, as the contract allows."""
    if m % 128 or n % 128 or k % 32:
        raise ValueError(f"{m}x{n}x{k} is not a shape this kernel claims (multiple_of=(128, 128, 32))")
    return 2 * (128 + 128) * 32 * 4


def _launch_harness(kernel: CudaKernel) -> Any:
    device = fakegpu.device()
    loaded = object.__new__(LoadedKernel)  # the real attributes(), on a stand-in for the loaded function
    loaded.kernel, loaded.device, loaded.compiled = kernel, device, None
    loaded._function = SimpleNamespace(num_regs=128, shared_size_bytes=0, local_size_bytes=0,
                                       max_threads_per_block=256)
    return SimpleNamespace(kernel=kernel, device=device, loaded=loaded, run=lambda problem, **kw: None)


def test_the_launch_check_asks_a_declaration_only_about_shapes_it_claims():
    kernel = CudaKernel(source=TILED_128, entry="mm128", block=(256,), tile=(128, 128), multiple_of=(128, 128, 32),
                        shared_mem=_smem_of_claimed_shapes, name="tiled 128")
    facts: dict[str, Any] = {}
    # the launch check's 64^3, rounded up to what the kernel claims (checks/cases.py), as collection makes it
    check_launch(_launch_harness(kernel), facts.update, (128, 128, 64))
    resources = facts["resources"]
    assert resources["dynamic_shared"] == _smem_of_claimed_shapes(128, 128, 64)
    assert resources["blocks_per_sm"] >= 1


def _random(seed: int, shape: tuple[int, int] = (16, 16)) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-1, 1, shape).astype(np.float32)


def _history_of(first: np.ndarray, later: np.ndarray, runs: int = 5) -> list[np.ndarray]:
    return [first] + [later.copy() for _ in range(runs - 1)]


def _judge(outputs: list[np.ndarray], right: Any) -> history.HistoryFinding | None:
    before, after = outputs[1], _random(99)
    replayed = Replay("replayed twice with a fresh call history (the CUDA module loaded again)",
                      [[history.digest(o) for o in outputs]] * 2, outputs)
    return judge_launches(outputs, before, after, lambda: replayed, before_right=True, right=right)


def test_outputs_that_follow_the_call_history_but_are_all_right_are_nondeterministic_not_stale():
    """Call 1 leaves the result of another summation order (its own tuner's last try), calls 2 to 5
    the chosen one's: every output within the bound, the same sequence in every fresh replay."""
    tuned, chosen = _random(1), _random(1)
    chosen[3, 4] = np.nextafter(chosen[3, 4], np.float32(2))  # one rounding apart: another order
    found = _judge(_history_of(tuned, chosen), right=lambda c: True)
    assert found is not None
    assert found.category == cat.NONDETERMINISTIC
    assert "every one of them" in found.summary and "call history" in found.summary
    assert "deterministic=False" in " ".join(found.details)
    assert found.call_history is None  # no state finding: the verdict does not put it in a race's place


def test_outputs_that_follow_the_call_history_and_are_wrong_stay_stale():
    """The rule the change keeps: later calls that return wrong values, the same way in every fresh
    replay (state kept between calls), are stale_output."""
    first, stale = _random(1), _random(2)
    found = _judge(_history_of(first, stale), right=lambda c: c is first)
    assert found is not None
    assert found.category == cat.STALE_OUTPUT
    assert found.call_history


@pytest.mark.parametrize("right_later", [True, False])
def test_a_race_is_nondeterministic_whatever_its_outputs(right_later):
    """Replays that differ from each other: chance, not history, right or wrong outputs alike."""
    outputs = [_random(1), _random(2), _random(1), _random(3), _random(1)]
    replayed = Replay("replayed twice with a fresh call history", [["a", "b"], ["a", "c"]], outputs[:2])
    found = judge_launches(outputs, outputs[0], _random(99), lambda: replayed, before_right=True,
                           right=lambda c: right_later)
    assert found is not None and found.category == cat.NONDETERMINISTIC


def _blas_orders(problem: Any, alpha: float, beta: float) -> dict[str, np.ndarray]:
    """C = alpha*A@B + beta*C in float32, in orders the BLAS documentation allows: reference
    SGEMM's own (``C := beta*C``, then ``TEMP = ALPHA*B(L,J)``; ``C(I,J) = C(I,J) + TEMP*A(I,L)``,
    alpha applied to B before the products), and a tiled kernel's epilogue ``alpha*acc + beta*C``
    with its fused (fma) twin."""
    f = np.float32
    a, b = problem.a.astype(f), problem.b.astype(f)
    al, be = f(alpha), f(beta)
    c0 = problem.c0.astype(f)
    blas = np.zeros((problem.m, problem.n), f) if beta == 0 else c0.copy() if beta == 1 else (be * c0).astype(f)
    if alpha != 0:  # reference SGEMM returns before the products when alpha == 0
        for col in range(problem.k):
            blas = (blas + ((al * b[col, :]).astype(f)[None, :] * a[:, col:col + 1]).astype(f)).astype(f)
    acc = np.zeros((problem.m, problem.n), f)
    for col in range(problem.k):
        acc = (acc + (a[:, col:col + 1] * b[col, :][None, :]).astype(f)).astype(f)
    epilogue = (al * acc).astype(f) if beta == 0 else ((al * acc).astype(f) + (be * c0).astype(f)).astype(f)
    fused = (al * acc).astype(f) if beta == 0 else \
        (np.float64(al) * acc + (be * c0).astype(f).astype(np.float64)).astype(f)  # one rounding, as fmaf
    return {"reference SGEMM": blas, "alpha*acc + beta*C": epilogue, "fmaf(alpha, acc, beta*C)": fused}


@pytest.mark.parametrize("alpha", [0.0, 1.0, 0.7])
@pytest.mark.parametrize("beta", [0.0, 1.0, 1.3])
def test_the_alpha_beta_check_passes_every_order_blas_allows(alpha, beta):
    """The alpha/beta check's judgement (checks/alphabeta.py) on its own inputs: bit for bit where
    alpha and beta are 0 or 1 (exact inputs: every order gives the exact result, the sign of zero
    aside), within the fp32 bound elsewhere; reference SGEMM's own order (alpha times B first)
    included. Passes on today's code: the evidence that this rule is no stricter than BLAS."""
    from pytest_gemm.checks.cases import ALPHA_BETA_SHAPE
    from pytest_gemm.judges.bounds import check_accuracy
    from pytest_gemm.judges.diagnose import diagnose
    from pytest_gemm.judges.epilogue import explain_epilogue
    from pytest_gemm.judges.inputs import exact_inputs
    from pytest_gemm.judges.reference import abs_gauge, reference

    problem = exact_inputs(*ALPHA_BETA_SHAPE, precision="fp32", seed=3, with_c=True)  # the check's inputs
    c_old = problem.c0 if beta != 0 else None
    ref = reference(problem.a64, problem.b64, alpha=alpha, beta=beta, c0=c_old)
    gauge = abs_gauge(problem.a64, problem.b64, alpha=alpha, beta=beta, c0=c_old)
    for order, got in _blas_orders(problem, alpha, beta).items():
        assert explain_epilogue(got, problem.a64, problem.b64, c_old, alpha, beta) is None, order
        if alpha in (0.0, 1.0) and beta in (0.0, 1.0):
            assert diagnose(got, ref) is None, order
        else:
            assert check_accuracy(got, ref, gauge, problem.k, "fp32").passed, order
