"""NumPy's structural names in ``starling.numpy``: index helpers, nan-statistics, partition /
lexsort, resize / rollaxis / block, bit packing, predicates, vectorize and friends, the sized
forms of where / unique, and NumPy's keyword spellings.

Every op is compared with NumPy on hard inputs (empty and size-1 dims, NaN and all-NaN slices,
ties, negative / large k); differentiable ones are checked with check_grads; each op is also run
compiled (== eager) and under vmap (== a Python loop).
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import starling
import starling.numpy as snp
from starling import grad, vmap
from starling.test_util import check_grads

NAN = np.nan


def _eq(got, want, **kw):
    got = np.asarray(got)
    want = np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    if kw or got.dtype.kind in "fc":
        np.testing.assert_allclose(got, want, rtol=kw.get("rtol", 1e-6), atol=kw.get("atol", 0))
    else:
        np.testing.assert_array_equal(got, want)


def _transforms(f, batch):
    """compile(f) == f on batch[0]; vmap(f)(batch) == stack([f(b) for b in batch])."""
    batch = snp.asarray(batch)
    eager = f(batch[0])
    compiled = starling.compile(f)(batch[0])
    for e, c in zip(_leaves(eager), _leaves(compiled)):
        _eq(c, e)
    mapped = vmap(f)(batch)
    loop = [f(batch[i]) for i in range(batch.shape[0])]
    for j, m in enumerate(_leaves(mapped)):
        _eq(m, np.stack([np.asarray(_leaves(r)[j]) for r in loop]))


def _leaves(x):
    return list(x) if isinstance(x, (tuple, list)) else [x]


# ---- index helpers -------------------------------------------------------------------------------

@pytest.mark.parametrize("n,k,m", [(0, 0, None), (1, 0, None), (4, 0, None), (4, -2, 3),
                                   (3, 5, 2), (3, -7, 4), (5, 1, 0)])
def test_tri_indices(n, k, m):
    for ours, ref in ((snp.tril_indices, np.tril_indices), (snp.triu_indices, np.triu_indices)):
        got = ours(n, k, m)
        want = ref(n, k, m)
        assert len(got) == 2
        for g, w in zip(got, want):
            _eq(g, w)
            assert g.dtype == snp.int64
    a = np.zeros((n, n if m is None else m))
    for g, w in zip(snp.tril_indices_from(a, k), np.tril_indices_from(a, k)):
        _eq(g, w)
    for g, w in zip(snp.triu_indices_from(a, k), np.triu_indices_from(a, k)):
        _eq(g, w)


def test_diag_indices_and_errors():
    for g, w in zip(snp.diag_indices(3, 4), np.diag_indices(3, 4)):
        _eq(g, w)
    for g, w in zip(snp.diag_indices_from(np.zeros((2, 2, 2))), np.diag_indices(2, 3)):
        _eq(g, w)
    with pytest.raises(ValueError, match="equal length"):
        snp.diag_indices_from(np.zeros((2, 3)))
    with pytest.raises(ValueError, match="2-D"):
        snp.tril_indices_from(np.zeros(3))
    with pytest.raises(TypeError, match="tril_indices: n must be an int"):
        snp.tril_indices(2.5)


@pytest.mark.parametrize("shape,wrap", [((3, 3), False), ((5, 3), False), ((5, 3), True),
                                        ((2, 4), False), ((3, 3, 3), False), ((1, 1), False),
                                        ((0, 3), False)])
@pytest.mark.parametrize("val", [7.0, [1.0, 2.0]])
def test_fill_diagonal(shape, wrap, val):
    a = np.arange(float(np.prod(shape))).reshape(shape)
    want = a.copy()
    np.fill_diagonal(want, val, wrap=wrap)
    _eq(snp.fill_diagonal(a, val, wrap=wrap), want)


def test_fill_diagonal_grads_transforms_and_errors():
    a = snp.asarray(np.random.default_rng(0).normal(size=(4, 3)))
    v = snp.asarray([1.5, -2.0])
    check_grads(lambda a, v: snp.fill_diagonal(a, v, wrap=True), (a, v), order=1)
    _transforms(lambda a: snp.fill_diagonal(a, 0.0), np.ones((2, 3, 3)))
    with pytest.raises(ValueError, match="immutable"):
        snp.fill_diagonal(a, 1.0, inplace=True)
    with pytest.raises(ValueError, match="equal length"):
        snp.fill_diagonal(np.zeros((2, 3, 3)), 1.0)


def test_ix():
    x = np.arange(20).reshape(4, 5)
    idx = snp.ix_([0, 3], np.array([True, False, True, False, True]))
    want = np.ix_([0, 3], np.array([True, False, True, False, True]))
    for g, w in zip(idx, want):
        _eq(g, w)
    _eq(snp.asarray(x)[idx], x[want])
    assert snp.ix_([], [1])[0].shape == (0, 1)
    with pytest.raises(ValueError, match="1-D"):
        snp.ix_(np.zeros((2, 2), int))


@pytest.mark.parametrize("key", [np.s_[0:5], np.s_[2:-3:-1], np.s_[-1:1:5j], np.s_[0:1:0.25],
                                 np.s_[0:3, 0:2], np.s_[0:2, -1:1:3j], np.s_[0:0, 0:2]])
def test_mgrid_ogrid(key):
    _eq(snp.mgrid[key], np.mgrid[key])
    got, want = snp.ogrid[key], np.ogrid[key]
    for g, w in zip(_leaves(got), _leaves(want)):
        _eq(g, w)
    if isinstance(key, slice) and isinstance(key.step, complex):
        assert snp.mgrid[key].dtype == snp.float32  # Starling's default float


@pytest.mark.parametrize("key", [
    np.s_[1:3, 5, 0.5], np.s_[[1, 2], [3], 4], np.s_["0,2,0", [1, 2], [3, 4]],
    np.s_["1,2,0", [1, 2], [3, 4]], np.s_["0,3,1", [1, 2]], np.s_["0,3", [1, 2]],
    np.s_["-1", [[1, 2]], [[3]]], np.s_[-1:1:3j, [7.0]],
])
def test_r_(key):
    _eq(snp.r_[key], np.r_[key])


def test_c_s_index_exp():
    _eq(snp.c_[np.array([1, 2, 3]), np.array([4, 5, 6])], np.c_[[1, 2, 3], [4, 5, 6]])
    _eq(snp.c_[1, 2], np.c_[1, 2])
    _eq(snp.c_[np.zeros((2, 2)), np.ones(2)], np.c_[np.zeros((2, 2)), np.ones(2)])
    assert snp.s_[1:2, ::3] == np.s_[1:2, ::3]
    assert snp.index_exp[3] == (3,)
    with pytest.raises(ValueError, match="matrix"):
        snp.r_["r", [1, 2]]
    # traced items
    f = starling.compile(lambda x: snp.r_[x, 0.0, x])
    _eq(f(snp.asarray([1.0, 2.0])), [1.0, 2.0, 0.0, 1.0, 2.0])


# ---- nan-statistics ------------------------------------------------------------------------------

_NANDATA = np.array([[NAN, 1, 3, 3], [NAN, NAN, NAN, NAN], [-np.inf, NAN, -np.inf, 2],
                     [5, NAN, 0, -1], [2, 2, 2, 2]])


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_nanargmax_nanargmin(axis):
    x = _NANDATA if axis == 0 else np.delete(_NANDATA, 1, axis=0)
    _eq(snp.nanargmax(x, axis=axis), np.nanargmax(x, axis=axis))
    _eq(snp.nanargmin(x, axis=axis), np.nanargmin(x, axis=axis))
    _eq(snp.nanargmax(x, axis=axis, keepdims=True), np.nanargmax(x, axis=axis, keepdims=True))


def test_nanarg_all_nan_empty_int():
    # An all-NaN slice gives -1 (JAX's convention; NumPy raises).
    _eq(snp.nanargmax(_NANDATA, axis=1), [2, -1, 3, 0, 0])
    _eq(snp.nanargmin(_NANDATA, axis=1), [1, -1, 0, 3, 0])
    _eq(snp.nanargmax(np.array([4, 9, 9])), 1)
    _eq(snp.nanargmax(np.zeros((0, 3)), axis=1), np.zeros((0,), np.int64))
    with pytest.raises(ValueError, match="nanargmax: attempt"):
        snp.nanargmax(np.zeros((0, 3)), axis=0)
    _transforms(lambda x: snp.nanargmin(x, axis=0), np.stack([_NANDATA, _NANDATA[::-1]]))


@pytest.mark.parametrize("axis", [None, 0, 1])
def test_nancumsum_nancumprod(axis):
    for ours, ref in ((snp.nancumsum, np.nancumsum), (snp.nancumprod, np.nancumprod)):
        _eq(ours(_NANDATA, axis=axis), ref(_NANDATA, axis=axis))
    _eq(snp.nancumsum(np.arange(4), axis=axis if axis != 1 else 0), np.nancumsum(np.arange(4)))
    _eq(snp.nancumsum(np.zeros((0, 2)), axis=axis), np.nancumsum(np.zeros((0, 2)), axis=axis))


def test_nancum_grads():
    x = snp.asarray([1.5, NAN, -2.0, 0.5])
    g = grad(lambda x: snp.sum(snp.nancumprod(x)))(x)
    # d/dx_i sum_k prod_{j<=k, j not NaN} x_j, with the NaN entry's gradient 0
    xs = np.array([1.5, 1.0, -2.0, 0.5])
    want = [sum(np.prod(np.delete(xs[:k + 1], i)) for k in range(i, 4)) for i in range(4)]
    want[1] = 0.0
    _eq(g, want, rtol=1e-12)
    check_grads(lambda x: snp.nancumsum(x, axis=1), (snp.asarray(np.where(
        np.isnan(_NANDATA), NAN, np.arange(20.0).reshape(5, 4))),), order=1, modes=("rev",))


@pytest.mark.parametrize("method", ["linear", "lower", "higher", "nearest", "midpoint"])
@pytest.mark.parametrize("axis", [None, 0, 1, (0, 1)])
def test_nanquantile(method, axis):
    x = np.where(np.isinf(_NANDATA), 1.5, _NANDATA)
    q = [0.0, 0.1, 0.5, 0.9, 1.0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # NumPy warns about the all-NaN slice
        want = np.nanquantile(x, q, axis=axis, method=method)
    _eq(snp.nanquantile(x, q, axis=axis, method=method), want, rtol=1e-12)


def test_nanmedian_nanpercentile():
    x = np.where(np.isinf(_NANDATA), 1.5, _NANDATA)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        _eq(snp.nanmedian(x, axis=1), np.nanmedian(x, axis=1))
        _eq(snp.nanmedian(x, axis=1, keepdims=True), np.nanmedian(x, axis=1, keepdims=True))
        _eq(snp.nanpercentile(x, [25, 75], axis=1), np.nanpercentile(x, [25, 75], axis=1),
            rtol=1e-12)
    _eq(snp.nanmedian(np.arange(5)), 2.0)  # integers hold no NaN
    _eq(snp.nanmedian(np.zeros((0,))), NAN)
    _eq(snp.nanmedian(np.array([[1.0, NAN, 3.0]]), axis=0), [1.0, NAN, 3.0])
    with pytest.raises(ValueError, match="q must lie"):
        snp.nanpercentile(x, 101)


def test_nanquantile_grads_and_transforms():
    x = snp.asarray([[0.3, NAN, -1.2, 2.5], [1.0, 4.0, NAN, NAN]])
    check_grads(lambda x: snp.nanquantile(x, 0.3, axis=1), (x,), order=1, modes=("rev",))
    check_grads(lambda x: snp.nanmedian(x, axis=1), (x,), order=1, modes=("rev",))
    batch = np.stack([np.asarray(x), np.asarray(x)[:, ::-1]])
    _transforms(lambda x: snp.nanquantile(x, snp.asarray([0.25, 0.5]), axis=1), batch)


# ---- partition / lexsort -------------------------------------------------------------------------

def _check_partition(got_vals, x, kth, axis):
    srt = np.sort(x, axis=axis)
    got_vals = np.moveaxis(np.asarray(got_vals), axis, -1)
    srt = np.moveaxis(srt, axis, -1)
    for k in np.atleast_1d(kth):
        k = k % srt.shape[-1]
        np.testing.assert_array_equal(got_vals[..., k], srt[..., k])
        assert np.all(got_vals[..., :k] <= got_vals[..., k:k + 1])
        assert np.all(got_vals[..., k + 1:] >= got_vals[..., k:k + 1])


@pytest.mark.parametrize("kth", [0, 3, -1, -6, [1, 4]])
@pytest.mark.parametrize("axis", [0, -1])
def test_partition_argpartition(kth, axis):
    x = np.random.default_rng(2).integers(-2, 3, size=(6, 6)).astype(float)  # many ties
    x[1] = 0.0
    _check_partition(snp.partition(x, kth, axis=axis), x, kth, axis)
    idx = snp.argpartition(x, kth, axis=axis)
    _check_partition(np.take_along_axis(x, np.asarray(idx), axis), x, kth, axis)


def test_partition_nan_errors_grads():
    x = np.array([NAN, 1.0, -2.0, NAN, 0.5])
    _eq(snp.partition(x, 2), np.sort(x))
    _eq(snp.partition(x, 1, axis=None), np.sort(x))
    with pytest.raises(ValueError, match="kth 5 is out of bounds"):
        snp.partition(x, 5)
    with pytest.raises(ValueError, match="0-d"):
        snp.partition(np.float64(1.0), 0)
    check_grads(lambda x: snp.partition(x, 2), (snp.asarray([0.3, -1.0, 2.0, 0.7]),), order=2)
    _transforms(lambda x: snp.argpartition(x, 1), np.array([[3, 1, 1, 0], [2, 2, 2, 2]]))


@pytest.mark.parametrize("keys", [
    ([1, 2, 1, 2, 1], [0, 0, 1, 0, 0]),
    ([NAN, 1.0, 1.0, -0.0, 0.0], [1, 1, 1, 1, 1]),
    ([5, 4, 3, 2, 1],),
    ([0, 0, 0, 0, 0], [3, 3, 3, 3, 3], [1, 1, 0, 0, 1]),
])
def test_lexsort(keys):
    _eq(snp.lexsort([np.asarray(k) for k in keys]), np.lexsort([np.asarray(k) for k in keys]))


def test_lexsort_axis_array_and_transforms():
    rng = np.random.default_rng(1)
    keys = rng.integers(0, 3, size=(3, 4, 6))
    _eq(snp.lexsort(keys), np.lexsort(keys))
    _eq(snp.lexsort(keys, axis=0), np.lexsort(keys, axis=0))
    _eq(snp.lexsort([np.zeros(0), np.zeros(0)]), np.zeros(0, np.int64))
    with pytest.raises(ValueError, match="same shape"):
        snp.lexsort([np.zeros(2), np.zeros(3)])
    _transforms(lambda k: snp.lexsort(k), keys[None].repeat(2, 0))


# ---- resize / rollaxis / block -------------------------------------------------------------------

@pytest.mark.parametrize("src,shape", [((3,), (2, 4)), ((2, 3), 7), ((2, 3), (0, 3)),
                                       ((0,), (2, 2)), ((1,), (3,)), ((5,), (2,)), ((4,), ())])
def test_resize(src, shape):
    a = np.arange(1.0, 1.0 + np.prod(src)).reshape(src)
    _eq(snp.resize(a, shape), np.resize(a, shape))


def test_resize_grads_transforms_errors():
    check_grads(lambda a: snp.resize(a, (2, 5)), (snp.asarray([0.5, -1.0, 2.0]),), order=1)
    _transforms(lambda a: snp.resize(a, (5,)), np.arange(6.0).reshape(2, 3))
    with pytest.raises(ValueError, match="non-negative"):
        snp.resize(np.ones(3), (-1, 2))


@pytest.mark.parametrize("axis,start", [(0, 0), (2, 0), (0, 3), (1, -1), (-1, 1), (0, -3),
                                        (2, 3), (1, 2)])
def test_rollaxis(axis, start):
    a = np.zeros((2, 3, 4, 5))[..., 0]
    assert snp.rollaxis(a, axis, start).shape == np.rollaxis(a, axis, start).shape
    b = np.arange(24).reshape(2, 3, 4)
    _eq(snp.rollaxis(b, axis, start), np.rollaxis(b, axis, start))


def test_rollaxis_errors():
    with pytest.raises(ValueError, match="start 3 is out of bounds"):
        snp.rollaxis(np.zeros((2, 3)), 0, 3)
    with pytest.raises(ValueError, match="start -3 is out of bounds"):
        snp.rollaxis(np.zeros((2, 3)), 0, -3)
    with pytest.raises(IndexError, match="axis 2"):
        snp.rollaxis(np.zeros((2, 3)), 2)


@pytest.mark.parametrize("arrays", [
    "flat", "matrix", "mixed_ndim", "scalars", "deep",
])
def test_block(arrays):
    A, B = np.eye(2), 2 * np.ones((2, 1))
    C, D = 3 * np.ones((1, 2)), np.array([[4.0]])
    blocks = {
        "flat": [np.arange(2.0), np.arange(3.0)],
        "matrix": [[A, B], [C, D]],
        "mixed_ndim": [[np.ones(2), 7.0], [np.zeros((2, 3))]],
        "scalars": [1, 2, 3],
        "deep": [[[np.ones((1, 1, 2))], [np.zeros((1, 1, 2))]]],
    }[arrays]
    _eq(snp.block(blocks), np.block(blocks))


def test_block_errors_grads():
    with pytest.raises(ValueError, match="depths are mismatched"):
        snp.block([[1.0], 2.0])
    with pytest.raises(ValueError, match="empty list"):
        snp.block([[], [1.0]])
    with pytest.raises(TypeError, match="tuple"):
        snp.block((np.ones(2), np.ones(2)))
    check_grads(lambda a, b: snp.block([[a, b], [b, a]]),
                (snp.asarray([[1.0, 2.0]]), snp.asarray([[0.5, -3.0]])), order=1)


# ---- bits ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("axis", [None, 0, 1, -1])
@pytest.mark.parametrize("order", ["big", "little"])
def test_packbits_unpackbits(axis, order):
    rng = np.random.default_rng(3)
    for shape in ((3, 11), (2, 8), (1, 1), (0, 5)):
        a = rng.integers(0, 3, size=shape)  # nonzero 2 counts as a 1 bit
        packed = np.packbits(a, axis=axis, bitorder=order)
        _eq(snp.packbits(a, axis=axis, bitorder=order), packed)
        _eq(snp.unpackbits(packed, axis=axis, bitorder=order),
            np.unpackbits(packed, axis=axis, bitorder=order))
        for count in (0, 3, -2, 9 * max(1, packed.shape[-1] if axis else packed.size)):
            try:
                want = np.unpackbits(packed, axis=axis, count=count, bitorder=order)
            except ValueError:  # NumPy rejects dropping more bits than there are; so do we
                with pytest.raises(ValueError, match="removes more"):
                    snp.unpackbits(packed, axis=axis, count=count, bitorder=order)
                continue
            if packed.size == 0:  # NumPy pads an empty input with uninitialised bytes
                want = np.zeros_like(want)
            _eq(snp.unpackbits(packed, axis=axis, count=count, bitorder=order), want)


def test_bits_errors_and_transforms():
    with pytest.raises(TypeError, match="uint8"):
        snp.unpackbits(np.ones(3, np.int32))
    with pytest.raises(TypeError, match="bool or integer"):
        snp.packbits(np.ones(3))
    with pytest.raises(ValueError, match="bitorder"):
        snp.packbits(np.ones(3, bool), bitorder="middle")
    with pytest.raises(ValueError, match="removes more"):
        snp.unpackbits(np.ones(1, np.uint8), count=-9)
    bools = np.random.default_rng(4).integers(0, 2, size=(3, 2, 13)).astype(bool)
    _transforms(lambda a: snp.packbits(a, axis=-1), bools)
    _transforms(lambda a: snp.unpackbits(a, axis=0, count=5), np.packbits(bools, axis=1))


@pytest.mark.parametrize("dt", [np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32,
                                np.int64, np.uint64, np.bool_])
def test_bitwise_count(dt):
    if dt == np.bool_:
        x = np.array([True, False])
    else:
        info = np.iinfo(dt)
        vals = [0, 1, 2, 3, 7, info.max, info.min, info.max // 3, info.min + 1]
        vals += list(np.random.default_rng(5).integers(info.min, info.max, size=20,
                                                       endpoint=True, dtype=dt))
        x = np.array(vals, dtype=dt)
    got = snp.bitwise_count(x)
    assert got.dtype == snp.uint8
    _eq(got, np.bitwise_count(x))
    _eq(starling.compile(snp.bitwise_count)(x), np.bitwise_count(x))
    with pytest.raises(TypeError, match="bitwise_count"):
        snp.bitwise_count(np.ones(2))


# ---- predicates ----------------------------------------------------------------------------------

def test_predicates():
    z = np.array([1 + 0j, 2 + 1j, -0j, NAN * 1j])
    _eq(snp.iscomplex(z), np.iscomplex(z))
    _eq(snp.isreal(z), np.isreal(z))
    _eq(snp.iscomplex(np.ones((2, 0))), np.iscomplex(np.ones((2, 0))))
    _eq(snp.isreal([1, 2]), [True, True])
    for v in (1j, [1.0, 2.0], np.ones(2, np.complex64), snp.ones(3), 3):
        assert snp.iscomplexobj(v) == np.iscomplexobj(np.asarray(v))
        assert snp.isrealobj(v) == np.isrealobj(np.asarray(v))
    for v in (1, 2.5, True, 1j, np.float32(1), np.int8(3)):
        assert snp.isscalar(v)
    assert snp.isscalar(snp.asarray(1.0))  # JAX's convention: 0-d arrays are scalars
    for v in ("a", [1], np.ones(1), snp.ones(1), None):
        assert not snp.isscalar(v)
    assert snp.shape([[1, 2, 3]]) == (1, 3) and snp.shape(5) == ()
    assert snp.ndim(np.zeros((2, 3))) == 2 and snp.ndim(snp.ones(())) == 0
    assert snp.size(np.zeros((2, 3))) == 6 and snp.size(snp.ones((2, 3)), axis=-1) == 3
    seen = []
    starling.compile(lambda x: seen.append((snp.shape(x), snp.ndim(x), snp.size(x),
                                            snp.iscomplexobj(x))) or x)(snp.ones((2, 2)))
    assert seen == [((2, 2), 2, 4, False)]


# ---- vectorize / apply_along_axis / apply_over_axes / piecewise ---------------------------------

def test_vectorize_elementwise_and_signature():
    f = snp.vectorize(lambda a, b: a * b + 1.0)
    a, b = np.arange(3.0)[:, None], np.arange(4.0)
    _eq(f(a, b), np.vectorize(lambda a, b: a * b + 1.0)(a, b))
    dot = snp.vectorize(lambda u, v: snp.sum(u * v), signature="(n),(n)->()")
    x, y = np.arange(24.0).reshape(2, 3, 4), np.arange(4.0)
    _eq(dot(x, y), np.einsum("ijk,k->ij", x, y))
    outer = snp.vectorize(lambda u: (snp.outer(u, u), snp.sum(u)), signature="(n)->(n,n),()")
    o, s = outer(np.arange(6.0).reshape(2, 3))
    assert o.shape == (2, 3, 3) and s.shape == (2,)
    _eq(s, [3.0, 12.0])
    # excluded positional and keyword arguments pass through unchanged
    g = snp.vectorize(lambda x, p, *, scale: scale * x ** p, excluded={1, "scale"})
    _eq(g(np.arange(3.0), 2, scale=0.5), 0.5 * np.arange(3.0) ** 2)
    # a vectorised keyword argument
    h = snp.vectorize(lambda x, *, y: x - y)
    _eq(h(np.arange(3.0), y=np.ones((2, 1))), np.arange(3.0) - np.ones((2, 1)))


def test_vectorize_grads_compile_errors():
    f = snp.vectorize(lambda u, v: snp.sum(u * snp.sin(v)), signature="(n),(n)->()")
    u = snp.asarray(np.linspace(-1, 1, 6).reshape(2, 3))
    v = snp.asarray([0.3, -0.7, 1.1])
    check_grads(f, (u, v), order=1)
    _eq(starling.compile(f)(u, v), f(u, v))
    with pytest.raises(ValueError, match="not a valid gufunc signature"):
        snp.vectorize(lambda x: x, signature="(n)->n")
    with pytest.raises(ValueError, match="inconsistent sizes"):
        f(np.ones((2, 3)), np.ones(4))
    with pytest.raises(ValueError, match="do not broadcast"):
        snp.vectorize(lambda a, b: a + b)(np.ones(2), np.ones(3))
    with pytest.raises(ValueError, match="dims per element"):
        snp.vectorize(lambda a: snp.stack([a, a]))(np.ones(3))
    with pytest.raises(TypeError, match="signature"):
        f(np.ones(3))


@pytest.mark.parametrize("axis", [0, 1, 2, -1])
def test_apply_along_axis(axis):
    x = np.random.default_rng(6).normal(size=(2, 3, 4))
    _eq(snp.apply_along_axis(lambda v: snp.sum(v ** 2), axis, x),
        np.apply_along_axis(lambda v: np.sum(v ** 2), axis, x), rtol=1e-12)
    _eq(snp.apply_along_axis(lambda v, c: snp.stack([v[0] * c, snp.max(v)]), axis, x, 3.0),
        np.apply_along_axis(lambda v, c: np.stack([v[0] * c, np.max(v)]), axis, x, 3.0))
    _eq(snp.apply_along_axis(lambda v: snp.outer(v, v), axis, x),
        np.apply_along_axis(lambda v: np.outer(v, v), axis, x), rtol=1e-12)


def test_apply_along_axis_grads_and_over_axes():
    x = snp.asarray(np.random.default_rng(7).normal(size=(3, 4)))
    check_grads(lambda x: snp.apply_along_axis(lambda v: snp.sort(v)[::2], 1, x), (x,), order=1)
    a = np.arange(24.0).reshape(2, 3, 4)
    _eq(snp.apply_over_axes(snp.sum, a, [0, 2]), np.apply_over_axes(np.sum, a, [0, 2]))
    _eq(snp.apply_over_axes(lambda x, ax: snp.cumsum(x, axis=ax), a, (1, -1)),
        np.apply_over_axes(lambda x, ax: np.cumsum(x, axis=ax), a, (1, -1)))
    with pytest.raises(ValueError, match="ndim"):
        snp.apply_over_axes(lambda x, ax: snp.sum(x), a, [0])


@pytest.mark.parametrize("case", range(5))
def test_piecewise(case):
    x = np.linspace(-2.5, 2.5, 11)
    condlist, funclist = [
        ([x < 0, x >= 0], [lambda t: -t, lambda t: t ** 2]),
        ([x < 0], [1.0, 7.0]),                                  # default piece
        ([x < 1, x > -1], [lambda t: 2 * t, lambda t: t - 5]),  # overlap: the later one wins
        ([x > 10], [3.0]),                                      # nothing chosen: zeros
        (x > 0, [lambda t: t + 1]),                             # one bare condition
    ][case]
    _eq(snp.piecewise(x, condlist, funclist), np.piecewise(x, condlist, funclist))


def test_piecewise_int_grads_errors():
    xi = np.arange(-3, 4)
    _eq(snp.piecewise(xi, [xi < 0], [lambda t: t * 2, 9]), np.piecewise(xi, [xi < 0],
                                                                     [lambda t: t * 2, 9]))
    f = lambda x: snp.piecewise(x, [x < 0], [lambda t: snp.sin(t), lambda t: t ** 3])  # noqa
    check_grads(f, (snp.asarray([-1.2, -0.3, 0.4, 2.0]),), order=2)
    _transforms(f, np.array([[-1.0, 2.0], [0.5, -0.5]]))
    with pytest.raises(ValueError, match="funclist"):
        snp.piecewise(np.ones(2), [np.ones(2, bool)], [1, 2, 3])


# ---- where(size=) / unique(size=) ----------------------------------------------------------------

def test_where_one_argument_sized():
    c = np.array([[0, 1, 0], [1, 1, 0]])
    for size, fill in ((None, None), (2, None), (5, -1), (0, None)):
        got = snp.where(c, size=size, fill_value=fill)
        want = np.nonzero(c)
        if size is not None:
            want = tuple(np.concatenate([w, np.full(5, -1 if fill is None else fill)])[:size]
                         if fill is not None else np.concatenate([w, np.zeros(5, int)])[:size]
                         for w in want)
        for g, w in zip(got, want):
            _eq(g, w)
    f = starling.compile(lambda c: snp.where(c, size=4, fill_value=9))
    for g, w in zip(f(c), ([0, 1, 1, 9], [1, 0, 1, 9])):
        _eq(g, w)
    with pytest.raises(ValueError, match="one-argument form"):
        snp.where(c > 0, 1.0, 0.0, size=3)


@pytest.mark.parametrize("x", [
    [3.0, NAN, 1.0, 1.0, NAN, 7.0], [2, 2, 2], [5], [-0.0, 0.0, 1.0], [4, 1, 3, 1, 4, 1, 5, 9],
])
@pytest.mark.parametrize("size", [1, 3, 8])
def test_unique_sized(x, size):
    x = np.asarray(x)
    vals, idx, inv, cnt = snp.unique(x, return_index=True, return_inverse=True,
                                     return_counts=True, size=size, fill_value=-5)
    rv, ri, rinv, rc = np.unique(x, return_index=True, return_inverse=True, return_counts=True)
    k = min(size, rv.size)
    pad = size - k
    _eq(vals, np.concatenate([rv[:k], np.full(pad, -5, x.dtype)]))
    _eq(idx, np.concatenate([ri[:k], np.zeros(pad, int)]))
    _eq(cnt, np.concatenate([rc[:k], np.zeros(pad, int)]))
    _eq(inv, rinv.reshape(x.shape))
    # default fill: the smallest value
    _eq(snp.unique(x, size=size)[-1], rv[k - 1] if pad == 0 else rv[0])


def test_unique_sized_transforms_grads_errors():
    x = snp.asarray([[3.0, 1.0, 3.0], [2.0, 2.0, 2.0]])
    _transforms(lambda r: snp.unique(r, size=3, return_counts=True), x)
    g = grad(lambda x: snp.sum(snp.unique(x, size=2) * snp.asarray([1.0, 10.0])))(
        snp.asarray([5.0, 2.0, 2.0, 9.0]))
    _eq(g, [10.0, 1.0, 0.0, 0.0])  # the first occurrence carries the gradient
    _eq(snp.unique(np.zeros((0,)), size=2, fill_value=1.0), [1.0, 1.0])
    _eq(snp.unique(np.array([NAN, NAN]), size=3, equal_nan=False, fill_value=0.0),
        [NAN, NAN, 0.0])
    with pytest.raises(ValueError, match="axis=None"):
        snp.unique(x, size=2, axis=0)
    with pytest.raises(starling.ConcretizationError if hasattr(starling, "ConcretizationError")
                       else TypeError):
        starling.compile(lambda r: snp.unique(r))(x)


# ---- NumPy keyword spellings ---------------------------------------------------------------------

def test_numpy_keyword_spellings():
    x = np.arange(24).reshape(2, 3, 4)
    _eq(snp.swapaxes(x, axis1=0, axis2=2), np.swapaxes(x, axis1=0, axis2=2))
    _eq(snp.moveaxis(x, source=0, destination=-1), np.moveaxis(x, source=0, destination=-1))
    _eq(snp.tile(x, reps=(2, 1)), np.tile(x, reps=(2, 1)))
    _eq(snp.repeat(x, repeats=2, axis=1), np.repeat(x, repeats=2, axis=1))
    _eq(snp.asarray([1, 2], snp.float16), np.asarray([1, 2], np.float16))
    assert snp.asarray([1, 2], "float64", "C").dtype == snp.float64
    assert snp.asarray(x).swapaxes(axis1=0, axis2=1).shape == (3, 2, 4)
    with pytest.raises(ValueError, match="order"):
        snp.asarray([1], None, "Q")


# ---- every array-taking op: compiled == eager, vmap == loop ---------------------------------------

_RNG = np.random.default_rng(8)
_F = _RNG.normal(size=(2, 3, 4))
_F[0, 1, 2] = NAN
_TRANSFORM_CASES = {
    "tril_indices_from": (lambda a: snp.tril_indices_from(a, 1)[1] + snp.sum(a > 0), _F),
    "ix_": (lambda i: snp.ix_(i[:2], i[1:])[1], np.array([[0, 2, 1], [1, 1, 0]])),
    "nanargmax": (lambda a: snp.nanargmax(a, axis=-1), _F),
    "nancumsum": (lambda a: snp.nancumsum(a, axis=0), _F),
    "nanmedian": (lambda a: snp.nanmedian(a, axis=1), _F),
    "nanpercentile": (lambda a: snp.nanpercentile(a, 40.0), _F),
    "partition": (lambda a: snp.partition(a, -1, axis=0), _F),
    "resize": (lambda a: snp.resize(a, (2, 7)), _F),
    "rollaxis": (lambda a: snp.rollaxis(a, 1), _F),
    "block": (lambda a: snp.block([[a, a[:, :1]], [a[:1], a[:1, :1]]]), _F),
    "packbits": (lambda a: snp.packbits(a > 0, axis=0), _F),
    "unpackbits": (lambda a: snp.unpackbits(a), np.array([[1, 255], [128, 7]], np.uint8)),
    "bitwise_count": (snp.bitwise_count, np.array([[-1, 7], [1 << 40, 0]])),
    "iscomplex": (lambda a: snp.iscomplex(a + 1j * (a > 0)), _F),
    "vectorize": (lambda a: snp.vectorize(lambda u, v: snp.dot(u, v), signature="(n),(n)->()")(
        a[0], a[1]), _RNG.normal(size=(2, 2, 3, 3))),
    "apply_along_axis": (lambda a: snp.apply_along_axis(snp.cumsum, 0, a), _F),
    "apply_over_axes": (lambda a: snp.apply_over_axes(snp.nansum, a, (0, 1)), _F),
    "piecewise": (lambda a: snp.piecewise(a, [a < 0], [snp.exp, lambda t: t]), _F),
    "where_sized": (lambda a: snp.where(a > 0, size=5, fill_value=-1)[1], _F),
    "unique_sized": (lambda a: snp.unique(snp.round(a), size=4, return_inverse=True), _F),
    "fill_diagonal": (lambda a: snp.fill_diagonal(a[:, :3], snp.sum(a)), _F),
    "lexsort": (lambda a: snp.lexsort([a[0], a[1] > 0]), _F),
    "r_": (lambda a: snp.r_[a[0], 0.5, a[1]], _F),
    "c_": (lambda a: snp.c_[a[0], a[1]], _F),
}


@pytest.mark.parametrize("name", sorted(_TRANSFORM_CASES))
def test_compiled_and_vmapped(name):
    f, batch = _TRANSFORM_CASES[name]
    _transforms(f, batch)
