"""Diagnosis of wrong outputs: each pattern emulated in numpy the way a broken kernel produces it."""
from __future__ import annotations

import pickle

import numpy as np
import pytest

from pytest_gemm.model import categories
from pytest_gemm.model.categories import GemmCheckFailure
from pytest_gemm.judges.diagnose import Diagnosis, assert_bit_identical, compare_runs, diagnose
from pytest_gemm.judges.sentinels import POISON_BITS, poison, unwritten_mask
from pytest_gemm.judges.inputs import exact_inputs
from pytest_gemm.judges.reference import reference

TILE = (16, 16)


def problem(m: int, n: int, k: int, seed: int = 0):
    p = exact_inputs(m, n, k, seed=seed)
    return p, reference(p.a64, p.b64)


def kernel_output(want: np.ndarray, written: np.ndarray | None = None) -> np.ndarray:
    """C as a kernel leaves it: poisoned first, then the correct value where it wrote."""
    c = poison(want.shape)
    mask = np.ones(want.shape, bool) if written is None else written
    c[mask] = want.astype(np.float32)[mask]
    return c


def summary_of(got, want, **kw) -> Diagnosis:
    d = diagnose(got, want, **kw)
    assert d is not None
    return d


# -- categories -------------------------------------------------------------------

def test_categories_constants():
    assert categories.WRONG_VALUES == "wrong_values"
    assert len(categories.ALL) == 17 and len(set(categories.ALL)) == 17  # alpha_zero_reads_ab is a note (issue 43); vendor_kernel (46)
    assert "wrong_stream" in categories.ALL  # work off the caller's stream: its own category, not timing_escape
    assert categories.NOTES == ("alpha_zero_reads_ab",) and not set(categories.NOTES) & set(categories.ALL)
    assert "harness_out_of_memory" in categories.ALL  # the harness's problem, not the kernel's
    assert set(categories.HARNESS_FAILURES) == {"harness_out_of_memory", "harness_error"} <= set(categories.ALL)
    assert "timing_escape" in categories.ALL and "stale_output" in categories.ALL


def test_gemm_check_failure_message():
    e = GemmCheckFailure("unwritten_output", "columns 3..4 were\nnever written", ["a", "b"])
    assert isinstance(e, AssertionError)
    assert e.category == "unwritten_output" and e.summary == "columns 3..4 were never written"
    assert str(e) == "[unwritten_output] columns 3..4 were never written\n  a\n  b"
    again = pickle.loads(pickle.dumps(e))
    assert str(again) == str(e) and again.details == ["a", "b"]
    with pytest.raises(ValueError, match="unknown failure category 'oops'"):
        GemmCheckFailure("oops", "x")


# -- poison -----------------------------------------------------------------------

def test_poison_bits():
    c = poison((3, 4))
    assert c.dtype == np.float32 and c.shape == (3, 4)
    assert np.all(np.isnan(c)) and np.all(c.view(np.uint32) == POISON_BITS)
    assert unwritten_mask(c).all()
    c[1, 2] = 0.0
    c[0, 0] = np.nan  # a computed NaN is not the poison
    mask = unwritten_mask(c)
    assert not mask[1, 2] and not mask[0, 0] and mask.sum() == 10


# -- correct outputs pass ---------------------------------------------------------------

def _orders(a: np.ndarray, b: np.ndarray) -> list[np.ndarray]:
    def seq(ks):
        c = np.zeros((a.shape[0], b.shape[1]), np.float32)
        for k in ks:
            c = c + a[:, k:k + 1] * b[k:k + 1, :]
        return c
    k = a.shape[1]
    halves = (seq(range(0, k, 2)) + seq(range(1, k, 2))).astype(np.float32)
    return [seq(range(k)), seq(range(k - 1, -1, -1)), np.matmul(a, b), halves]


