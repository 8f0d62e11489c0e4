"""Statistical and utility functions (Array API 2023.12): cumulative_sum, max, mean, min, prod,
std, sum, var, all, any."""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, strategies as st
from hypothesis.extra import numpy as hnp

import starling.numpy as xp
from tests.array_api import (
    COMPLEX_FLOATS, DEFAULT_FLOAT, DEFAULT_INT, INTS, NUMERIC, REAL, REAL_FLOATS, SIGNED_INTS,
    UNSIGNED_INTS, dname, tol,
)

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


def _elements(dt):
    dt = np.dtype(dt)
    if dt == np.bool_:
        return st.booleans()
    if dt.kind in "iu":
        return st.integers(0 if dt.kind == "u" else -3, 3)
    w = 32 if dt in (np.dtype(np.float32), np.dtype(np.complex64)) else 64
    f = st.floats(-4, 4, width=w)
    return st.builds(complex, f, f) if dt.kind == "c" else f


@st.composite
def array_and_axis(draw, dtypes, *, allow_tuple=True, allow_none=True, min_size=0):
    dt = draw(st.sampled_from(dtypes))
    shape = draw(hnp.array_shapes(min_dims=0, max_dims=3, min_side=min_size, max_side=3))
    x = draw(hnp.arrays(np.dtype(dt), shape, elements=_elements(dt)))
    nd = len(shape)
    choices = []
    if allow_none:
        choices.append(st.none())
    if nd:
        choices.append(st.integers(-nd, nd - 1))
        if allow_tuple:
            choices.append(st.lists(st.integers(0, nd - 1), unique=True, max_size=nd)
                           .map(lambda axes: tuple(a - nd if i % 2 else a
                                                   for i, a in enumerate(axes))))
    axis = draw(st.one_of(choices)) if choices else None
    return dt, x, axis


def _np_axis(axis):
    return None if axis is None else axis


def _reduced_shape(shape, axis, keepdims):
    nd = len(shape)
    axes = set(range(nd)) if axis is None else {
        a % nd for a in ((axis,) if isinstance(axis, int) else axis)}
    if keepdims:
        return tuple(1 if i in axes else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in axes)


def _sum_dtype(dt):
    # "unless x has an integer data type supporting a smaller range of values than the default
    # integer data type": signed -> default int, unsigned -> the unsigned int of the same width.
    if dt in SIGNED_INTS:
        return DEFAULT_INT
    if dt in UNSIGNED_INTS:
        return xp.uint64
    return dt


# ---- sum / prod --------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["sum", "prod"])
@given(data=array_and_axis(NUMERIC), keepdims=st.booleans())
def test_sum_prod(name, data, keepdims):
    dt, x, axis = data
    r = getattr(xp, name)(xp.asarray(x), axis=axis, keepdims=keepdims)
    assert r.dtype == _sum_dtype(dt), f"{name}({dname(dt)}) -> {r.dtype}"
    assert r.shape == _reduced_shape(x.shape, axis, keepdims)
    acc = np.dtype(_sum_dtype(dt))
    want = getattr(np, name)(x.astype(acc), axis=_np_axis(axis), keepdims=keepdims)
    np.testing.assert_allclose(np.asarray(r), want, rtol=tol(dt) * 10, atol=tol(dt) * 10)


def test_sum_prod_empty_and_dtype_keyword():
    assert np.asarray(xp.sum(xp.asarray([], dtype=xp.float32))).item() == 0.0
    assert np.asarray(xp.prod(xp.asarray([], dtype=xp.float32))).item() == 1.0
    assert np.asarray(xp.sum(xp.ones((0, 3)), axis=0)).tolist() == [0.0, 0.0, 0.0]
    assert np.asarray(xp.prod(xp.ones((2, 0)), axis=1)).tolist() == [1.0, 1.0]
    x = xp.asarray([100, 100, 100], dtype=xp.int8)
    r = xp.sum(x, dtype=xp.int16)
    assert r.dtype == xp.int16 and int(r) == 300  # cast before summing: no overflow
    assert xp.sum(x).dtype == DEFAULT_INT and int(xp.sum(x)) == 300
    assert xp.prod(xp.asarray([2.0, 3.0]), dtype=xp.float64).dtype == xp.float64
    for dt in REAL_FLOATS + COMPLEX_FLOATS:
        assert xp.sum(xp.ones((2,), dtype=dt)).dtype == dt  # floats keep their dtype
        assert xp.prod(xp.ones((2,), dtype=dt)).dtype == dt
    assert xp.sum(xp.asarray([True, True, False])).dtype in (DEFAULT_INT,)  # bool: impl-defined


