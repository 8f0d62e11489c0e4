"""Reductions and cumulative ops: axis handling, errors, dtype rules, special values, and
hypothesis property tests against NumPy / SciPy."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
import scipy.special
from hypothesis import given, strategies as st

import starling.numpy as snp
from starling.arrays.ops.axes import AxisError, normalize_axes, normalize_axis
from starling.transforms.stage import make_ir


# ---- axes helpers ------------------------------------------------------------------------------

def test_normalize_axis_and_axes():
    assert normalize_axis("op", -1, 3) == 2
    assert normalize_axis("op", np.int64(1), 3) == 1
    assert normalize_axes("op", None, 3) == (0, 1, 2)
    assert normalize_axes("op", (-1, 0), 3) == (2, 0)
    assert normalize_axes("op", (-1, 0), 3, sort=True) == (0, 2)
    assert normalize_axes("op", [1], 2) == (1,)
    assert normalize_axes("op", (), 2) == ()
    assert normalize_axes("op", None, 0) == ()


def test_axis_error_is_value_and_index_error():
    with pytest.raises(AxisError) as e:
        normalize_axis("sum", 3, 2)
    assert isinstance(e.value, ValueError) and isinstance(e.value, IndexError)
    assert str(e.value) == "sum: axis 3 is out of bounds for array of ndim 2 (valid: -2..1)"
    assert (e.value.axis, e.value.ndim, e.value.op) == (3, 2, "sum")
    with pytest.raises(AxisError, match="0-d array has no axes"):
        normalize_axes("max", 0, 0)
    with pytest.raises(AxisError, match="source -4 is out of bounds"):
        normalize_axis("moveaxis", -4, 3, name="source")


@pytest.mark.parametrize("bad", [1.0, True, "0", (0, 1.5)])
def test_axis_type_errors(bad):
    with pytest.raises(TypeError, match="sum: axis must be an int"):
        snp.sum(snp.asarray(np.ones((2, 2))), axis=bad)


def test_duplicate_axes():
    with pytest.raises(ValueError, match=r"sum: duplicate axis 1 in \(1, -1\)"):
        snp.sum(snp.asarray(np.ones((2, 2))), axis=(1, -1))
    assert normalize_axes("op", (1, -1), 2, allow_duplicates=True) == (1, 1)


@pytest.mark.parametrize("op", ["sum", "prod", "max", "min", "mean", "var", "std", "all", "any",
                                "argmax", "argmin", "count_nonzero", "nansum", "logsumexp",
                                "cumsum", "cummax", "ptp", "nanmax", "nanvar", "nanmean",
                                "nanprod"])
def test_axis_out_of_range_names_op(op):
    x = snp.asarray(np.ones((2, 3), np.float32))
    with pytest.raises(AxisError, match=rf"^{op}: axis 2 is out of bounds .*valid: -2\.\.1"):
        getattr(snp, op)(x, axis=2)


def test_out_is_rejected():
    with pytest.raises(TypeError, match="sum: out= is not supported"):
        snp.sum(snp.asarray([1.0]), out=np.zeros(()))


# ---- dtypes ------------------------------------------------------------------------------------

@pytest.mark.parametrize("dt,want", [
    (np.int8, np.int64), (np.int32, np.int64), (np.uint8, np.uint64), (np.uint32, np.uint64),
    (np.bool_, np.int64), (np.float16, np.float16), (ml_dtypes.bfloat16, ml_dtypes.bfloat16),
    (np.complex64, np.complex64)])
def test_sum_prod_cumsum_default_dtypes(dt, want):
    x = snp.asarray(np.ones((3,), dt))
    for op in (snp.sum, snp.prod, snp.cumsum, snp.cumulative_sum, snp.cumulative_prod):
        assert op(x).dtype == np.dtype(want), op.__name__


def test_sum_dtype_argument_and_overflow_wraps():
    x = snp.asarray(np.array([100, 100, 100], np.int8))
    assert int(snp.sum(x)) == 300
    r = snp.sum(x, dtype=np.int8)
    assert r.dtype == np.int8 and int(r) == np.int8(44)  # 300 wraps to 44
    big = snp.asarray(np.full(2, np.iinfo(np.int64).max))
    assert int(snp.sum(big)) == -2
    assert snp.sum(snp.asarray([1.5, 2.5]), dtype=np.int64).dtype == np.int64


def test_mean_var_dtypes():
    i = snp.asarray(np.arange(6, dtype=np.int16))
    assert snp.mean(i).dtype == np.float32 and snp.var(i).dtype == np.float32
    h = snp.asarray(np.arange(6, dtype=np.float16))
    assert snp.mean(h).dtype == np.float16 and snp.std(h).dtype == np.float16
    c = snp.asarray(np.array([1 + 1j, 2 - 1j], np.complex64))
    assert snp.mean(c).dtype == np.complex64 and snp.var(c).dtype == np.float32
    np.testing.assert_allclose(float(snp.var(c)), np.var(np.asarray(c)), rtol=1e-6)
    assert snp.logsumexp(i).dtype == np.float32
    assert snp.mean(i, dtype=np.float64).dtype == np.float64


def test_float16_sum_accumulates_in_float32():
    # A float16 running sum stalls at 2048 (spacing 2); accumulating in float32 does not.
    x = snp.asarray(np.ones(10000, np.float16))
    assert float(snp.sum(x)) == 10000.0
    assert float(snp.mean(x)) == 1.0
    assert float(snp.cumsum(x)[-1]) == 10000.0


def test_int_mean_is_accurate():
    x = np.array([np.iinfo(np.int32).max, np.iinfo(np.int32).min, 3, 4], np.int32)
    np.testing.assert_allclose(float(snp.mean(snp.asarray(x))), x.astype(np.float64).mean(),
                               rtol=1e-7)


def test_weak_type_kept_by_sum_of_python_scalar():
    r = snp.sum(2.0)
    assert r.weak_type and r.dtype == np.float32
    assert not snp.sum(np.float32(2.0)).weak_type


# ---- empty reductions and errors --------------------------------------------------------------

def test_empty_reductions():
    e = snp.asarray(np.zeros((0, 3), np.float32))
    np.testing.assert_array_equal(np.asarray(snp.sum(e, axis=0)), np.zeros(3))
    np.testing.assert_array_equal(np.asarray(snp.prod(e, axis=0)), np.ones(3))
    assert np.isnan(float(snp.mean(e)))
    assert bool(snp.all(e)) and not bool(snp.any(e))
    assert snp.max(e, axis=1).shape == (0,)  # nothing reduced over an empty axis: fine
    np.testing.assert_array_equal(np.asarray(snp.max(e, axis=0, initial=-5.0)), [-5.0] * 3)


@pytest.mark.parametrize("op", ["max", "min", "nanmax", "nanmin", "ptp"])
def test_max_of_empty_raises(op):
    e = snp.asarray(np.zeros((0, 3), np.float32))
    with pytest.raises(ValueError, match=rf"{op}: zero-size reduction along axis 0 .*pass "
                                         "initial="):
        getattr(snp, op)(e, axis=0)


@pytest.mark.parametrize("op", ["argmax", "argmin"])
def test_argmax_errors(op):
    with pytest.raises(ValueError, match=f"{op}: attempt to take the {op} of an empty"):
        getattr(snp, op)(snp.asarray(np.zeros((2, 0))), axis=1)
    with pytest.raises(TypeError, match=f"{op}: axis must be an int or None"):
        getattr(snp, op)(snp.asarray(np.zeros((2, 2))), axis=(0, 1))


def test_where_errors():
    x = snp.asarray(np.ones((2, 3)))
    with pytest.raises(ValueError, match="max: where= needs initial="):
        snp.max(x, where=np.ones((2, 3), bool))
    with pytest.raises(TypeError, match="sum: where= must be a boolean mask, got dtype int64"):
        snp.sum(x, where=np.ones((2, 3), np.int64))
    with pytest.raises(ValueError, match=r"sum: where= mask of shape \(3, 3\)"):
        snp.sum(x, where=np.ones((3, 3), bool))
    with pytest.raises(ValueError, match=r"sum: where= mask of shape \(2, 2\) does not "):
        snp.sum(x, where=np.ones((2, 2), bool))


def test_var_correction_errors():
    x = snp.asarray(np.ones(4))
    with pytest.raises(ValueError, match="var: pass either ddof= .* or correction="):
        snp.var(x, ddof=1, correction=1)
    with pytest.raises(TypeError, match="std: correction / ddof must be a real number"):
        snp.std(x, correction="1")
    assert float(snp.var(snp.asarray([1.0, 2.0, 3.0, 4.0]), correction=1)) == pytest.approx(
        np.var([1, 2, 3, 4], ddof=1))


def test_ptp_bool_raises():
    with pytest.raises(TypeError, match="ptp: unsupported dtype bool"):
        snp.ptp(snp.asarray([True, False]))


# ---- special values ----------------------------------------------------------------------------

def test_argmax_first_occurrence_and_nan():
    x = snp.asarray(np.array([1.0, 3.0, np.nan, 3.0, np.nan]))
    assert int(snp.argmax(x)) == 2 and int(snp.argmin(x)) == 2
    t = snp.asarray(np.array([[1, 5, 5], [7, 7, 0]]))
    np.testing.assert_array_equal(np.asarray(snp.argmax(t, axis=1)), [1, 0])
    assert snp.argmax(t, axis=None, keepdims=True).shape == (1, 1)
    assert snp.argmax(t).dtype == np.int64


def test_nan_aware():
    x = snp.asarray(np.array([[np.nan, np.nan], [1.0, np.nan]]))
    r = np.asarray(snp.nanmax(x, axis=1))
    assert np.isnan(r[0]) and r[1] == 1.0
    np.testing.assert_array_equal(np.asarray(snp.nansum(x, axis=1)), [0.0, 1.0])
    assert float(snp.nanmean(x)) == 1.0
    assert np.isnan(float(snp.max(x)))


def test_logsumexp_special_values():
    rows = np.array([[-np.inf, -np.inf, -np.inf], [np.inf, 1.0, -np.inf], [np.nan, 0.0, 1.0],
                     [1000.0, 1000.0, -1000.0], [-1000.0, -1001.0, -1002.0]], np.float64)
    got = np.asarray(snp.logsumexp(snp.asarray(rows), axis=1))
    np.testing.assert_allclose(got, scipy.special.logsumexp(rows, axis=1), rtol=1e-12)
    assert got[0] == -np.inf and got[1] == np.inf and np.isnan(got[2])
    # b == 0 removes an entry, even an infinite one
    r = snp.logsumexp(snp.asarray([np.inf, 0.0]), b=snp.asarray([0.0, 1.0]))
    assert float(r) == 0.0
    a, b = np.array([1.0, 2.0]), np.array([1.0, -2.0])
    val, sign = snp.logsumexp(snp.asarray(a), b=snp.asarray(b), return_sign=True)
    want_val, want_sign = scipy.special.logsumexp(a, b=b, return_sign=True)
    assert float(val) == pytest.approx(want_val) and float(sign) == want_sign
    assert np.isnan(float(snp.logsumexp(snp.asarray(a), b=snp.asarray(b))))


def test_allclose_array_equal():
    a = snp.asarray(np.array([1.0, np.inf, np.nan]))
    r = snp.allclose(a, a)
    assert isinstance(r, snp.Array) and r.shape == () and r.dtype == np.bool_ and not bool(r)
    assert bool(snp.allclose(a, a, equal_nan=True))
    assert not bool(snp.allclose(snp.asarray([np.inf]), snp.asarray([-np.inf])))
    assert not bool(snp.allclose(snp.asarray([1e10]), snp.asarray([np.inf])))
    assert not bool(snp.array_equal(snp.asarray([1, 2]), snp.asarray([[1, 2]])))
    assert bool(snp.array_equal(snp.asarray([1, 2]), [1, 2]))
    with pytest.raises(ValueError, match="allclose: operands could not be broadcast"):
        snp.allclose(snp.asarray([1.0, 2.0]), snp.asarray([1.0, 2.0, 3.0]))


def test_average():
    a = np.arange(12.0).reshape(3, 4)
    w = np.array([1.0, 2.0, 3.0, 4.0])
    got, scl = snp.average(snp.asarray(a), axis=1, weights=snp.asarray(w), returned=True)
    want, want_scl = np.average(a, axis=1, weights=w, returned=True)
    np.testing.assert_allclose(np.asarray(got), want)
    np.testing.assert_allclose(np.asarray(scl), want_scl)
    with pytest.raises(TypeError, match="average: weights of shape"):
        snp.average(snp.asarray(a), weights=snp.asarray(w))
    with pytest.raises(ValueError, match="average: weights of shape \\(3,\\) match neither"):
        snp.average(snp.asarray(a), axis=1, weights=snp.asarray(w[:3]))


def test_all_any_complex_and_nan():
    assert bool(snp.all(snp.asarray(np.array([1j, 1 + 0j]))))
    assert bool(snp.any(snp.asarray(np.array([0j, 1j]))))
    assert bool(snp.all(snp.asarray(np.array([np.nan]))))
    assert int(snp.count_nonzero(snp.asarray(np.array([0.0, np.nan, -0.0, 2.0])))) == 2


# ---- cumulative --------------------------------------------------------------------------------

def test_cumulative_sum_array_api():
    x = snp.asarray(np.arange(6).reshape(2, 3))
    with pytest.raises(ValueError, match="cumulative_sum: axis is required"):
        snp.cumulative_sum(x)
    r = snp.cumulative_sum(x, axis=1, include_initial=True)
    np.testing.assert_array_equal(np.asarray(r), [[0, 0, 1, 3], [0, 3, 7, 12]])
    r = snp.cumulative_prod(x, axis=0, include_initial=True)
    np.testing.assert_array_equal(np.asarray(r), [[1, 1, 1], [0, 1, 2], [0, 4, 10]])
    assert snp.cumsum(x).shape == (6,)


def test_cummax_reverse_and_nan():
    x = snp.asarray(np.array([1.0, 3.0, 2.0, np.nan, 5.0]))
    np.testing.assert_array_equal(np.asarray(snp.cummax(x)), [1, 3, 3, np.nan, np.nan])
    np.testing.assert_array_equal(np.asarray(snp.cummin(x, reverse=True)),
                                  [np.nan, np.nan, np.nan, np.nan, 5])


# ---- staging -----------------------------------------------------------------------------------

def test_staged_programs_use_one_reduction_primitive():
    x = snp.asarray(np.ones((2, 3), np.float32))
    prog = make_ir(lambda x: snp.sum(x, axis=-1, keepdims=True))(x)
    names = [e.primitive.name for e in prog.eqns]
    assert names == ["reduce_sum", "reshape"]
    prog = make_ir(lambda x: snp.argmax(x, axis=0))(x)
    assert [e.primitive.name for e in prog.eqns] == ["argmax"]
    assert prog.out_avals[0].dtype == np.int64 and prog.out_avals[0].shape == (3,)
    prog = make_ir(lambda x: snp.cumsum(x, axis=1))(x)
    assert [e.primitive.name for e in prog.eqns] == ["cumsum"]


def test_methods():
    x = snp.asarray(np.arange(6.0).reshape(2, 3))
    assert float(x.sum()) == 15.0 and float(x.max()) == 5.0 and int(x.argmin()) == 0
    np.testing.assert_array_equal(np.asarray(x.mean(axis=0)), [1.5, 2.5, 3.5])
    np.testing.assert_array_equal(np.asarray(x.cumsum(axis=1)), np.cumsum(np.asarray(x), 1))


# ---- hypothesis properties ---------------------------------------------------------------------

@st.composite
def array_and_axis(draw, dtype=np.float64):
    shape = tuple(draw(st.lists(st.integers(0, 4), min_size=0, max_size=4)))
    n = int(np.prod(shape))
    if np.dtype(dtype).kind == "f":
        elems = st.floats(-100, 100, allow_nan=False, width=32)
    else:
        elems = st.integers(-1000, 1000)
    data = np.array(draw(st.lists(elems, min_size=n, max_size=n)), dtype).reshape(shape)
    nd = len(shape)
    axis = draw(st.one_of(
        st.none(),
        st.integers(-nd, nd - 1) if nd else st.none(),
        st.sets(st.integers(0, max(nd - 1, 0)), max_size=nd).map(
            lambda s: tuple(a - nd if i % 2 else a for i, a in enumerate(sorted(s)))),
    ))
    keepdims = draw(st.booleans())
    return data, axis, keepdims


@given(array_and_axis())
def test_sum_mean_var_match_numpy(case):
    x, axis, keepdims = case
    a = snp.asarray(x)
    np.testing.assert_allclose(np.asarray(snp.sum(a, axis=axis, keepdims=keepdims)),
                               np.sum(x, axis=axis, keepdims=keepdims), rtol=1e-12, atol=1e-9)
    if x.size:
        np.testing.assert_allclose(np.asarray(snp.var(a, axis=axis, keepdims=keepdims)),
                                   np.var(x, axis=axis, keepdims=keepdims), rtol=1e-9, atol=1e-9)


@given(array_and_axis(np.int32))
def test_max_min_prod_match_numpy(case):
    x, axis, keepdims = case
    a = snp.asarray(x)
    for op, ref in ((snp.max, np.max), (snp.min, np.min)):
        try:
            want = ref(x, axis=axis, keepdims=keepdims)
        except ValueError:
            with pytest.raises(ValueError, match="zero-size reduction"):
                op(a, axis=axis, keepdims=keepdims)
            continue
        got = op(a, axis=axis, keepdims=keepdims)
        assert got.dtype == np.int32
        np.testing.assert_array_equal(np.asarray(got), want)
    np.testing.assert_array_equal(np.asarray(snp.prod(a, axis=axis, keepdims=keepdims)),
                                  np.prod(x, axis=axis, keepdims=keepdims))


@given(array_and_axis(np.int32), st.sampled_from(["cumsum", "cumprod", "cummax"]))
def test_cumulative_match_numpy(case, op):
    x, axis, _ = case
    if isinstance(axis, tuple):
        axis = axis[0] if axis else None
    ref = {"cumsum": np.cumsum, "cumprod": np.cumprod,
           "cummax": lambda x, axis: np.maximum.accumulate(
               x.reshape(-1) if axis is None else x, axis=0 if axis is None else axis)}[op]
    np.testing.assert_array_equal(np.asarray(getattr(snp, op)(snp.asarray(x), axis=axis)),
                                  ref(x, axis=axis))


# ---- quantiles ---------------------------------------------------------------------------------

def test_quantile_errors_and_tracing():
    x = snp.asarray(np.arange(10.0))
    with pytest.raises(ValueError, match=r"quantile: q must lie in \[0, 1\], got 1.5"):
        snp.quantile(x, 1.5)
    with pytest.raises(ValueError, match=r"percentile: q must lie in \[0, 100\]"):
        snp.percentile(x, [50, 101])
    with pytest.raises(ValueError, match="quantile: method must be one of"):
        snp.quantile(x, 0.5, method="hazen")
    with pytest.raises(TypeError, match="median: complex input is not supported"):
        snp.median(snp.asarray(np.array([1j, 2j])))
    # q may be traced: the positions are computed with array ops
    prog = make_ir(lambda x, q: snp.quantile(x, q))(x, snp.asarray(np.array([0.25, 0.5])))
    assert prog.out_avals[0].shape == (2,)
    assert float(snp.median(snp.asarray(np.array([1.0, np.inf, np.inf])))) == np.inf
    assert snp.median(snp.asarray(np.arange(6, dtype=np.int8))).dtype == np.float32


@given(array_and_axis(), st.floats(0, 1))
def test_quantile_matches_numpy(case, q):
    x, axis, keepdims = case
    if x.size == 0:
        return
    np.testing.assert_allclose(
        np.asarray(snp.quantile(snp.asarray(x), q, axis=axis, keepdims=keepdims)),
        np.quantile(x, q, axis=axis, keepdims=keepdims), rtol=1e-12, atol=1e-12)