@pytest.mark.parametrize("shape", [(1, 1, 1), (33, 17, 1), (1, 64, 300), (40, 40, 1000)])
def test_correct_orders_are_bit_identical(shape):
    p, want = problem(*shape)
    for got in _orders(p.a, p.b):
        assert diagnose(kernel_output(got), want, tile=TILE, a64=p.a64, b64=p.b64) is None
        assert_bit_identical(got, want, tile=TILE)
        assert compare_runs(got, got.copy()) is None


def test_negative_zero_equals_zero():
    want = np.zeros((2, 2))
    got = np.array([[-0.0, 0.0], [0.0, -0.0]], np.float32)
    assert diagnose(got, want) is None


# -- unwritten regions ----------------------------------------------------------------

def test_ragged_columns_never_written():
    p, want = problem(40, 1000, 24)
    written = np.ones(want.shape, bool)
    written[:, 992:] = False  # a kernel that only handles whole 16-wide tiles
    d = summary_of(kernel_output(want, written), want, tile=TILE)
    assert d.category == categories.UNWRITTEN_OUTPUT
    assert d.summary.startswith("columns 992..999")
    assert "were never written: N=1000 is not a multiple of your 16-wide tile" in d.summary
    assert d.count == 40 * 8 and d.first[:2] == (0, 992)
    text = "\n".join(d.details)
    assert "320 of 40000 elements" in text and "row 0, col 992" in text and "poison" in text


def test_ragged_rows_never_written():
    p, want = problem(1000, 24, 8)
    written = np.ones(want.shape, bool)
    written[992:] = False
    d = summary_of(kernel_output(want, written), want, tile=(32, 8))
    assert "rows 992..999" in d.summary and "M=1000 is not a multiple of your 32-tall tile" in d.summary


def test_ragged_rows_and_columns_never_written():
    p, want = problem(40, 50, 8)
    written = np.zeros(want.shape, bool)
    written[:32, :48] = True
    d = summary_of(kernel_output(want, written), want, tile=TILE)
    assert "columns 48..49" in d.summary and "rows 32..39" in d.summary
    assert "N=50 is not a multiple of your 16-wide tile" in d.summary
    assert "M=40 is not a multiple of your 16-tall tile" in d.summary


def test_trailing_columns_without_tile():
    p, want = problem(8, 100, 4)
    written = np.ones(want.shape, bool)
    written[:, 96:] = False
    d = summary_of(kernel_output(want, written), want)
    assert "columns 96..99 (the last 4) were never written" in d.summary
    assert "multiple" not in d.summary


def test_columns_not_matching_the_tile_tail_are_not_blamed_on_it():
    p, want = problem(8, 100, 4)
    written = np.ones(want.shape, bool)
    written[:, 90:] = False  # 10 columns, but N % 16 == 4
    d = summary_of(kernel_output(want, written), want, tile=TILE)
    assert "columns 90..99" in d.summary and "multiple" not in d.summary


def test_plain_trailing_columns_beat_tile_patterns():
    p, want = problem(64, 40, 8)
    written = np.ones(want.shape, bool)
    written[:, 20:] = False  # starts mid-tile: not the ragged tail, not a per-tile pattern
    d = summary_of(kernel_output(want, written), want, tile=TILE)
    assert d.summary == "columns 20..39 (the last 20) were never written"


def test_last_tile_row_partly_unwritten():
    p, want = problem(40, 64, 8)
    written = np.ones(want.shape, bool)
    written[32:, ::2] = False  # every other element of the ragged last tile row
    d = summary_of(kernel_output(want, written), want, tile=TILE)
    assert "only the last tile row (blockIdx.y = 2)" in d.summary and "4 of 12 tiles" in d.summary


def test_nothing_written():
    p, want = problem(10, 12, 3)
    d = summary_of(poison(want.shape), want, tile=TILE)
    assert d.category == categories.UNWRITTEN_OUTPUT
    assert "no element of C was written" in d.summary
    assert "smaller than your 16x16 tile" in d.summary
    d = summary_of(poison((40, 40)), problem(40, 40, 3)[1], tile=TILE)
    assert "smaller" not in d.summary and any("argument order" in line for line in d.details)


