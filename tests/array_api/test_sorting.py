"""Sorting functions (Array API 2023.12): argsort, sort (axis, descending, stable)."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, strategies as st
from hypothesis.extra import numpy as hnp

import starling.numpy as xp
from tests.array_api import DEFAULT_INDEX, REAL, dname


@st.composite
def _case(draw):
    dt = draw(st.sampled_from(REAL))
    shape = draw(hnp.array_shapes(min_dims=1, max_dims=3, min_side=0, max_side=5))
    dtn = np.dtype(dt)
    elements = st.integers(0, 3) if dtn.kind in "iu" else st.sampled_from([-1.5, 0.0, 2.0, 7.0])
    x = draw(hnp.arrays(dtn, shape, elements=elements))  # few values: many ties
    axis = draw(st.integers(-x.ndim, x.ndim - 1))
    return x, axis


def _stable_order(x, axis, descending):
    # The reference: a stable sort on the key (value, or minus rank for descending) keeps ties
    # in their original order, as the standard requires for stable=True.
    if not descending:
        return np.argsort(x, axis=axis, kind="stable")
    # rank-based key so that unsigned dtypes can be "negated"
    ranks = np.unique(x, return_inverse=True)[1].reshape(x.shape)
    return np.argsort(-ranks, axis=axis, kind="stable")


@given(case=_case(), descending=st.booleans())
def test_argsort_stable(case, descending):
    x, axis = case
    r = xp.argsort(xp.asarray(x), axis=axis, descending=descending, stable=True)
    assert r.dtype == DEFAULT_INDEX and r.shape == x.shape
    np.testing.assert_array_equal(np.asarray(r), _stable_order(x, axis, descending))


@given(case=_case(), descending=st.booleans(), stable=st.booleans())
def test_sort(case, descending, stable):
    x, axis = case
    r = xp.sort(xp.asarray(x), axis=axis, descending=descending, stable=stable)
    assert r.dtype == x.dtype and r.shape == x.shape
    want = np.sort(x, axis=axis)
    if descending:
        want = np.flip(want, axis=axis)
    np.testing.assert_array_equal(np.asarray(r), want)


@given(case=_case(), descending=st.booleans())
def test_argsort_unstable_still_sorts(case, descending):
    x, axis = case
    idx = np.asarray(xp.argsort(xp.asarray(x), axis=axis, descending=descending, stable=False))
    got = np.take_along_axis(x, idx, axis=axis)
    want = np.sort(x, axis=axis)
    if descending:
        want = np.flip(want, axis=axis)
    np.testing.assert_array_equal(got, want)
    # a permutation along the axis
    np.testing.assert_array_equal(np.sort(idx, axis=axis),
                                  np.broadcast_to(np.arange(x.shape[axis]).reshape(
                                      [-1 if i == axis % x.ndim else 1 for i in range(x.ndim)]),
                                      x.shape))


def test_defaults_last_axis_ascending_stable():
    x = xp.asarray([[3, 1, 2], [1, 1, 0]])
    assert np.asarray(xp.sort(x)).tolist() == [[1, 2, 3], [0, 1, 1]]
    assert np.asarray(xp.argsort(x)).tolist() == [[1, 2, 0], [2, 0, 1]]
    assert np.asarray(xp.argsort(xp.asarray([2, 1, 2, 1]), descending=True)).tolist() == \
        [0, 2, 1, 3]


@pytest.mark.parametrize("dt", [xp.float32, xp.float64], ids=dname)
def test_sort_with_nan_and_infinities(dt):
    x = xp.asarray([float("nan"), 1.0, -float("inf"), float("inf"), -1.0], dtype=dt)
    r = np.asarray(xp.sort(x))
    # NaN placement is implementation-defined; the other values must be in order
    finite = r[~np.isnan(r)]
    assert finite.tolist() == [-np.inf, -1.0, 1.0, np.inf]
    assert np.isnan(r).sum() == 1


def test_sort_0d_axis_errors():
    with pytest.raises((ValueError, IndexError, TypeError)):
        xp.sort(xp.ones((2, 2)), axis=2)
