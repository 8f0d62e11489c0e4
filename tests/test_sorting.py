"""Sorting and searching: stability, NaN order, errors, eager-only unique, and hypothesis
property tests against NumPy."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, strategies as st

import starling.numpy as snp
from starling.arrays.ops.axes import AxisError
from starling.core.trace import ConcretizationError
from starling.transforms.stage import make_ir
from tests.opinfo.sorting import ref_argsort


def test_sort_nan_last_and_descending_nan_first():
    x = snp.asarray(np.array([2.0, np.nan, -np.inf, 1.0, np.inf]))
    np.testing.assert_array_equal(np.asarray(snp.sort(x)), [-np.inf, 1, 2, np.inf, np.nan])
    np.testing.assert_array_equal(np.asarray(snp.sort(x, descending=True)),
                                  [np.nan, np.inf, 2, 1, -np.inf])


def test_argsort_stable_on_ties_both_directions():
    x = snp.asarray(np.array([1, 0, 1, 0, 2, 1]))
    np.testing.assert_array_equal(np.asarray(snp.argsort(x)), [1, 3, 0, 2, 5, 4])
    np.testing.assert_array_equal(np.asarray(snp.argsort(x, descending=True)),
                                  [4, 0, 2, 5, 1, 3])
    nans = snp.asarray(np.array([np.nan, 1.0, np.nan]))
    np.testing.assert_array_equal(np.asarray(snp.argsort(nans)), [1, 0, 2])
    np.testing.assert_array_equal(np.asarray(snp.argsort(nans, descending=True)), [0, 2, 1])


def test_sort_axes_and_errors():
    x = snp.asarray(np.array([[3, 1, 2], [0, 5, 4]]))
    np.testing.assert_array_equal(np.asarray(snp.sort(x, axis=0)), [[0, 1, 2], [3, 5, 4]])
    np.testing.assert_array_equal(np.asarray(snp.sort(x, axis=None)), [0, 1, 2, 3, 4, 5])
    with pytest.raises(AxisError, match="sort: axis -1 is out of bounds for array of ndim 0"):
        snp.sort(snp.asarray(1.0))
    assert snp.sort(snp.asarray(1.0), axis=None).shape == (1,)
    with pytest.raises(AxisError, match="argsort: axis 2 is out of bounds"):
        snp.argsort(x, axis=2)
    with pytest.raises(TypeError, match="sort: order= .* is not supported"):
        snp.sort(x, order="a")
    with pytest.raises(ValueError, match="sort: kind must be one of"):
        snp.sort(x, kind="bogo")
    assert snp.argsort(x).dtype == np.int64
    np.testing.assert_array_equal(np.asarray(snp.sort(x, kind="quicksort", stable=False)),
                                  np.sort(np.asarray(x)))


def test_complex_sort_is_lexicographic():
    c = np.array([1 + 2j, 1 - 1j, 0 + 5j, complex(np.nan, 0), 1 + 0j])
    np.testing.assert_array_equal(np.asarray(snp.sort(snp.asarray(c))), np.sort(c))


def test_searchsorted():
    a = snp.asarray(np.array([0.0, 1.0, 1.0, 2.0, np.nan]))
    v = snp.asarray(np.array([[1.0, -1.0], [np.nan, 3.0]]))
    np.testing.assert_array_equal(np.asarray(snp.searchsorted(a, v)), [[1, 0], [4, 4]])
    np.testing.assert_array_equal(np.asarray(snp.searchsorted(a, v, side="right")),
                                  [[3, 0], [5, 4]])
    assert snp.searchsorted(a, 1.5).shape == () and int(snp.searchsorted(a, 1.5)) == 3
    unsorted = snp.asarray(np.array([3.0, 1.0, 2.0]))
    r = snp.searchsorted(unsorted, snp.asarray([2.5]), sorter=snp.argsort(unsorted))
    assert int(r[0]) == 2
    with pytest.raises(ValueError, match=r"searchsorted: x1 must be 1-D, got shape \(2, 2\)"):
        snp.searchsorted(snp.asarray(np.zeros((2, 2))), 1.0)
    with pytest.raises(ValueError, match="searchsorted: side must be 'left' or 'right'"):
        snp.searchsorted(a, 1.0, side="middle")
    with pytest.raises(ValueError, match="searchsorted: sorter must be an integer array"):
        snp.searchsorted(a, 1.0, sorter=snp.asarray([0, 1]))


def test_top_k():
    x = snp.asarray(np.array([[1.0, 5.0, 5.0, np.nan, 0.0]]))
    v, i = snp.top_k(x, 3)
    np.testing.assert_array_equal(np.asarray(v), [[np.nan, 5.0, 5.0]])
    np.testing.assert_array_equal(np.asarray(i), [[3, 1, 2]])
    assert i.dtype == np.int64
    with pytest.raises(ValueError, match="top_k: k=6 is out of range for the last axis of size 5"):
        snp.top_k(x, 6)
    with pytest.raises(ValueError, match="top_k: input must have at least one dimension"):
        snp.top_k(snp.asarray(1.0), 1)
    with pytest.raises(TypeError, match="top_k: k must be a Python int"):
        snp.top_k(x, 1.5)
    prog = make_ir(lambda x: snp.top_k(x, 2))(x)
    assert [a.shape for a in prog.out_avals] == [(1, 2), (1, 2)]


def test_unique_family():
    x = np.array([[3, 1, 1], [2, 3, 3]])
    v, idx, inv, cnt = snp.unique(snp.asarray(x), return_index=True, return_inverse=True,
                                  return_counts=True)
    np.testing.assert_array_equal(np.asarray(v), [1, 2, 3])
    np.testing.assert_array_equal(np.asarray(v)[np.asarray(inv)], x)
    np.testing.assert_array_equal(np.asarray(cnt), [2, 1, 3])
    np.testing.assert_array_equal(x.reshape(-1)[np.asarray(idx)], [1, 2, 3])
    res = snp.unique_all(snp.asarray(x))
    assert res.inverse_indices.shape == x.shape and res.counts.dtype == np.int64
    vals, counts = snp.unique_counts(snp.asarray(np.array([np.nan, 1.0, np.nan])))
    assert vals.shape == (3,) and np.asarray(counts).tolist() == [1, 1, 1]  # NaNs are distinct
    assert snp.unique(snp.asarray(np.array([np.nan, np.nan]))).shape == (1,)  # NumPy default


@pytest.mark.parametrize("op", ["unique", "unique_values", "unique_counts", "unique_inverse",
                                "unique_all"])
def test_unique_under_tracing_raises(op):
    x = snp.asarray(np.array([1, 2, 2]))
    with pytest.raises(ConcretizationError, match=f"{op}: the output shape depends on the "
                                                  "values"):
        make_ir(getattr(snp, op))(x)
    assert issubclass(ConcretizationError, TypeError)


# ---- hypothesis properties ---------------------------------------------------------------------

_VALUES = st.sampled_from([0.0, -0.0, 1.0, -1.0, 2.5, np.nan, np.inf, -np.inf, 3.0])


@st.composite
def float_arrays(draw, max_dims=3):
    shape = tuple(draw(st.lists(st.integers(0, 5), min_size=1, max_size=max_dims)))
    n = int(np.prod(shape))
    data = draw(st.lists(_VALUES, min_size=n, max_size=n))
    return np.array(data, np.float64).reshape(shape)


@given(float_arrays(), st.data())
def test_sort_argsort_match_numpy(x, data):
    axis = data.draw(st.integers(-x.ndim, x.ndim - 1))
    a = snp.asarray(x)
    np.testing.assert_array_equal(np.asarray(snp.sort(a, axis=axis)), np.sort(x, axis=axis))
    np.testing.assert_array_equal(np.asarray(snp.argsort(a, axis=axis)),
                                  np.argsort(x, axis=axis, kind="stable"))
    # descending: the reverse order, ties by original position (a Python stable sort)
    desc = np.asarray(snp.argsort(a, axis=axis, descending=True))
    np.testing.assert_array_equal(desc, ref_argsort(x, axis, descending=True))
    np.testing.assert_array_equal(np.asarray(snp.sort(a, axis=axis, descending=True)),
                                  np.take_along_axis(x, desc, axis))


@given(float_arrays(max_dims=1), float_arrays(), st.sampled_from(["left", "right"]))
def test_searchsorted_matches_numpy(hay, needles, side):
    hay = np.sort(hay)
    got = snp.searchsorted(snp.asarray(hay), snp.asarray(needles), side=side)
    np.testing.assert_array_equal(np.asarray(got), np.searchsorted(hay, needles, side=side))


@given(float_arrays(), st.data())
def test_top_k_is_head_of_descending_sort(x, data):
    k = data.draw(st.integers(0, x.shape[-1]))
    v, i = snp.top_k(snp.asarray(x), k)
    idx = np.asarray(snp.argsort(snp.asarray(x), descending=True))[..., :k]
    np.testing.assert_array_equal(np.asarray(i), idx)
    np.testing.assert_array_equal(np.asarray(v), np.take_along_axis(x, idx, -1))