def test_one_whole_tile_never_written():
    p, want = problem(64, 64, 8)
    written = np.ones(want.shape, bool)
    written[16:32, 48:64] = False
    d = summary_of(kernel_output(want, written), want, tile=TILE)
    assert "(blockIdx.y, blockIdx.x) = (1, 3)" in d.summary and "1 of 16 tiles" in d.summary
    assert "was never written" in d.summary


def test_several_whole_tiles():
    p, want = problem(64, 64, 8)
    written = np.ones(want.shape, bool)
    for r, c in [(0, 0), (1, 2), (3, 1)]:
        written[r * 16:(r + 1) * 16, c * 16:(c + 1) * 16] = False
    d = summary_of(kernel_output(want, written), want, tile=TILE)
    assert "(0, 0), (1, 2), (3, 1)" in d.summary and "3 of 16 tiles" in d.summary


def test_same_part_of_every_tile():
    p, want = problem(64, 64, 8)
    written = np.ones(want.shape, bool)
    written.reshape(4, 16, 4, 16)[:, 8:, :, :] = False  # block of 16x8 threads, one element each
    d = summary_of(kernel_output(want, written), want, tile=TILE)
    assert d.summary.startswith("rows 8..15 of every 16x16 tile were never written")
    assert any("cover the whole tile" in line for line in d.details)


def test_last_tile_column_partly_wrong():
    p, want = problem(64, 40, 8)
    got = want.astype(np.float32)
    rows = np.arange(64)
    got[rows, 32 + rows % 8] += 1  # scattered errors, all in the ragged last tile column
    d = summary_of(got, want, tile=TILE)
    assert d.category == categories.WRONG_VALUES
    assert "only the last tile column (blockIdx.x = 2)" in d.summary and "4 of 12 tiles" in d.summary


def test_wrong_values_in_ragged_tail():
    p, want = problem(20, 1000, 16)
    got = want.astype(np.float32)
    got[:, 992:] = 12345.0  # unguarded loads of the partial tile
    d = summary_of(got, want, tile=TILE)
    assert d.category == categories.WRONG_VALUES
    assert "columns 992..999 (the last 8) are wrong: N=1000 is not a multiple of your 16-wide tile" in d.summary


def test_unwritten_plus_wrong_mentions_both():
    p, want = problem(32, 40, 8)
    written = np.ones(want.shape, bool)
    written[:, 32:] = False
    got = kernel_output(want, written)
    got[5, 5] += 3
    d = summary_of(got, want, tile=TILE)
    assert d.category == categories.UNWRITTEN_OUTPUT and "columns 32..39" in d.summary
    assert any("besides" in line and "row 5, col 5" in line for line in d.details)


# -- value patterns -------------------------------------------------------------------

def test_transposed_square():
    p, want = problem(48, 48, 16)
    d = summary_of(want.T.astype(np.float32), want)
    assert d.category == categories.WRONG_VALUES and "transposed" in d.summary


def test_column_major_store():
    p, want = problem(24, 40, 16)
    got = want.T.astype(np.float32).reshape(24, 40)  # C[col*M + row] = value(row, col)
    d = summary_of(got, want)
    assert "column-major" in d.summary and "j*M + i" in d.summary


def test_shift_one_column_right():
    p, want = problem(32, 32, 16)
    got = want.astype(np.float32)
    got[:, 1:] = got[:, :-1].copy()
    d = summary_of(got, want)
    assert "shifted one column to the right" in d.summary


def test_shift_one_row_down():
    p, want = problem(30, 20, 16)
    got = kernel_output(want)
    got[1:] = want[:-1]
    d = summary_of(got, want)
    assert "shifted one row down" in d.summary


def test_k_loop_one_step_short():
    p, want = problem(32, 24, 37)
    got = (p.a64[:, :-1] @ p.b64[:-1]).astype(np.float32)
    d = summary_of(got, want, a64=p.a64, b64=p.b64)
    assert d.summary == "the K loop stops one step early (K-1 terms summed)"
    # without the inputs the pattern cannot be named, but the failure is still reported
    assert summary_of(got, want).category == categories.WRONG_VALUES


