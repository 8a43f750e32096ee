"""3xTF32 (CUTLASS's fast fp32 tensor-core GEMMs: each input split into a TF32 big and small
part, small x small dropped) on the exact inputs: the model (judges/patterns.py), the exact
judge's finding and the kernel's verdict. Pure numpy, no GPU; the kernel that shows it on the
GPU is tests/verdicts/three_tf32.cu (tests/test_verdicts_gpu.py)."""
from __future__ import annotations

import numpy as np
import pytest

from pytest_gemm.checks.cases import ACCURACY_SHAPES, EXACT_SHAPES
from pytest_gemm.judges.diagnose import diagnose
from pytest_gemm.judges.inputs import exact_inputs
from pytest_gemm.judges.patterns import THREE_TF32, split_tf32, three_tf32
from pytest_gemm.model import categories as cat
from pytest_gemm.outputs.records import CheckRecord
from pytest_gemm.outputs.verdicts import kernel_verdict


def test_the_split_and_the_product_by_hand():
    # 4093 = 0b1111_1111_1101 and 4095 = 0b1111_1111_1111 need 12 significant bits; TF32 holds 11
    x = np.array([[4093.0, 4095.0]])
    assert split_tf32(x, "toward zero")[0].tolist() == [[4092.0, 4094.0]]   # CUTLASS: the bits & 0xffffe000
    assert split_tf32(x, "toward zero")[1].tolist() == [[1.0, 1.0]]
    assert split_tf32(x, "nearest, ties away")[0].tolist() == [[4094.0, 4096.0]]
    assert split_tf32(x, "nearest, ties to even")[0].tolist() == [[4092.0, 4096.0]]
    assert split_tf32(x, "nearest, ties to even")[1].tolist() == [[1.0, -1.0]]
    # small is x - big rounded to TF32, half an ulp away from zero (round_half_ulp_truncate):
    # x = 1 + 2**-10 + 2**-11 + 2**-22, big = 1 + 2**-10, x - big = 2**-11 + 2**-22 is half an ulp
    # (2**-21 at 2**-11) above 2**-11
    big, small = split_tf32(np.array([1 + 2.0 ** -10 + 2.0 ** -11 + 2.0 ** -22]))
    assert big.tolist() == [1 + 2.0 ** -10] and small.tolist() == [2.0 ** -11 + 2.0 ** -21]
    a, b = np.array([[4093.0]]), np.array([[4095.0]])
    # toward zero: 1*4094 + 4092*1 + 4092*4094, the dropped small x small is 1*1
    assert three_tf32(a, b).tolist() == [[4093.0 * 4095 - 1]]
    # ties to even: 4093 -> 4092 + 1, 4095 -> 4096 - 1: the dropped product is -1
    assert three_tf32(a, b, "nearest, ties to even").tolist() == [[4093.0 * 4095 + 1]]
    assert three_tf32(np.array([[2047.0]]), np.array([[4095.0]])).tolist() == [[2047.0 * 4095]]  # 2047 is exact


def _output(shape, big="toward zero", seed=0):
    p = exact_inputs(*shape, seed=seed)
    return p, three_tf32(p.a64, p.b64, big).astype(np.float32)


@pytest.mark.parametrize("big", ["toward zero", "nearest, ties away", "nearest, ties to even"])
@pytest.mark.parametrize("shape, seed", [((500, 700, 1), 0), ((4096, 4096, 1), 0), ((1, 128, 1), 11)])
def test_the_exact_judge_names_3xtf32(shape, seed, big):
    """Before: wrong_values, "18810 elements are wrong, all in tiles at ...". A kernel that
    multiplies by a documented fp32 emulation is not a logic error."""
    p, got = _output(shape, big, seed)
    d = diagnose(got, p.a64 @ p.b64, tile=(16, 16), a64=p.a64, b64=p.b64)
    assert d is not None and d.category == cat.PRECISION_TOO_LOW and d.emulation == "3xTF32"
    assert d.summary == THREE_TF32 and "not IEEE fp32 products" in d.summary
    assert "declare precision=\"tf32\"" in d.details[-1] and "fp32 FMA" in d.details[-1]
    assert ("ties to even" in d.details[-2]) == (big == "nearest, ties to even")


def test_where_no_input_needs_a_12th_bit_3xtf32_is_exact():
    # the suite's (1, 128, 1): A's one value, 158, is exact in TF32, so nothing is dropped
    p, got = _output((1, 128, 1))
    assert diagnose(got, p.a64 @ p.b64, a64=p.a64, b64=p.b64) is None


def test_inputs_rounded_to_tf32_keep_their_own_finding():
    """tf32_inside_fp32 (to nearest) and a TF32 tensor core fed float32 (truncation): A@B of the
    rounded inputs, not 3xTF32."""
    from pytest_gemm.model.precision import round_to_tf32

    p = exact_inputs(500, 700, 1)
    rounded = round_to_tf32(p.a64).astype(np.float64) @ round_to_tf32(p.b64).astype(np.float64)
    d = diagnose(rounded.astype(np.float32), p.a64 @ p.b64, a64=p.a64, b64=p.b64)
    assert d.category == cat.PRECISION_TOO_LOW and d.emulation is None
    assert d.summary.startswith("the result is exactly A@B with the inputs rounded to fp16 or TF32")
    big_only = split_tf32(p.a64)[0] @ split_tf32(p.b64)[0]   # big x big alone: truncated inputs
    d = diagnose(big_only.astype(np.float32), p.a64 @ p.b64, a64=p.a64, b64=p.b64)
    assert d.emulation is None and "TF32 by truncation" in d.summary


