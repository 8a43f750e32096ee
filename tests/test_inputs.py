"""Inputs and references: exactness bounds, seeding, storage precisions (numpy only)."""
from __future__ import annotations

import numpy as np
import pytest

from pytest_gemm.judges.inputs import GemmInexactError, exact_inputs, exact_value_bound, random_inputs
from pytest_gemm.model.precision import PRECISIONS, from_storage
from pytest_gemm.judges.reference import abs_gauge, abs_product, reference


# -- exact_value_bound --------------------------------------------------------

@pytest.mark.parametrize("k, precision, with_c, r", [
    (1, "fp32", False, 4096),      # 1 * 4096**2 == 2**24 exactly
    (4096, "fp32", False, 64),
    (4096, "fp32", True, 63),      # 4096 * 64**2 + 64 > 2**24
    (1000, "fp32", False, 129),
    (1, "fp16", False, 2048),      # capped by what fp16 holds exactly
    (1, "tf32", False, 2048),
    (1, "bf16", False, 256),
    (2 ** 24, "fp32", False, 1),
])
def test_exact_value_bound_values(k, precision, with_c, r):
    assert exact_value_bound(k, precision, with_c) == r


@pytest.mark.parametrize("k", [1, 2, 3, 7, 100, 1023, 4097, 65536, 10 ** 6])
@pytest.mark.parametrize("with_c", [False, True])
def test_exact_value_bound_is_the_largest(k, with_c):
    r = exact_value_bound(k, "fp32", with_c)
    extra = 1 if with_c else 0
    assert k * r * r + extra * r <= 2 ** 24
    assert r == 2 ** 24 or k * (r + 1) ** 2 + extra * (r + 1) > 2 ** 24


def test_exact_value_bound_too_large_k():
    with pytest.raises(GemmInexactError, match=r"K=16777217: .*\{-1, 0, 1\}.*2\*\*24"):
        exact_value_bound(2 ** 24 + 1)
    with pytest.raises(GemmInexactError, match="K \\+ 1"):
        exact_value_bound(2 ** 24, with_c=True)
    assert issubclass(GemmInexactError, ValueError)


# -- exact_inputs ---------------------------------------------------------------

@pytest.mark.parametrize("precision, dtype", [("fp32", np.float32), ("tf32", np.float32),
                                              ("fp16", np.float16), ("bf16", np.uint16)])
def test_exact_inputs_storage(precision, dtype):
    p = exact_inputs(5, 7, 300, precision, seed=3)
    assert (p.m, p.n, p.k, p.precision, p.kind) == (5, 7, 300, precision, "exact")
    assert p.a.shape == (5, 300) and p.b.shape == (300, 7)
    assert p.a.dtype == dtype and p.b.dtype == dtype
    assert p.a.flags.c_contiguous and p.b.flags.c_contiguous
    np.testing.assert_array_equal(from_storage(p.a, precision), p.a64)
    np.testing.assert_array_equal(from_storage(p.b, precision), p.b64)
    assert p.c0 is None


def test_exact_inputs_values_are_nonzero_integers_in_range():
    p = exact_inputs(64, 64, 1000, seed=1)
    r = exact_value_bound(1000)
    for x in (p.a64, p.b64):
        assert np.all(x == np.round(x))
        assert np.abs(x).max() <= r and np.abs(x).min() >= 1  # no zeros: every term matters
        assert len(np.unique(x)) > 50                          # not all equal: shifts/transposes show
        assert abs(x.mean()) < 0.1 * r                         # mean zero
    assert p.a64.max() > 0.9 * r  # the range is used