def test_k_loop_skips_first_term():
    p, want = problem(8, 8, 10)
    d = summary_of((p.a64[:, 1:] @ p.b64[1:]).astype(np.float32), want, a64=p.a64, b64=p.b64)
    assert "starts at k = 1" in d.summary


def test_k_loop_drops_partial_tile():
    p, want = problem(16, 16, 40)
    got = (p.a64[:, :32] @ p.b64[:32]).astype(np.float32)
    d = summary_of(got, want, a64=p.a64, b64=p.b64)
    assert "first 32 of K=40 terms" in d.summary
    assert any("K=40 is not a multiple of the K tile (16 or 32 deep)" in line for line in d.details)


def test_a_read_transposed():
    p, want = problem(20, 12, 20)
    d = summary_of((p.a64.T @ p.b64).astype(np.float32), want, a64=p.a64, b64=p.b64)
    assert "A^T @ B" in d.summary


@pytest.mark.parametrize("factor, words", [(2.0, "every element is 2 x the exact value"),
                                           (-1.0, "wrong sign"), (0.0, "every element is 0")])
def test_scaled_result(factor, words):
    p, want = problem(16, 16, 16)
    d = summary_of((factor * want).astype(np.float32), want)
    assert words in d.summary


def test_nan_from_reading_poisoned_c():
    p, want = problem(16, 16, 16)
    got = np.full(want.shape, np.nan, np.float32)  # C += sum on a NaN-poisoned C: canonical NaN, not poison
    d = summary_of(got, want)
    assert d.category == categories.WRONG_VALUES
    assert any("written elements are NaN" in line for line in d.details)


def test_single_wrong_element():
    p, want = problem(64, 64, 8)
    got = want.astype(np.float32)
    got[3, 5] = 7.0
    d = summary_of(got, want, tile=TILE)
    assert d.summary == "1 element is wrong: row 3, col 5"
    assert d.count == 1 and d.first == (3, 5, 7.0, float(want[3, 5]))


def test_scattered_errors_fallback():
    p, want = problem(50, 60, 8)
    got = want.astype(np.float32)
    rng = np.random.default_rng(0)
    hit = rng.random(want.shape) < 0.1
    got[hit] += 1.0
    d = summary_of(got, want)
    assert f"{hit.sum()} of 3000 elements" in d.summary and "rows" in d.summary and "columns" in d.summary
    assert any("largest relative error" in line for line in d.details)


def test_shape_mismatch():
    d = summary_of(np.zeros((3, 4), np.float32), np.zeros((4, 3)))
    assert "shape (3, 4), expected (4, 3)" in d.summary


def test_assert_bit_identical_message():
    p, want = problem(40, 1000, 24)
    written = np.ones(want.shape, bool)
    written[:, 992:] = False
    with pytest.raises(GemmCheckFailure) as info:
        assert_bit_identical(kernel_output(want, written), want, tile=TILE)
    e = info.value
    assert e.category == "unwritten_output"
    text = str(e)
    assert text.startswith("[unwritten_output] columns 992..999")
    assert "320 of 40000 elements" in text and "first mismatch at row 0, col 992" in text


# -- nondeterminism ---------------------------------------------------------------

def test_race_between_runs():
    p, want = problem(64, 64, 32)
    first = want.astype(np.float32)
    second = first.copy()
    second[17, 40] += 4.0  # a missing __syncthreads: one element read a half-loaded tile
    second[50, 3] -= 1.0
    d = compare_runs(first, second)
    assert d is not None and d.category == categories.NONDETERMINISTIC
    assert "2 of 4096 elements" in d.summary
    assert "a value that changes between runs on the same inputs is a race" in d.summary
    assert "missing __syncthreads, or float atomics" in d.summary
    assert any("largest change 4 at row 17, col 40" in line for line in d.details)
    with pytest.raises(ValueError, match="shapes differ"):
        compare_runs(first, first[:2])


