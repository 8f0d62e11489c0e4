"""Searching functions (Array API 2023.12): argmax, argmin, nonzero, searchsorted, where."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, strategies as st
from hypothesis.extra import numpy as hnp

import starling.numpy as xp
from tests.array_api import ALL_DTYPES, DEFAULT_INDEX, NUMERIC, REAL, REAL_FLOATS, dname


def _small(dt):
    dt = np.dtype(dt)
    if dt == np.bool_:
        return st.booleans()
    if dt.kind in "iu":
        return st.integers(0, 3)  # few distinct values: ties exercise "first occurrence"
    if dt.kind == "c":
        return st.builds(complex, st.sampled_from([0.0, 1.0, -0.0]), st.sampled_from([0.0, 2.0]))
    return st.sampled_from([0.0, 1.5, -2.0, 3.0, -0.0])


@st.composite
def _array(draw, dtypes, min_dims=0, min_side=0):
    dt = draw(st.sampled_from(dtypes))
    shape = draw(hnp.array_shapes(min_dims=min_dims, max_dims=3, min_side=min_side, max_side=4))
    return draw(hnp.arrays(np.dtype(dt), shape, elements=_small(dt)))


# ---- argmax / argmin ---------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["argmax", "argmin"])
@given(x=_array(REAL, min_side=1), data=st.data(), keepdims=st.booleans())
def test_argmax_argmin(name, x, data, keepdims):
    nd = x.ndim
    axis = data.draw(st.none() | st.integers(-nd, nd - 1)) if nd else None
    r = getattr(xp, name)(xp.asarray(x), axis=axis, keepdims=keepdims)
    assert r.dtype == DEFAULT_INDEX
    want = getattr(np, name)(x, axis=axis, keepdims=keepdims)  # NumPy returns the first occurrence
    assert r.shape == np.shape(want)
    np.testing.assert_array_equal(np.asarray(r), want)


def test_argmax_argmin_first_occurrence_and_0d():
    x = xp.asarray([1, 5, 5, 0, 0])
    assert int(xp.argmax(x)) == 1 and int(xp.argmin(x)) == 3
    r = xp.argmax(xp.asarray(7.0))
    assert r.shape == () and int(r) == 0
    r = xp.argmax(xp.asarray([[1, 9], [9, 1]]))
    assert r.shape == () and int(r) == 1  # index into the flattened array
    r = xp.argmin(xp.ones((2, 3)), axis=None, keepdims=True)
    assert r.shape == (1, 1)


# ---- nonzero -----------------------------------------------------------------------------------

@given(x=_array(ALL_DTYPES, min_dims=1))
def test_nonzero(x):
    r = xp.nonzero(xp.asarray(x))
    assert isinstance(r, tuple) and len(r) == x.ndim
    want = np.nonzero(x)  # row-major order
    for got, w in zip(r, want):
        assert got.dtype == DEFAULT_INDEX and got.shape == w.shape
        np.testing.assert_array_equal(np.asarray(got), w)


def test_nonzero_special_values():
    r = xp.nonzero(xp.asarray([0.0, -0.0, float("nan"), 1e-30]))
    assert np.asarray(r[0]).tolist() == [2, 3]
    z = xp.asarray([0j, complex(0, 1), complex(-0.0, 0.0), complex(1, 0)])
    assert np.asarray(xp.nonzero(z)[0]).tolist() == [1, 3]
    b = xp.asarray([[True, False], [False, True]])
    assert [np.asarray(a).tolist() for a in xp.nonzero(b)] == [[0, 1], [0, 1]]


def test_nonzero_0d_raises():
    with pytest.raises((ValueError, TypeError)):
        xp.nonzero(xp.asarray(1))


# ---- searchsorted ------------------------------------------------------------------------------

@given(data=st.data(), side=st.sampled_from(["left", "right"]))
def test_searchsorted(data, side):
    dt = data.draw(st.sampled_from(REAL))
    x1 = np.sort(data.draw(hnp.arrays(np.dtype(dt), st.integers(0, 6), elements=_small(dt))))
    x2 = data.draw(hnp.arrays(np.dtype(dt), hnp.array_shapes(min_dims=0, max_dims=2, max_side=3),
                              elements=_small(dt)))
    r = xp.searchsorted(xp.asarray(x1), xp.asarray(x2), side=side)
    assert r.dtype == DEFAULT_INDEX and r.shape == x2.shape
    idx = np.asarray(r)
    for j, v in np.ndenumerate(x2):
        i = idx[j]
        # the standard's index condition
        if side == "left":
            assert (i == 0 or x1[i - 1] < v) and (i == len(x1) or v <= x1[i])
        else:
            assert (i == 0 or x1[i - 1] <= v) and (i == len(x1) or v < x1[i])


def test_searchsorted_sorter_and_default_side():
    x1 = xp.asarray([30, 10, 20])
    sorter = xp.asarray([1, 2, 0])
    r = xp.searchsorted(x1, xp.asarray([5, 10, 25, 40]), sorter=sorter)
    assert np.asarray(r).tolist() == [0, 0, 2, 3]
    r = xp.searchsorted(xp.asarray([1.0, 2.0, 2.0, 3.0]), xp.asarray([2.0]))
    assert np.asarray(r).tolist() == [1]  # side defaults to "left"


# ---- where -------------------------------------------------------------------------------------

@given(data=st.data())
def test_where(data):
    dt = data.draw(st.sampled_from(ALL_DTYPES))
    shapes = data.draw(hnp.mutually_broadcastable_shapes(num_shapes=3, max_dims=3, max_side=3))
    c = data.draw(hnp.arrays(np.bool_, shapes.input_shapes[0]))
    x1 = data.draw(hnp.arrays(np.dtype(dt), shapes.input_shapes[1], elements=_small(dt)))
    x2 = data.draw(hnp.arrays(np.dtype(dt), shapes.input_shapes[2], elements=_small(dt)))
    r = xp.where(xp.asarray(c), xp.asarray(x1), xp.asarray(x2))
    assert r.dtype == dt and r.shape == shapes.result_shape
    np.testing.assert_array_equal(np.asarray(r), np.where(c, x1, x2))


def test_where_promotes_and_keeps_signed_zeros():
    r = xp.where(xp.asarray([True, False]), xp.asarray([1, 2], dtype=xp.int8),
                 xp.asarray([3, 4], dtype=xp.int16))
    assert r.dtype == xp.int16 and np.asarray(r).tolist() == [1, 4]
    r = xp.where(xp.asarray([True, False]), xp.asarray([-0.0, 1.0]), xp.asarray([5.0, -0.0]))
    assert np.signbit(np.asarray(r)).tolist() == [True, True]
    for dt in REAL_FLOATS:
        r = xp.where(xp.asarray(False), xp.ones((2,), dtype=dt), xp.zeros((2,), dtype=dt))
        assert r.dtype == dt


@pytest.mark.parametrize("dt", NUMERIC, ids=dname)
def test_where_all_dtypes(dt):
    r = xp.where(xp.asarray([True, False]), xp.ones((2,), dtype=dt), xp.zeros((2,), dtype=dt))
    assert r.dtype == dt and np.asarray(r).tolist() == [1, 0]