@pytest.mark.parametrize("base", ["exact", "3xTF32"])
def test_one_element_off_by_one_is_still_a_wrong_value(base):
    """A real bug, alone or on top of 3xTF32, is not explained by the model."""
    p, got = _output((500, 700, 1))
    want = p.a64 @ p.b64
    if base == "exact":
        got = want.astype(np.float32)
    r, c = np.random.default_rng(1).integers(0, (500, 700))
    got[r, c] += 1.0 if got[r, c] == want[r, c] else 2.0
    d = diagnose(got, want, tile=(16, 16), a64=p.a64, b64=p.b64)
    assert d.category == cat.WRONG_VALUES and d.emulation is None


def _records(model):
    """The exact and accuracy records of a kernel whose output is ``model(a64, b64)`` on the
    exact inputs, as checks/exact.py writes them, and passing accuracy checks."""
    records = []
    for shape in EXACT_SHAPES:
        base = dict(kernel="k", precision="fp32", check="exact", shape=list(shape), params={})
        if shape[2] > 3:  # exact inputs within 2**11: 3xTF32 drops nothing (and re-multiplying takes long)
            records.append(CheckRecord.from_dict({**base, "outcome": "passed"}))
            continue
        p = exact_inputs(*shape)
        d = diagnose(model(p.a64, p.b64).astype(np.float32), p.a64 @ p.b64, tile=(16, 16), a64=p.a64, b64=p.b64)
        if d is None:
            records.append(CheckRecord.from_dict({**base, "outcome": "passed"}))
            continue
        facts = {"emulated_fp32": d.emulation} if d.emulation else {}
        records.append(CheckRecord.from_dict({**base, "outcome": "failed", "category": d.category,
                                              "summary": d.summary, "details": d.details, **facts}))
    return records + [CheckRecord.from_dict(dict(kernel="k", precision="fp32", check="accuracy", shape=list(s),
                                                 params={"dist": "uniform"}, outcome="passed"))
                      for s in ACCURACY_SHAPES]


def test_a_3xtf32_kernel_s_verdict_is_precision_too_low_with_that_diagnosis():
    """Before: wrong_values ("18810 elements are wrong, ..."): no accuracy failure, so
    precision_too_low had no evidence."""
    records = _records(three_tf32)
    assert sum(r.failed for r in records) == 2  # 4096x4096x1 and 500x700x1
    v = kernel_verdict(records)
    assert (v.status, v.primary_category, v.diagnosis) == ("failed", cat.PRECISION_TOO_LOW, THREE_TF32)
    assert v.primary_check == "exact 500x700x1" and v.consequences == []


def test_3xtf32_with_a_real_bug_besides_is_wrong_values():
    def off_by_one(a, b):
        out = three_tf32(a, b)
        out[0, 0] += 2.0
        return out
    v = kernel_verdict(_records(off_by_one))
    assert v.primary_category == cat.WRONG_VALUES


def _rec(check, outcome="passed", category=None, shape=(500, 700, 1), **facts):
    return CheckRecord.from_dict(dict(kernel="k", precision="fp32", check=check, shape=list(shape), params={},
                                      outcome=outcome, category=category,
                                      message=f"[{category}] {THREE_TF32}" if category else None, **facts))


def test_the_3xtf32_rule_needs_its_fact_a_passing_accuracy_check_and_nothing_else_wrong():
    emulated = _rec("exact", "failed", cat.PRECISION_TOO_LOW, emulated_fp32="3xTF32")
    accuracy = _rec("accuracy", shape=(256, 256, 16))
    assert kernel_verdict([emulated, accuracy]).primary_category == cat.PRECISION_TOO_LOW
    # no accuracy evidence: accuracy to about fp32 is not shown, as before
    assert kernel_verdict([emulated]).primary_category == cat.WRONG_VALUES
    # rounded inputs (no emulated_fp32 fact) still need accuracy failures at two K (rule 11)
    rounded = _rec("exact", "failed", cat.PRECISION_TOO_LOW)
    assert kernel_verdict([rounded, accuracy]).primary_category == cat.WRONG_VALUES
    # another wrong value (an exact logic error, an accuracy failure) is not explained by 3xTF32
    for other in (_rec("exact", "failed", cat.WRONG_VALUES, (17, 33, 65)),
                  _rec("accuracy", "failed", cat.PRECISION_TOO_LOW, (129, 131, 4096))):
        assert kernel_verdict([emulated, accuracy, other]).primary_category == cat.WRONG_VALUES
    # a more fundamental failure stays the root cause
    assert kernel_verdict([emulated, accuracy, _rec("coverage", "failed", cat.UNWRITTEN_OUTPUT)]
                          ).primary_category == cat.UNWRITTEN_OUTPUT


@pytest.mark.gemm_nvrtc
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_the_gpu_kernel_compiles_to_three_tf32_mmas(arch):
    """tests/verdicts/three_tf32.cu (tests/test_verdicts_gpu.py runs it): WMMA TF32 on sm_80 and
    sm_90, three MMAs per K step (small x small is not computed), small rounded by cvt.rna."""
    from pathlib import Path

    from suite_helpers import compile_fresh, load_declarations, nvrtc_missing

    if nvrtc_missing() is not None:
        pytest.skip(str(nvrtc_missing()))
    from pytest_gemm.kernels.compiler import compile_for_arch

    kernels = load_declarations(Path(__file__).resolve().parent / "verdicts" / "kernels.py", "gemm_verdict_kernels")
    assert compile_fresh(kernels.three_tf32, arch).resources.spills == 0
    code = compile_for_arch(kernels.three_tf32, arch, output="ptx").code
    ptx = code.decode() if isinstance(code, bytes) else str(code)
    assert ptx.count("wmma.mma.sync.aligned.row.row.m16n16k8.f32.tf32.tf32.f32") == 3
    assert "cvt.rna.tf32.f32" in ptx