def test_race_with_unwritten_elements():
    p, want = problem(32, 32, 8)
    first = want.astype(np.float32)
    second = kernel_output(want)
    second[0:2, 0:16] = poison((2, 16))
    d = compare_runs(first, second, tile=TILE)
    assert d.count == 32
    assert any("written in one run and left unwritten in the other" in line for line in d.details)


# -- guard bands --------------------------------------------------------------------------

# -- inputs rounded to a lower precision ----------------------------------------------

def _mantissa(x: np.ndarray, bits: int, nearest: bool | str) -> np.ndarray:
    """Independent of the judge: float32 -> float64 with ``bits`` explicit mantissa bits;
    ``nearest``: True ties to even, "away" ties away from zero, False truncation."""
    m, e = np.frexp(x.astype(np.float64))
    scaled = m * 2.0 ** (bits + 1)
    if nearest == "away":
        kept = np.sign(scaled) * np.floor(np.abs(scaled) + 0.5)
    else:
        kept = np.round(scaled) if nearest else np.trunc(scaled)  # np.round: ties to even
    return kept / 2.0 ** (bits + 1) * 2.0 ** e


@pytest.mark.parametrize("bits, nearest, words", [
    (10, True, "fp16 or TF32"),
    (10, "away", "TF32 rounded half away from zero (cvt.rna.tf32.f32)"),
    (10, False, "TF32 by truncation"),
    (7, True, "bf16 (7-bit"),
    (7, "away", "bf16 rounded half away from zero"),
    (7, False, "bf16 by truncation"),
])
def test_output_from_inputs_in_a_lower_precision(bits, nearest, words):
    # Exact fp32 inputs up to about 2^11 need more than 10 mantissa bits: a kernel that
    # multiplies them in TF32 (Triton's tl.dot on fp32 truncates them) or bf16 is off by a
    # few parts in 10^4, and the result is exactly A@B of the rounded inputs.
    p, want = problem(32, 24, 2)  # K = 2: the largest exact inputs, up to about 2^11.5
    got = (_mantissa(p.a64, bits, nearest) @ _mantissa(p.b64, bits, nearest)).astype(np.float32)
    assert not np.array_equal(got, want.astype(np.float32))
    d = summary_of(got, want, a64=p.a64, b64=p.b64)
    assert d.category == categories.PRECISION_TOO_LOW
    assert words in d.summary and "lower precision than it declares" in d.summary


@pytest.mark.parametrize("bits", [10, 7])
def test_ties_tell_the_two_roundings_to_nearest_apart(bits):
    # Odd integers above 2^11 (2^8 for bf16) are ties: even and away-from-zero rounding differ
    # there, so an rna kernel is not explained by the ties-to-even model, and is still recognised.
    p, want = problem(32, 24, 2)
    away = _mantissa(p.a64, bits, "away") @ _mantissa(p.b64, bits, "away")
    even = _mantissa(p.a64, bits, True) @ _mantissa(p.b64, bits, True)
    assert not np.array_equal(away, even)
    d = summary_of(away.astype(np.float32), want, a64=p.a64, b64=p.b64)
    assert d.category == categories.PRECISION_TOO_LOW and "away from zero" in d.summary


def test_wrong_values_are_not_blamed_on_rounding():
    p, want = problem(32, 24, 2)  # K = 2: the largest exact inputs, up to about 2^11.5
    got = (_mantissa(p.a64, 10, False) @ _mantissa(p.b64, 10, False)).astype(np.float32)
    got[3, 5] += 1.0  # one element off by more than any rounding of the inputs explains
    d = summary_of(got, want, a64=p.a64, b64=p.b64)
    assert d.category == categories.WRONG_VALUES


def test_one_whole_line_takes_a_singular_verb():
    from pytest_gemm.judges.region import describe_region

    mask = np.zeros((7, 9), dtype=bool)
    mask[6] = True
    assert describe_region(mask, "were never written")[0] == "row 6 (the last one) was never written"
    mask[5] = True
    assert describe_region(mask, "were never written")[0] == "rows 5..6 (the last 2) were never written"
