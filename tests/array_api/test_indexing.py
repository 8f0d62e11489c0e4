"""Indexing (Array API 2023.12): single- and multi-axis basic indexing, boolean array indexing,
and the ``take`` indexing function."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, strategies as st
from hypothesis.extra import numpy as hnp

import starling.numpy as xp
from tests.array_api import ALL_DTYPES, DEFAULT_INDEX, dname


def _x(shape):
    return np.arange(int(np.prod(shape)), dtype=np.int64).reshape(shape)


def _eq(got, want):
    g = np.asarray(got)
    w = np.asarray(want)
    assert g.shape == w.shape, (g.shape, w.shape)
    np.testing.assert_array_equal(g, w)


# ---- slices ------------------------------------------------------------------------------------

@st.composite
def _slice(draw, n):
    # the ranges the standard requires: -n <= i <= n; k > 0: -n <= j <= n;
    # k < 0: -n-1 <= j <= max(0, n-1)
    step = draw(st.none() | st.integers(-3, 3).filter(bool))
    start = draw(st.none() | st.integers(-n, n))
    if step is not None and step < 0:
        stop = draw(st.none() | st.integers(-n - 1, max(0, n - 1)))
    else:
        stop = draw(st.none() | st.integers(-n, n))
    return slice(start, stop, step)


@given(n=st.integers(0, 6), data=st.data())
def test_single_axis_slice_matches_python_lists(n, data):
    s = data.draw(_slice(n))
    r = xp.asarray(list(range(n)), dtype=xp.int64)[s]
    assert np.asarray(r).tolist() == list(range(n))[s]
    assert r.ndim == 1 and r.dtype == xp.int64


@given(shape=hnp.array_shapes(min_dims=1, max_dims=4, min_side=1, max_side=4), data=st.data())
def test_multi_axis_basic_indexing(shape, data):
    key = []
    for n in shape:
        key.append(data.draw(st.integers(-n, n - 1) | _slice(n)))
    for _ in range(data.draw(st.integers(0, 2))):  # each None adds a dimension of size 1
        key.insert(data.draw(st.integers(0, len(key))), None)
    if data.draw(st.booleans()):
        pos = data.draw(st.integers(0, len(key)))
        key.insert(pos, Ellipsis)
        # with an ellipsis some expressions may be left out
        del key[pos + 1:pos + 1 + data.draw(st.integers(0, len(key) - pos - 1))]
    key = tuple(key)
    x = _x(shape)
    r = xp.asarray(x)[key]
    _eq(r, x[key])
    assert r.dtype == xp.int64


def test_integer_index_reduces_rank_and_gives_0d_arrays():
    x = xp.asarray([[1, 2, 3], [4, 5, 6]])
    r = x[1, -1]
    assert isinstance(r, type(x)) and r.shape == () and int(r) == 6  # a 0-d array, not a scalar
    assert x[0].shape == (3,) and x[:, 0].shape == (2,)
    assert xp.asarray([7])[0].shape == ()
    assert x[-2, 0].shape == () and int(x[-2, 0]) == 1


def test_slice_defaults():
    x = xp.asarray(list(range(6)))
    assert np.asarray(x[::-1]).tolist() == [5, 4, 3, 2, 1, 0]      # i = n-1, j = -n-1
    assert np.asarray(x[::2]).tolist() == [0, 2, 4]
    assert np.asarray(x[4::-2]).tolist() == [4, 2, 0]
    assert np.asarray(x[2:2]).shape == (0,)                         # i == j: empty
    assert np.asarray(x[:]).tolist() == np.asarray(x[::]).tolist()
    assert np.asarray(x[-6:6]).tolist() == list(range(6))
    assert np.asarray(x[5:-7:-1]).tolist() == [5, 4, 3, 2, 1, 0]


def test_ellipsis_none_and_0d():
    x = xp.asarray(_x((2, 3, 4, 5)))
    _eq(x[1:, ..., 2:5], _x((2, 3, 4, 5))[1:, :, :, 2:5])
    _eq(x[..., 0], _x((2, 3, 4, 5))[..., 0])
    assert x[None].shape == (1, 2, 3, 4, 5)
    assert x[:, None, :, xp.newaxis].shape == (2, 1, 3, 1, 4, 5)
    assert x[..., None].shape == (2, 3, 4, 5, 1)
    z = xp.asarray(3.5)
    assert z[()].shape == () and float(z[()]) == 3.5
    assert z[...].shape == ()
    assert z[None].shape == (1,)
    assert xp.asarray([1, 2])[(slice(0, 1),)].shape == (1,)  # A[(i:j,)] == A[i:j]


def test_indexing_errors():
    x = xp.ones((2, 3))
    with pytest.raises(IndexError):
        x[..., 0, ...]  # more than one ellipsis
    with pytest.raises(IndexError):
        x[0, 0, 0]  # more single-axis expressions than dimensions
    with pytest.raises(IndexError):
        xp.asarray(1.0)[0]


# ---- boolean array indexing --------------------------------------------------------------------

@given(shape=hnp.array_shapes(min_dims=1, max_dims=3, min_side=0, max_side=4), data=st.data())
def test_boolean_mask(shape, data):
    m = data.draw(st.integers(1, len(shape)))
    mask = data.draw(hnp.arrays(np.bool_, shape[:m]))
    x = _x(shape)
    r = xp.asarray(x)[xp.asarray(mask)]
    _eq(r, x[mask])  # row-major order, first M dims replaced by one
    assert r.shape == (int(mask.sum()),) + shape[m:]


def test_boolean_mask_0d_and_errors():
    x = xp.asarray([[1, 2], [3, 4]])
    assert x[xp.asarray(True)].shape == (1, 2, 2)
    assert x[xp.asarray(False)].shape == (0, 2, 2)
    assert xp.asarray(5)[xp.asarray(True)].shape == (1,)
    with pytest.raises(IndexError):
        x[xp.ones((2, 2, 2), dtype=xp.bool)]  # mask has more dims than x
    with pytest.raises(IndexError):
        x[xp.asarray([True, False, True])]  # size mismatch


def test_boolean_mask_with_special_values():
    x = xp.asarray([float("nan"), -0.0, 1.0])
    r = np.asarray(x[xp.asarray([True, True, False])])
    assert np.isnan(r[0]) and np.signbit(r[1])


@pytest.mark.parametrize("dt", ALL_DTYPES, ids=dname)
def test_indexing_keeps_dtype(dt):
    x = xp.ones((3, 2), dtype=dt)
    for r in (x[0], x[1:], x[..., 0], x[None], x[xp.asarray([True, False, True])], x[0, 1]):
        assert r.dtype == dt


# ---- take --------------------------------------------------------------------------------------

@given(shape=hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=4), data=st.data())
def test_take(shape, data):
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    n = shape[axis]
    # in-bounds, nonnegative indices (the standard leaves the others unspecified)
    idx = data.draw(hnp.arrays(np.int64, st.integers(0, 5), elements=st.integers(0, n - 1)))
    x = _x(shape)
    r = xp.take(xp.asarray(x), xp.asarray(idx), axis=axis)
    _eq(r, np.take(x, idx, axis=axis))


def test_take_forms():
    x = xp.asarray([10, 20, 30])
    assert np.asarray(xp.take(x, xp.asarray([2, 0, 0]))).tolist() == [30, 10, 10]  # 1-d: axis opt
    for dt in (xp.int8, xp.int32, xp.uint8, DEFAULT_INDEX):
        assert np.asarray(xp.take(x, xp.asarray([1], dtype=dt), axis=0)).tolist() == [20]
    m = xp.asarray([[1, 2], [3, 4]])
    assert np.asarray(xp.take(m, xp.asarray([1]), axis=1)).tolist() == [[2], [4]]
    assert xp.take(m, xp.asarray([], dtype=xp.int64), axis=0).shape == (0, 2)
