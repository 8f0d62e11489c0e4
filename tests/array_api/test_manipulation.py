"""Manipulation functions (Array API 2023.12): broadcast_arrays, broadcast_to, concat,
expand_dims, flip, moveaxis, permute_dims, repeat, reshape, roll, squeeze, stack, tile, unstack.
Also the broadcasting rules of the "Broadcasting" page."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, strategies as st
from hypothesis.extra import numpy as hnp

import starling.numpy as xp
from tests.array_api import ALL_DTYPES, dname

_shapes = hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=3)


def _arange(shape, dtype=np.int64):
    return np.arange(int(np.prod(shape)), dtype=dtype).reshape(shape)


def _eq(got, want):
    g = np.asarray(got)
    assert g.shape == np.shape(want), (g.shape, np.shape(want))
    np.testing.assert_array_equal(g, want)


# ---- broadcasting ------------------------------------------------------------------------------

@given(shapes=hnp.mutually_broadcastable_shapes(num_shapes=3, max_dims=4, min_side=0,
                                                max_side=3))
def test_broadcast_arrays(shapes):
    arrays = [_arange(s) for s in shapes.input_shapes]
    out = xp.broadcast_arrays(*[xp.asarray(a) for a in arrays])
    assert isinstance(out, list) and len(out) == 3
    for o, a in zip(out, np.broadcast_arrays(*arrays)):
        assert o.shape == shapes.result_shape and o.dtype == xp.int64
        _eq(o, a)


def test_broadcast_arrays_keeps_each_dtype():
    out = xp.broadcast_arrays(xp.ones((2, 1), dtype=xp.int8), xp.ones((3,), dtype=xp.float64))
    assert [o.dtype for o in out] == [xp.int8, xp.float64]
    assert [o.shape for o in out] == [(2, 3), (2, 3)]
    assert xp.broadcast_arrays(xp.ones((2,)))[0].shape == (2,)


@given(data=st.data())
def test_broadcast_to(data):
    shape = data.draw(_shapes)
    target = data.draw(hnp.broadcastable_shapes(shape, min_side=0, max_side=3, max_dims=5)
                       .map(lambda s: np.broadcast_shapes(s, shape)))
    x = _arange(shape)
    r = xp.broadcast_to(xp.asarray(x), target)
    assert r.shape == target and r.dtype == xp.int64
    _eq(r, np.broadcast_to(x, target))


def test_broadcast_to_incompatible_raises():
    for shape, target in (((3,), (4,)), ((2, 3), (3,)), ((2,), (2, 3))):
        with pytest.raises((ValueError, TypeError)):
            xp.broadcast_to(xp.ones(shape), target)


def test_broadcasting_rules():
    # "(8, 1, 6, 1) with (7, 1, 5) -> (8, 7, 6, 5)"; size-0 dims broadcast with 1 but not with 2+
    assert xp.add(xp.ones((8, 1, 6, 1)), xp.ones((7, 1, 5))).shape == (8, 7, 6, 5)
    assert xp.add(xp.ones((5, 4)), xp.ones((1,))).shape == (5, 4)
    assert xp.add(xp.ones((15, 3, 5)), xp.ones((15, 1, 5))).shape == (15, 3, 5)
    assert xp.add(xp.ones((0, 3)), xp.ones((1, 3))).shape == (0, 3)
    assert xp.add(xp.ones(()), xp.ones((0,))).shape == (0,)
    for a, b in (((3,), (4,)), ((2, 1), (8, 4, 3)), ((0,), (2,))):
        with pytest.raises((ValueError, TypeError)):
            xp.add(xp.ones(a), xp.ones(b))


# ---- concat / stack / unstack ------------------------------------------------------------------

@given(data=st.data())
def test_concat(data):
    shape = data.draw(hnp.array_shapes(min_dims=1, max_dims=3, min_side=0, max_side=3))
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    n = data.draw(st.integers(1, 3))
    arrays = []
    for i in range(n):
        s = list(shape)
        s[axis] = data.draw(st.integers(0, 3))
        arrays.append(_arange(s) + 100 * i)
    r = xp.concat([xp.asarray(a) for a in arrays], axis=axis)
    _eq(r, np.concatenate(arrays, axis=axis))
    r = xp.concat(tuple(xp.asarray(a) for a in arrays), axis=None)  # flattened first
    _eq(r, np.concatenate([a.ravel() for a in arrays]))


def test_concat_defaults_and_promotion():
    a, b = xp.asarray([[1, 2]], dtype=xp.int8), xp.asarray([[3, 4]], dtype=xp.int16)
    r = xp.concat([a, b])
    assert r.dtype == xp.int16 and np.asarray(r).tolist() == [[1, 2], [3, 4]]  # axis 0
    r = xp.concat((xp.ones((1,), dtype=xp.float32), xp.ones((2,), dtype=xp.complex128)))
    assert r.dtype == xp.complex128 and r.shape == (3,)
    assert xp.concat([xp.ones((2, 2))], axis=-1).shape == (2, 2)
    with pytest.raises((ValueError, TypeError)):
        xp.concat([xp.ones((2, 2)), xp.ones((2, 3))], axis=0)


@given(shape=_shapes, n=st.integers(1, 3), data=st.data())
def test_stack(shape, n, data):
    axis = data.draw(st.integers(-len(shape) - 1, len(shape)))
    arrays = [_arange(shape) + 10 * i for i in range(n)]
    r = xp.stack([xp.asarray(a) for a in arrays], axis=axis)
    assert r.ndim == len(shape) + 1
    _eq(r, np.stack(arrays, axis=axis))


def test_stack_defaults_promotion_and_errors():
    r = xp.stack((xp.ones((2,), dtype=xp.uint8), xp.ones((2,), dtype=xp.uint16)))
    assert r.shape == (2, 2) and r.dtype == xp.uint16
    with pytest.raises((ValueError, TypeError)):
        xp.stack([xp.ones((2,)), xp.ones((3,))])
    with pytest.raises((ValueError, IndexError)):
        xp.stack([xp.ones((2,)), xp.ones((2,))], axis=2)


@given(shape=hnp.array_shapes(min_dims=1, max_dims=3, min_side=0, max_side=3), data=st.data())
def test_unstack(shape, data):
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    x = _arange(shape)
    out = xp.unstack(xp.asarray(x), axis=axis)
    assert isinstance(out, tuple) and len(out) == shape[axis]
    for i, o in enumerate(out):
        _eq(o, np.take(x, i, axis=axis))


def test_unstack_default_axis_and_errors():
    out = xp.unstack(xp.asarray([[1, 2], [3, 4], [5, 6]]))
    assert [np.asarray(o).tolist() for o in out] == [[1, 2], [3, 4], [5, 6]]
    with pytest.raises((ValueError, IndexError)):
        xp.unstack(xp.ones((2, 2)), axis=2)


# ---- expand_dims / squeeze ---------------------------------------------------------------------

@given(shape=_shapes, data=st.data())
def test_expand_dims(shape, data):
    n = len(shape)
    axis = data.draw(st.integers(-n - 1, n))
    r = xp.expand_dims(xp.asarray(_arange(shape)), axis=axis)
    pos = axis if axis >= 0 else n + axis + 1
    assert r.shape == shape[:pos] + (1,) + shape[pos:]
    r = xp.expand_dims(xp.asarray(_arange(shape)), axis)  # positional-or-keyword
    assert r.ndim == n + 1


def test_expand_dims_invalid_axis_raises_index_error():
    with pytest.raises(IndexError):  # "an IndexError should be raised"
        xp.expand_dims(xp.ones((2, 3)), axis=3)
    with pytest.raises(IndexError):
        xp.expand_dims(xp.ones((2, 3)), axis=-4)


def test_squeeze():
    x = xp.ones((1, 2, 1, 3, 1))
    assert xp.squeeze(x, axis=0).shape == (2, 1, 3, 1)
    assert xp.squeeze(x, axis=-1).shape == (1, 2, 1, 3)
    assert xp.squeeze(x, axis=(0, 2, 4)).shape == (2, 3)
    assert xp.squeeze(x, (0, -1)).shape == (2, 1, 3)
    assert xp.squeeze(xp.ones((1,)), axis=0).shape == ()
    with pytest.raises(ValueError):  # "a ValueError should be raised"
        xp.squeeze(x, axis=1)


# ---- flip / roll / permute_dims / moveaxis -----------------------------------------------------

@given(shape=_shapes, data=st.data())
def test_flip(shape, data):
    n = len(shape)
    axis = data.draw(st.none() | (st.integers(-n, n - 1) if n else st.none())
                     | st.lists(st.integers(0, max(n - 1, 0)), unique=True, max_size=n)
                     .map(tuple))
    x = _arange(shape)
    r = xp.flip(xp.asarray(x), axis=axis)
    _eq(r, np.flip(x, axis=axis) if axis != () else x)
    if axis is None:
        _eq(xp.flip(xp.asarray(x)), np.flip(x))


@given(shape=_shapes, data=st.data())
def test_roll(shape, data):
    n = len(shape)
    x = _arange(shape)
    shift = data.draw(st.integers(-5, 5))
    _eq(xp.roll(xp.asarray(x), shift), np.roll(x, shift))  # axis None: flatten, shift, restore
    if n:
        axes = data.draw(st.lists(st.integers(-n, n - 1), min_size=1, max_size=n,
                                  unique_by=lambda a: a % n).map(tuple))
        shifts = tuple(data.draw(st.integers(-4, 4)) for _ in axes)
        _eq(xp.roll(xp.asarray(x), shifts, axis=axes), np.roll(x, shifts, axis=axes))
        _eq(xp.roll(xp.asarray(x), shift, axis=axes), np.roll(x, shift, axis=axes))
        _eq(xp.roll(xp.asarray(x), shift, axis=axes[0]), np.roll(x, shift, axis=axes[0]))


@given(shape=_shapes, data=st.data())
def test_permute_dims(shape, data):
    perm = tuple(data.draw(st.permutations(range(len(shape)))))
    x = _arange(shape)
    r = xp.permute_dims(xp.asarray(x), perm)
    _eq(r, np.transpose(x, perm))
    _eq(xp.permute_dims(xp.asarray(x), axes=perm), np.transpose(x, perm))


@given(shape=hnp.array_shapes(min_dims=1, max_dims=4, max_side=3), data=st.data())
def test_moveaxis(shape, data):
    n = len(shape)
    k = data.draw(st.integers(1, n))
    src = tuple(data.draw(st.lists(st.integers(-n, n - 1), min_size=k, max_size=k,
                                   unique_by=lambda a: a % n)))
    dst = tuple(data.draw(st.lists(st.integers(-n, n - 1), min_size=k, max_size=k,
                                   unique_by=lambda a: a % n)))
    x = _arange(shape)
    _eq(xp.moveaxis(xp.asarray(x), src, dst), np.moveaxis(x, src, dst))
    _eq(xp.moveaxis(xp.asarray(x), src[0], dst[0]), np.moveaxis(x, src[0], dst[0]))


# ---- reshape / repeat / tile -------------------------------------------------------------------

@given(shape=_shapes, data=st.data())
def test_reshape(shape, data):
    size = int(np.prod(shape))
    x = _arange(shape)
    target = data.draw(st.sampled_from([(size,), (1, size), (size, 1, 1), ()] if size == 1
                                       else [(size,), (1, size), (size, 1)]))
    _eq(xp.reshape(xp.asarray(x), target), x.reshape(target))
    if size and target:
        t = list(target)
        t[0] = -1  # one dimension may be -1
        _eq(xp.reshape(xp.asarray(x), tuple(t)), x.reshape(tuple(t)))
    for copy in (None, True, False):
        _eq(xp.reshape(xp.asarray(x), target, copy=copy), x.reshape(target))


def test_reshape_errors():
    with pytest.raises((ValueError, TypeError)):
        xp.reshape(xp.ones((2, 3)), (4,))
    with pytest.raises((ValueError, TypeError)):
        xp.reshape(xp.ones((2, 3)), (-1, -1))


def test_repeat():
    x = xp.asarray([[1, 2], [3, 4]])
    assert np.asarray(xp.repeat(x, 2)).tolist() == [1, 1, 2, 2, 3, 3, 4, 4]  # axis None
    assert np.asarray(xp.repeat(x, 2, axis=0)).tolist() == [[1, 2], [1, 2], [3, 4], [3, 4]]
    assert np.asarray(xp.repeat(x, 0, axis=1)).shape == (2, 0)
    r = xp.repeat(x, xp.asarray([1, 2]), axis=1)
    assert np.asarray(r).tolist() == [[1, 2, 2], [3, 4, 4]]
    r = xp.repeat(x, xp.asarray([3]), axis=-1)  # shape (1,) broadcasts
    assert r.shape == (2, 6)
    r = xp.repeat(xp.asarray([5, 6, 7]), xp.asarray([0, 1, 2]))
    assert np.asarray(r).tolist() == [6, 7, 7]
    assert xp.repeat(xp.asarray([1.5], dtype=xp.float64), 3).dtype == xp.float64


@given(shape=_shapes, reps=st.lists(st.integers(0, 3), max_size=4).map(tuple))
def test_tile(shape, reps):
    x = _arange(shape)
    r = xp.tile(xp.asarray(x), reps)
    assert r.ndim == max(len(shape), len(reps))
    _eq(r, np.tile(x, reps))


@pytest.mark.parametrize("dt", ALL_DTYPES, ids=dname)
def test_manipulations_keep_dtype(dt):
    x = xp.ones((2, 1, 3), dtype=dt)
    outs = [xp.broadcast_to(x, (2, 2, 3)), xp.concat([x, x]), xp.expand_dims(x, axis=0),
            xp.flip(x), xp.moveaxis(x, 0, -1), xp.permute_dims(x, (2, 1, 0)), xp.repeat(x, 2),
            xp.reshape(x, (6,)), xp.roll(x, 1), xp.squeeze(x, axis=1), xp.stack([x, x]),
            xp.tile(x, (2,)), *xp.unstack(x), *xp.broadcast_arrays(x, x)]
    assert all(o.dtype == dt for o in outs)