def _float32_orders(a: np.ndarray, b: np.ndarray) -> list[np.ndarray]:
    def seq(ks):
        c = np.zeros((a.shape[0], b.shape[1]), np.float32)
        for k in ks:
            c = c + a[:, k:k + 1] * b[k:k + 1, :]
        return c
    k = a.shape[1]
    return [seq(range(k)), seq(range(k - 1, -1, -1)), np.matmul(a, b),
            (seq(range(k // 2)) + seq(range(k // 2, k))).astype(np.float32)]


@pytest.mark.parametrize("k", [1, 17, 1000, 4096])
def test_exact_inputs_are_exact_in_every_float32_order(k):
    p = exact_inputs(16, 24, k, seed=2)
    want = (p.a64 @ p.b64).astype(np.float32)
    for got in _float32_orders(p.a64.astype(np.float32), p.b64.astype(np.float32)):
        np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


def test_exact_inputs_with_c_stay_exact():
    p = exact_inputs(8, 8, 4096, seed=0, with_c=True)
    assert p.c0 is not None and p.c0.dtype == np.float32 and p.c0.shape == (8, 8)
    assert np.abs(p.c0).max() <= 63
    total = p.a64 @ p.b64 + p.c0
    assert np.abs(total).max() <= 2 ** 24
    # random A and B do not depend on with_c: C is drawn after them
    np.testing.assert_array_equal(random_inputs(4, 4, 4, with_c=True).a, random_inputs(4, 4, 4).a)


def test_exact_inputs_fp16_products_fit_storage():
    p = exact_inputs(4, 4, 1, "fp16", seed=0)
    assert np.abs(p.a64).max() <= 2048 and np.all(np.isfinite(p.a.astype(np.float32)))


def test_seeds_and_shapes_give_different_data():
    a = exact_inputs(8, 8, 8, seed=0).a64
    np.testing.assert_array_equal(a, exact_inputs(8, 8, 8, seed=0).a64)
    assert not np.array_equal(a, exact_inputs(8, 8, 8, seed=1).a64)
    other = exact_inputs(8, 8, 9, seed=0).a64[:, :8]
    assert not np.array_equal(a, other)
    u = random_inputs(8, 8, 8, seed=0).a64
    assert not np.array_equal(u, random_inputs(8, 9, 8, seed=0).a64)


@pytest.mark.parametrize("bad", [0, -3, 1.5, True, "4", None])
def test_dimensions_are_validated(bad):
    with pytest.raises(ValueError, match="M must be"):
        exact_inputs(bad, 4, 4)
    with pytest.raises(ValueError, match="K must be"):
        random_inputs(4, 4, bad)


def test_numpy_integer_dimensions_accepted():
    assert exact_inputs(np.int64(3), 2, np.int32(2)).a.shape == (3, 2)


def test_bad_precision_and_seed():
    with pytest.raises(ValueError, match="fp64.*fp32, tf32, fp16, bf16"):
        exact_inputs(2, 2, 2, "fp64")
    with pytest.raises(ValueError, match="seed"):
        exact_inputs(2, 2, 2, seed=-1)


# -- random_inputs --------------------------------------------------------------

@pytest.mark.parametrize("precision", list(PRECISIONS))
def test_random_uniform(precision):
    p = random_inputs(32, 16, 64, precision, "uniform", seed=5)
    assert p.kind == "uniform" and p.a.dtype == np.dtype(PRECISIONS[precision].storage_dtype)
    assert np.abs(p.a64).max() <= 1.0 and np.abs(p.b64).max() <= 1.0
    assert abs(p.a64.mean()) < 0.1 and p.a64.std() > 0.4
    np.testing.assert_array_equal(from_storage(p.a, precision), p.a64)  # a64 is what is stored
    assert np.array_equal(p.a64, random_inputs(32, 16, 64, precision, "uniform", seed=5).a64)


def test_random_values_are_rounded_to_storage():
    p = random_inputs(16, 16, 16, "fp16", seed=0)
    np.testing.assert_array_equal(p.a64, p.a64.astype(np.float16).astype(np.float64))
    q = random_inputs(16, 16, 16, "bf16", seed=0)
    bits = q.a64.astype(np.float32).view(np.uint32)
    assert np.all(bits & 0xFFFF == 0)


@pytest.mark.parametrize("precision", ["fp32", "fp16", "bf16"])
def test_random_heavy(precision):
    p = random_inputs(64, 64, 64, precision, "heavy", seed=0, with_c=True)
    assert p.kind == "heavy"
    x = np.concatenate([p.a64.ravel(), p.b64.ravel()])
    assert np.all(np.isfinite(x)) and np.abs(x).max() <= 1000.0
    assert np.abs(x).max() > 8.0                         # heavy tail present
    assert np.all(np.isfinite(p.a.astype(np.float32)))  # fp16 never overflows
    assert p.c0 is not None and p.c0.dtype == np.float32


def test_unknown_distribution():
    with pytest.raises(ValueError, match="'normal'.*uniform, heavy"):
        random_inputs(2, 2, 2, distribution="normal")


# -- reference ------------------------------------------------------------------

def test_reference_alpha_beta():
    p = exact_inputs(6, 5, 7, seed=0, with_c=True)
    np.testing.assert_array_equal(reference(p.a64, p.b64), p.a64 @ p.b64)
    got = reference(p.a64, p.b64, alpha=2.0, beta=-0.5, c0=p.c0)
    np.testing.assert_array_equal(got, 2.0 * (p.a64 @ p.b64) - 0.5 * p.c0.astype(np.float64))
    assert got.dtype == np.float64


def test_reference_beta_zero_does_not_read_c0():
    p = exact_inputs(3, 3, 3)
    nan_c = np.full((3, 3), np.nan, np.float32)
    assert np.all(np.isfinite(reference(p.a64, p.b64, beta=0.0, c0=nan_c)))
    with pytest.raises(ValueError, match="needs c0"):
        reference(p.a64, p.b64, beta=1.0)
    with pytest.raises(ValueError, match="shape"):
        reference(p.a64, p.b64, beta=1.0, c0=np.zeros((2, 2)))
    with pytest.raises(ValueError, match="matrix product"):
        reference(p.a64, p.b64[:2])


def test_abs_product_and_gauge():
    a = np.array([[1.0, -2.0]])
    b = np.array([[3.0], [4.0]])
    assert abs_product(a, b)[0, 0] == 11.0
    assert abs_gauge(a, b, alpha=-2.0, beta=0.5, c0=np.array([[-4.0]]))[0, 0] == 24.0


def test_timed_runs_in_one_process_share_the_input_sets_of_the_last_shape():
    from pytest_gemm.measure import timed as performance

    first = performance.problems_for("fp32", (8, 9, 10))
    assert performance.problems_for("fp32", (8, 9, 10)) is first  # drawn once, reused
    assert len(first) == performance.DATA_SETS
    assert len({p.a.tobytes() for p in first}) == performance.DATA_SETS  # distinct sets
    other = performance.problems_for("fp16", (8, 9, 10))
    assert other is not first and list(performance._PROBLEMS) == [("fp16", (8, 9, 10))]  # one shape held


@pytest.mark.parametrize("precision", ["fp32", "tf32", "fp16", "bf16"])
def test_negated_storage_is_the_negated_values_in_every_precision(precision):
    """The speed check's last call runs on A negated in its buffers (measure/timed.py): bf16 is stored as
    uint16 bit patterns, where unary minus is not a negation (cuBLAS's bf16 read "stale" on the H100)."""
    from pytest_gemm.model.precision import from_storage, negate_storage, to_storage

    values = np.array([[0.0, 1.0, -2.0, 3.0], [-255.0, 256.0, 7.0, -0.5]])
    stored = to_storage(values, precision)
    negated = negate_storage(stored)
    assert negated.dtype == stored.dtype and negated.shape == stored.shape
    assert np.array_equal(from_storage(negated, precision), -values)
    assert np.array_equal(negate_storage(negated), stored)  # and back, bit for bit


@pytest.mark.parametrize("precision", sorted(PRECISIONS))
def test_exact_values_are_the_drawn_integers_made_only_when_read(precision):
    """The storage is made from the drawn integers directly; their float64 values (256 MB at
    4096^3) only when a check reads them on the host, and they are the integers drawn."""
    from pytest_gemm.judges.inputs import _KIND_TAG, exact_value_bound

    p = exact_inputs(33, 17, 65, precision=precision, seed=3)
    assert "a64" not in vars(p) and "b64" not in vars(p)
    rng = np.random.default_rng([3, _KIND_TAG["exact"], 33, 17, 65])
    r = exact_value_bound(65, precision)
    for got, rows, cols in ((p.a64, 33, 65), (p.b64, 65, 17)):
        drawn = rng.integers(-r, r, size=(rows, cols), dtype=np.int16)
        drawn += drawn >= 0
        assert got.dtype == np.float64
        np.testing.assert_array_equal(got, drawn.astype(np.float64))


@pytest.mark.parametrize("precision", sorted(PRECISIONS))
@pytest.mark.parametrize("kind", ["exact", "uniform"])
def test_device_exact_gives_the_host_values_through_any_array_module(precision, kind):
    from pytest_gemm.judges.inputs import device_exact

    p = exact_inputs(9, 7, 5, precision=precision) if kind == "exact" else \
        random_inputs(9, 7, 5, precision=precision)
    a64, b64 = device_exact(p, np)
    np.testing.assert_array_equal(a64, p.a64)
    np.testing.assert_array_equal(b64, p.b64)
    assert a64.dtype == b64.dtype == np.float64