def test_sum_nan_and_inf():
    assert math.isnan(float(xp.sum(xp.asarray([1.0, float("nan")]))))
    assert math.isnan(float(xp.sum(xp.asarray([float("inf"), -float("inf")]))))
    assert float(xp.sum(xp.asarray([float("inf"), 1.0]))) == math.inf
    assert math.isnan(float(xp.prod(xp.asarray([0.0, float("inf")]))))


# ---- max / min ---------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["max", "min"])
@given(data=array_and_axis(REAL, min_size=1), keepdims=st.booleans())
def test_max_min(name, data, keepdims):
    dt, x, axis = data
    r = getattr(xp, name)(xp.asarray(x), axis=axis, keepdims=keepdims)
    assert r.dtype == dt
    assert r.shape == _reduced_shape(x.shape, axis, keepdims)
    want = getattr(np, "max" if name == "max" else "min")(x, axis=_np_axis(axis), keepdims=keepdims)
    np.testing.assert_array_equal(np.asarray(r), want)


@pytest.mark.parametrize("name", ["max", "min"])
def test_max_min_nan_propagates(name):
    for dt in REAL_FLOATS:
        x = xp.asarray([[1.0, float("nan"), 3.0], [1.0, 2.0, 3.0]], dtype=dt)
        fn = getattr(xp, name)
        assert math.isnan(float(fn(x)))
        r = np.asarray(fn(x, axis=1))
        assert math.isnan(r[0]) and not math.isnan(r[1])
        assert float(fn(xp.asarray([-math.inf, 0.0, math.inf], dtype=dt))) == \
            (math.inf if name == "max" else -math.inf)


def test_max_min_empty_is_implementation_defined_but_handled():
    # "may choose to raise an error, return a sentinel value ... or return the minimum possible
    # value": any of these, never a crash from the backend.
    for fn in (xp.max, xp.min):
        try:
            r = fn(xp.asarray([], dtype=xp.float32))
        except (ValueError, TypeError):
            continue
        v = float(r)
        assert math.isnan(v) or math.isinf(v)


# ---- mean / var / std --------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["mean", "var", "std"])
@given(data=array_and_axis(REAL_FLOATS, min_size=1), keepdims=st.booleans(),
       correction=st.sampled_from([0, 1, 0.5]))
def test_mean_var_std(name, data, keepdims, correction):
    dt, x, axis = data
    kw = {} if name == "mean" else {"correction": correction}
    r = getattr(xp, name)(xp.asarray(x), axis=axis, keepdims=keepdims, **kw)
    assert r.dtype == dt
    assert r.shape == _reduced_shape(x.shape, axis, keepdims)
    x64 = x.astype(np.float64)
    if name == "mean":
        want = np.mean(x64, axis=_np_axis(axis), keepdims=keepdims)
    else:
        want = getattr(np, name)(x64, axis=_np_axis(axis), keepdims=keepdims, ddof=correction)
    np.testing.assert_allclose(np.asarray(r), want, rtol=1e-4, atol=1e-5, equal_nan=True)


def test_mean_var_std_special_cases():
    for dt in REAL_FLOATS:
        empty = xp.asarray([], dtype=dt)
        assert math.isnan(float(xp.mean(empty)))  # N == 0 -> NaN
        assert math.isnan(float(xp.mean(xp.asarray([1.0, float("nan")], dtype=dt))))
        one = xp.asarray([3.0], dtype=dt)
        assert math.isnan(float(xp.var(one, correction=1)))  # N - correction <= 0 -> NaN
        assert math.isnan(float(xp.std(one, correction=1)))
        two = xp.asarray([1.0, 2.0], dtype=dt)
        assert math.isnan(float(xp.var(two, correction=2))), float(xp.var(two, correction=2))
        assert math.isnan(float(xp.var(two, correction=3))), float(xp.var(two, correction=3))
        assert math.isnan(float(xp.std(two, correction=2))), float(xp.std(two, correction=2))
        cols = xp.asarray([[1.0, 5.0], [2.0, 5.0]], dtype=dt)
        assert np.isnan(np.asarray(xp.var(cols, axis=0, correction=2))).all()
        assert math.isnan(float(xp.var(xp.asarray([1.0, float("nan")], dtype=dt))))
        assert math.isnan(float(xp.std(xp.asarray([1.0, float("nan")], dtype=dt))))
        assert float(xp.var(xp.asarray([1.0, 3.0], dtype=dt))) == 1.0  # correction defaults to 0
        assert float(xp.std(xp.asarray([1.0, 3.0], dtype=dt), correction=1)) == \
            pytest.approx(math.sqrt(2))


