"""Set functions (Array API 2023.12): unique_all, unique_counts, unique_inverse, unique_values.

The order of the unique values is unspecified, so results are checked as sets with their
companions (indices, inverse indices, counts) consistent with them.
"""
from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, strategies as st
from hypothesis.extra import numpy as hnp

import starling.numpy as xp
from tests.array_api import ALL_DTYPES, DEFAULT_INDEX, dname


@st.composite
def _x(draw):
    dt = np.dtype(draw(st.sampled_from(ALL_DTYPES)))
    if dt == np.bool_:
        el = st.booleans()
    elif dt.kind in "iu":
        el = st.integers(0, 4)
    elif dt.kind == "c":
        el = st.builds(complex, st.sampled_from([0.0, 1.0]), st.sampled_from([0.0, -2.0]))
    else:
        el = st.sampled_from([0.0, 1.5, -2.0, 3.0])
    shape = draw(hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4))
    return draw(hnp.arrays(dt, shape, elements=el))


def _key(v):
    return v.item() if hasattr(v, "item") else v


@given(x=_x())
def test_unique_all(x):
    r = xp.unique_all(xp.asarray(x))
    assert r._fields == ("values", "indices", "inverse_indices", "counts")
    values, indices, inverse, counts = (np.asarray(a) for a in r)
    flat = x.reshape(-1)
    assert r.values.dtype == x.dtype and values.ndim == 1
    keys = list(map(_key, values))
    assert len(keys) == len(set(keys)) and set(keys) == set(map(_key, flat))
    assert r.indices.dtype == DEFAULT_INDEX and indices.shape == values.shape
    assert r.inverse_indices.dtype == DEFAULT_INDEX and inverse.shape == x.shape
    assert r.counts.dtype == DEFAULT_INDEX and counts.shape == values.shape
    cnt = Counter(map(_key, flat))
    for v, i, c in zip(values, indices, counts):
        assert flat[i] == v and list(flat).index(v) == i  # first occurrence
        assert cnt[_key(v)] == c
    np.testing.assert_array_equal(values[inverse], x)


@given(x=_x())
def test_unique_counts_inverse_values(x):
    flat = x.reshape(-1)
    uc = xp.unique_counts(xp.asarray(x))
    assert uc._fields == ("values", "counts")
    cnt = Counter(map(_key, flat))
    assert {_key(v): int(c) for v, c in zip(np.asarray(uc.values), np.asarray(uc.counts))} == cnt
    assert uc.counts.dtype == DEFAULT_INDEX
    ui = xp.unique_inverse(xp.asarray(x))
    assert ui._fields == ("values", "inverse_indices")
    assert ui.inverse_indices.shape == x.shape and ui.inverse_indices.dtype == DEFAULT_INDEX
    np.testing.assert_array_equal(np.asarray(ui.values)[np.asarray(ui.inverse_indices)], x)
    uv = xp.unique_values(xp.asarray(x))
    assert uv.ndim == 1 and uv.dtype == x.dtype
    keys = list(map(_key, np.asarray(uv)))
    assert len(keys) == len(set(keys)) and set(keys) == set(cnt)


@pytest.mark.parametrize("dt", [xp.float32, xp.float64, xp.complex64], ids=dname)
def test_nan_distinct_signed_zeros_not(dt):
    nan = float("nan")
    x = xp.asarray([nan, 0.0, -0.0, nan, 1.0], dtype=dt)
    for fn in (xp.unique_values, lambda a: xp.unique_all(a).values,
               lambda a: xp.unique_counts(a).values, lambda a: xp.unique_inverse(a).values):
        v = np.asarray(fn(x))
        assert v.shape == (4,), v  # two NaNs, one zero, one 1.0
        assert np.isnan(v).sum() == 2
    c = xp.unique_counts(x)
    counts = dict(zip(np.asarray(c.values).tolist(), np.asarray(c.counts).tolist()))
    zero = [k for k in counts if k == 0][0]
    assert counts[zero] == 2  # the signed zeros aggregate
    assert sorted(v for k, v in counts.items() if k != k) == [1, 1]  # each NaN counts once
    a = xp.unique_all(x)
    nan_idx = sorted(int(i) for v, i in zip(np.asarray(a.values), np.asarray(a.indices))
                     if v != v)
    assert nan_idx == [0, 3]
    if dt == xp.complex64:
        z = xp.asarray([complex(nan, 1), complex(nan, 1), 1j], dtype=dt)
        assert xp.unique_values(z).shape == (3,)


def test_unique_flattens():
    x = xp.asarray([[3, 1], [1, 3]])
    assert sorted(np.asarray(xp.unique_values(x)).tolist()) == [1, 3]
    inv = xp.unique_all(x).inverse_indices
    assert inv.shape == (2, 2)
    assert xp.unique_values(xp.asarray(5)).shape == (1,)
    assert math.prod(xp.unique_values(xp.ones((0, 2))).shape) == 0