def test_mean_of_integers_gives_default_float():
    # "if the input array x has an integer data type, the returned array must have the default
    # real-valued floating-point data type"
    for dt in INTS:
        for fn in (xp.mean, xp.var, xp.std):
            assert fn(xp.asarray([1, 2, 3], dtype=dt)).dtype == DEFAULT_FLOAT, (fn, dname(dt))
    assert float(xp.mean(xp.asarray([1, 2]))) == 1.5


# ---- cumulative_sum ----------------------------------------------------------------------------

@given(data=array_and_axis(NUMERIC, allow_tuple=False, allow_none=False),
       include_initial=st.booleans())
def test_cumulative_sum(data, include_initial):
    dt, x, axis = data
    if x.ndim == 0:
        return  # the standard describes N-d input with an axis
    r = xp.cumulative_sum(xp.asarray(x), axis=axis, include_initial=include_initial)
    assert r.dtype == _sum_dtype(dt)
    acc = np.cumsum(x.astype(np.dtype(_sum_dtype(dt))), axis=axis)
    if include_initial:
        pad = [(0, 0)] * x.ndim
        pad[axis] = (1, 0)
        acc = np.pad(acc, pad)
    assert r.shape == acc.shape
    np.testing.assert_allclose(np.asarray(r), acc, rtol=tol(dt) * 10, atol=tol(dt) * 10)


def test_cumulative_sum_forms():
    x = xp.asarray([1, 2, 3])
    assert np.asarray(xp.cumulative_sum(x)).tolist() == [1, 3, 6]  # axis optional for 1-d
    assert np.asarray(xp.cumulative_sum(x, include_initial=True)).tolist() == [0, 1, 3, 6]
    r = xp.cumulative_sum(xp.asarray([100, 100], dtype=xp.int8), dtype=xp.int16)
    assert r.dtype == xp.int16 and np.asarray(r).tolist() == [100, 200]
    assert xp.cumulative_sum(xp.ones((0,))).shape == (0,)
    assert xp.cumulative_sum(xp.ones((0,)), include_initial=True).shape == (1,)
    with pytest.raises((ValueError, TypeError)):
        xp.cumulative_sum(xp.ones((2, 2)))  # axis is required for N-d input


# ---- all / any ---------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["all", "any"])
@given(data=array_and_axis((xp.bool,) + NUMERIC), keepdims=st.booleans())
def test_all_any(name, data, keepdims):
    dt, x, axis = data
    r = getattr(xp, name)(xp.asarray(x), axis=axis, keepdims=keepdims)
    assert r.dtype == xp.bool
    assert r.shape == _reduced_shape(x.shape, axis, keepdims)
    np.testing.assert_array_equal(np.asarray(r), getattr(np, name)(x, axis=_np_axis(axis),
                                                                   keepdims=keepdims))


def test_all_any_special_values():
    x = xp.asarray([float("nan"), float("inf"), -float("inf"), 0.5])
    assert bool(xp.all(x)) is True  # NaN and infinities evaluate to True
    assert bool(xp.any(xp.asarray([0.0, -0.0, float("nan")]))) is True
    assert bool(xp.any(xp.asarray([0.0, -0.0]))) is False
    z = xp.asarray([complex(0, 1), complex(1, 0), complex(0, -0.0)])
    assert np.asarray(xp.all(z)).item() is False
    assert np.asarray(xp.any(z[:2])).item() is True
    assert bool(xp.all(xp.asarray([], dtype=xp.bool))) is True
    assert bool(xp.any(xp.asarray([], dtype=xp.bool))) is False
    assert np.asarray(xp.all(xp.ones((2, 0)), axis=1)).tolist() == [True, True]
    assert np.asarray(xp.any(xp.ones((2, 0)), axis=1)).tolist() == [False, False]


@pytest.mark.parametrize("name", ["sum", "prod", "max", "min", "mean", "var", "std", "all",
                                  "any"])
def test_invalid_axis_raises(name):
    x = xp.ones((2, 3))
    for axis in (2, -3, (0, 2)):
        with pytest.raises((ValueError, IndexError, TypeError)):
            getattr(xp, name)(x, axis=axis)
