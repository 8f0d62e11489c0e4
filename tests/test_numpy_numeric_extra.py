"""The numeric starling.numpy extras (differences, interp, histograms, set operations,
convolution, covariance, polynomials, windows) against NumPy on hard inputs, plus their
derivatives (finite differences), vmap (against a Python loop) and compile (against eager)."""
from __future__ import annotations

import math

import numpy as np
import pytest

import starling
import starling.numpy as snp
from starling import tree
from starling.core.trace import ConcretizationError
from starling.test_util import check_grads

nan, inf = np.nan, np.inf
RNG = np.random.default_rng(1234)


def _outputs(w):
    """Tuples (and lists of arrays) hold several outputs; a list of numbers is one array."""
    if isinstance(w, tuple) or (isinstance(w, list) and w and all(
            isinstance(v, (np.ndarray, list, tuple)) for v in w)):
        return [leaf for v in w for leaf in _outputs(v)]
    return [w]


def close(got, want, rtol=1e-6, atol=1e-7, dtype=None):
    got_l = tree.leaves(got) if isinstance(got, (tuple, list)) else [got]
    want_l = _outputs(want)
    assert len(got_l) == len(want_l)
    for g, w in zip(got_l, want_l):
        g, w = np.asarray(g), np.asarray(w)
        assert g.shape == w.shape, (g.shape, w.shape)
        if dtype is not None:
            assert g.dtype == np.dtype(dtype), (g.dtype, dtype)
        if g.dtype.kind in "biu" and w.dtype.kind in "biu":
            np.testing.assert_array_equal(g, w)
        else:
            np.testing.assert_allclose(g.astype(np.complex128), w.astype(np.complex128),
                                       rtol=rtol, atol=atol, equal_nan=True)


def compiled_matches_eager(f, *args):
    arrays = [snp.asarray(a) for a in args]
    eager, comp = f(*arrays), starling.compile(f)(*arrays)
    for e, c in zip(tree.leaves(eager), tree.leaves(comp)):
        assert np.asarray(c).dtype == np.asarray(e).dtype
        np.testing.assert_allclose(np.asarray(c), np.asarray(e), rtol=1e-6, atol=1e-7,
                                   equal_nan=True)


def vmap_matches_loop(f, *examples):
    """``examples``: one list of per-example arrays per argument."""
    got = starling.vmap(f)(*[snp.asarray(np.stack(ex)) for ex in examples])
    for k in range(len(examples[0])):
        want = f(*[snp.asarray(ex[k]) for ex in examples])
        for g, w in zip(tree.leaves(got), tree.leaves(want)):
            g, w = np.asarray(g)[k], np.asarray(w)
            assert g.dtype == w.dtype
            np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-7, equal_nan=True)


# ---- differences ---------------------------------------------------------------------------------

@pytest.mark.parametrize("shape,n,axis,pre,app", [
    ((6,), 1, -1, None, None), ((6,), 3, 0, None, None), ((3, 4), 2, 0, None, None),
    ((3, 4), 1, 1, 0.5, [[1.0], [2.0], [3.0]]), ((1,), 1, 0, None, None), ((0,), 1, 0, None, None),
    ((2, 3), 5, 1, None, None), ((4,), 0, 0, None, None), ((3,), 1, 0, np.array([nan]), inf)])
def test_diff(shape, n, axis, pre, app):
    a = RNG.normal(size=shape)
    kw = {k: v for k, v in (("prepend", pre), ("append", app)) if v is not None}
    close(snp.diff(a, n=n, axis=axis, **kw), np.diff(a, n=n, axis=axis, **kw))


def test_diff_dtypes():
    b = np.array([True, False, False, True])
    close(snp.diff(b), np.diff(b), dtype=np.bool_)
    i = np.array([3, -2, 7, 7], np.int32)
    close(snp.diff(i, n=2), np.diff(i, n=2), dtype=np.int32)
    assert snp.diff(np.array([1, 2], np.uint8)).dtype == np.uint8
    close(snp.diff(np.array([1, 2, 4], np.int32), prepend=1), [0, 1, 2], dtype=np.int32)
    with pytest.raises(ValueError, match="diff: order n must be non-negative"):
        snp.diff(i, n=-1)
    with pytest.raises(ValueError, match="diff: the input must be at least 1-D"):
        snp.diff(np.float32(1))


def test_ediff1d():
    a = np.array([[1, 4], [9, 16]])
    close(snp.ediff1d(a), np.ediff1d(a))
    close(snp.ediff1d(a, to_end=[7, 8], to_begin=-1), np.ediff1d(a, to_end=[7, 8], to_begin=-1))
    close(snp.ediff1d(np.array([5.0])), np.ediff1d(np.array([5.0])))
    with pytest.raises(TypeError, match="ediff1d: to_end of dtype float"):
        snp.ediff1d(a, to_end=np.array([0.5]))


@pytest.mark.parametrize("edge_order", [1, 2])
def test_gradient(edge_order):
    f = RNG.normal(size=(4, 5))
    xs = np.array([0.0, 0.3, 1.0, 1.1, 3.0])
    close(snp.gradient(f, edge_order=edge_order), np.gradient(f, edge_order=edge_order))
    close(snp.gradient(f, 0.5, xs, edge_order=edge_order),
          np.gradient(f, 0.5, xs, edge_order=edge_order))
    close(snp.gradient(f, xs, axis=1, edge_order=edge_order),
          np.gradient(f, xs, axis=1, edge_order=edge_order))
    close(snp.gradient(f, 2.0, axis=(-1, 0), edge_order=edge_order),
          np.gradient(f, 2.0, axis=(-1, 0), edge_order=edge_order))
    c = f + 1j * RNG.normal(size=f.shape)
    close(snp.gradient(c, axis=0, edge_order=edge_order),
          np.gradient(c, axis=0, edge_order=edge_order))
    i = np.array([1, 4, 9, 16, 25])
    close(snp.gradient(i, edge_order=edge_order), np.gradient(i, edge_order=edge_order),
          dtype=np.float32, rtol=1e-6)
    small = np.array([1.0, 3.0, 2.0])[: edge_order + 1]
    close(snp.gradient(small, edge_order=edge_order), np.gradient(small, edge_order=edge_order))


def test_gradient_errors():
    with pytest.raises(ValueError, match="gradient: axis 0 has 2 elements; at least"):
        snp.gradient(np.ones(2), edge_order=2)
    with pytest.raises(ValueError, match="gradient: edge_order must be 1 or 2"):
        snp.gradient(np.ones(4), edge_order=3)
    with pytest.raises(ValueError, match="must match the length 4 of axis 0"):
        snp.gradient(np.ones(4), np.arange(3.0))
    with pytest.raises(TypeError, match="gradient: expected 0, 1 or 2 spacing arguments"):
        snp.gradient(np.ones((3, 3)), 1.0, 2.0, 3.0)


def test_trapezoid():
    y = RNG.normal(size=(3, 5))
    x = np.sort(RNG.normal(size=5))
    close(snp.trapezoid(y), np.trapezoid(y))
    close(snp.trapezoid(y, x), np.trapezoid(y, x))
    close(snp.trapezoid(y, dx=0.25, axis=0), np.trapezoid(y, dx=0.25, axis=0))
    xf = np.sort(RNG.normal(size=(3, 5)), axis=1)
    close(snp.trapezoid(y, xf), np.trapezoid(y, xf))
    close(snp.trapezoid(np.array([1, 2, 4])), 4.5, dtype=np.float32)
    close(snp.trapezoid(np.ones((2, 1))), np.zeros(2))
    close(snp.trapezoid(np.zeros((0,))), 0.0)
    with pytest.raises(ValueError, match="trapezoid: x must be 1-D of length 5"):
        snp.trapezoid(y, np.ones(4))


def test_unwrap():
    p = np.cumsum(RNG.uniform(-5, 5, size=(3, 12)), axis=1)
    close(snp.unwrap(p), np.unwrap(p), rtol=1e-12)
    close(snp.unwrap(p, axis=0, discont=4.0), np.unwrap(p, axis=0, discont=4.0), rtol=1e-12)
    close(snp.unwrap(p, period=3.0), np.unwrap(p, period=3.0), rtol=1e-12)
    # exact half-period jumps: positive ones go up, negative ones down (NumPy's tie rule)
    edge = np.array([0.0, math.pi, 0.0, -math.pi, 2 * math.pi])
    close(snp.unwrap(edge), np.unwrap(edge))
    close(snp.unwrap(np.array([2.0])), [2.0])
    assert snp.unwrap(np.array([0, 4, 8])).dtype == np.float32


# ---- interp --------------------------------------------------------------------------------------

def test_interp_hard():
    xp = np.array([0.0, 1, 1, 2, 3.5])
    fp = np.array([1.0, -2, 3, inf, inf])
    x = np.array([-1, 0, 0.5, 1, 1.5, 2, 2.5, 3.5, 4, nan, inf, -inf])
    close(snp.interp(x, xp, fp), np.interp(x, xp, fp))
    close(snp.interp(x, xp, fp, left=-7, right=9.5), np.interp(x, xp, fp, left=-7, right=9.5))
    fc = fp + 1j * np.arange(5)
    close(snp.interp(x, xp, fc), np.interp(x, xp, fc))
    close(snp.interp(x, [1.0], [5.0]), np.interp(x, [1.0], [5.0]))
    xs = np.array([-180, -170, -185, 185, -10, -5, 0, 365])
    xpp, fpp = np.array([190, -190, 350, -350]), np.array([5, 10, 3, 4])
    close(snp.interp(xs, xpp, fpp, period=360), np.interp(xs, xpp, fpp, period=360))
    got = snp.interp(np.arange(4), np.arange(4), np.arange(4) ** 2)
    close(got, np.interp(np.arange(4), np.arange(4), np.arange(4) ** 2), dtype=np.float32)
    x2 = RNG.uniform(-1, 4, size=(2, 3))
    close(snp.interp(x2, xp, fp[:3].tolist() + [0.0, 1.0]), np.interp(x2, xp, fp[:3].tolist()
                                                                      + [0.0, 1.0]))


def test_interp_errors():
    with pytest.raises(ValueError, match="interp: xp and fp must be 1-D of the same length"):
        snp.interp(1.0, [1.0, 2.0], [1.0])
    with pytest.raises(ValueError, match="interp: xp and fp must not be empty"):
        snp.interp(1.0, np.zeros(0), np.zeros(0))
    with pytest.raises(ValueError, match="interp: period must be a non-zero value"):
        snp.interp(1.0, [1.0, 2.0], [1.0, 2.0], period=0)
    with pytest.raises(TypeError, match="interp: x must be real"):
        snp.interp(np.array([1j]), [1.0, 2.0], [1.0, 2.0])


# ---- bincount, digitize, histograms --------------------------------------------------------------

def test_bincount():
    x = np.array([0, 3, 3, 1, 7, 0])
    w = np.array([0.5, 1, 2, 3, 4, 5])
    close(snp.bincount(x), np.bincount(x), dtype=np.int64)
    close(snp.bincount(x, w, minlength=10), np.bincount(x, w, minlength=10))
    close(snp.bincount(np.zeros(0, np.int32)), np.bincount(np.zeros(0, np.int32)))
    close(snp.bincount(np.array([True, True, False])), [1, 2])
    close(snp.bincount(x, length=4), [2, 1, 0, 2])  # values >= length are dropped
    f = starling.compile(lambda v: snp.bincount(v, length=5))
    close(f(np.array([-1, 0, 4, 4])), [1, 0, 0, 0, 2])  # traced negative values are dropped
    with pytest.raises(ValueError, match="bincount: x must be non-negative"):
        snp.bincount(np.array([1, -1]))
    with pytest.raises(TypeError, match="bincount: x must hold non-negative integers"):
        snp.bincount(np.array([1.0]))
    with pytest.raises(ConcretizationError, match="bincount: .*length="):
        starling.compile(snp.bincount)(np.array([1, 2]))


@pytest.mark.parametrize("right", [False, True])
def test_digitize(right):
    bins = np.array([0.0, 1, 1, 2.5, 4])
    x = np.array([-1, 0, 0.5, 1, 2, 2.5, 4, 5, nan, -inf])
    close(snp.digitize(x, bins, right), np.digitize(x, bins, right), dtype=np.int64)
    close(snp.digitize(x, bins[::-1], right), np.digitize(x, bins[::-1], right))
    close(snp.digitize(x, bins[:1], right), np.digitize(x, bins[:1], right))
    close(snp.digitize(x, np.zeros(0), right), np.digitize(x, np.zeros(0), right))
    xi = np.array([[3, 1], [0, 9]])
    close(snp.digitize(xi, [1, 3, 5], right), np.digitize(xi, [1, 3, 5], right))
    f = starling.compile(lambda v, b: snp.digitize(v, b, right))
    close(f(x, bins[::-1]), np.digitize(x, bins[::-1], right))
    with pytest.raises(ValueError, match="digitize: bins must be monotonically"):
        snp.digitize(x, [1.0, 0.0, 2.0])


HIST_CASES = [
    dict(bins=5), dict(bins=[-1, 0, 0.5, 2]), dict(bins=3, range=(-1, 1)),
    dict(bins=4, density=True), dict(bins=[-2, -1, 1.5], density=True),
    dict(bins=1), dict(bins=6, range=(0.0, 0.0)),
]


@pytest.mark.parametrize("kw", HIST_CASES, ids=[str(k) for k in HIST_CASES])
@pytest.mark.parametrize("weighted", [False, True])
def test_histogram(kw, weighted):
    a = RNG.normal(size=40)
    a[:3] = [a.max(), a.min(), 0.5]  # values on the outer / inner edges
    w = RNG.uniform(size=40) if weighted else None
    got, want = snp.histogram(a, weights=w, **kw), np.histogram(a, weights=w, **kw)
    close(got, want, rtol=1e-12)
    if not weighted and not kw.get("density"):
        assert np.asarray(got[0]).dtype == np.int64


def test_histogram_hard_data():
    a = np.array([1.0, nan, 2.0, inf, 5.0])
    close(snp.histogram(a, 4, range=(0, 4)), np.histogram(a, 4, range=(0, 4)))  # NaN / inf dropped
    close(snp.histogram(np.zeros(0), 3), np.histogram(np.zeros(0), 3))
    close(snp.histogram(np.full(5, 2.0), 2), np.histogram(np.full(5, 2.0), 2))
    ai = np.array([0, 1, 1, 3, 10])
    close(snp.histogram(ai, 5), np.histogram(ai, 5))
    last = np.array([0.0, 1.0, 1.0])  # the last edge is inside the last bin
    close(snp.histogram(last, [0, 0.5, 1]), np.histogram(last, [0, 0.5, 1]))


@pytest.mark.parametrize("method", ["auto", "fd", "doane", "scott", "stone", "rice", "sturges",
                                    "sqrt"])
def test_histogram_bin_edges_estimators(method):
    a = RNG.normal(size=300)
    close(snp.histogram_bin_edges(a, method), np.histogram_bin_edges(a, method), rtol=1e-12)
    close(snp.histogram_bin_edges(a, method, range=(-1, 3)),
          np.histogram_bin_edges(a, method, range=(-1, 3)), rtol=1e-12)
    ai = RNG.integers(0, 6, size=50)
    close(snp.histogram_bin_edges(ai, method), np.histogram_bin_edges(ai, method), rtol=1e-6)
    close(snp.histogram_bin_edges(np.full(4, 3.0), method),
          np.histogram_bin_edges(np.full(4, 3.0), method))
    close(snp.histogram(a, method), np.histogram(a, method), rtol=1e-12)


def test_histogram_errors():
    with pytest.raises(ValueError, match="histogram: the range .* found in the data is not"):
        snp.histogram(np.array([1.0, nan]))
    with pytest.raises(ValueError, match="histogram: bins must be positive"):
        snp.histogram(np.ones(3), 0)
    with pytest.raises(ValueError, match="histogram: bins must increase monotonically"):
        snp.histogram(np.ones(3), [0, 2, 1])
    with pytest.raises(ValueError, match="histogram: max must be larger than min"):
        snp.histogram(np.ones(3), 2, range=(1, 0))
    with pytest.raises(ValueError, match="'bogus' is not a bin estimator"):
        snp.histogram_bin_edges(np.ones(3), "bogus")
    with pytest.raises(TypeError, match="not supported for weighted data"):
        snp.histogram(np.ones(3), "auto", weights=np.ones(3))
    with pytest.raises(TypeError, match="histogram: complex data"):
        snp.histogram(np.ones(3, np.complex64))
    with pytest.raises(ConcretizationError, match="histogram_bin_edges: bins='fd'"):
        starling.compile(lambda a: snp.histogram_bin_edges(a, "fd"))(np.ones(3))


def test_histogram2d_dd():
    x, y, z = RNG.normal(size=(3, 30))
    w = RNG.uniform(size=30)
    for bins in (4, [3, 2], np.array([-1, 0, 1.0]), [np.array([-2, 0, 2.0]), 3]):
        close(snp.histogram2d(x, y, bins), np.histogram2d(x, y, bins), rtol=1e-12)
    close(snp.histogram2d(x, y, 3, range=[[-1, 1], None], weights=w, density=True),
          np.histogram2d(x, y, 3, range=[[-1, 1], None], weights=w, density=True), rtol=1e-12)
    s = np.stack([x, y, z], axis=1)
    got = snp.histogramdd(s, (2, 3, [-1, 0, 2]), range=[(-1, 1), None, None], weights=w)
    want = np.histogramdd(s, (2, 3, [-1, 0, 2]), range=[(-1, 1), None, None], weights=w)
    close(got[0], want[0], rtol=1e-12)
    close(got[1], want[1], rtol=1e-12)
    close(snp.histogramdd([x, y], 2, density=True)[0], np.histogramdd([x, y], 2, density=True)[0])
    close(snp.histogramdd(x, 3)[0], np.histogramdd(x, 3)[0], dtype=np.float32)
    with pytest.raises(ValueError, match="histogramdd: bins must have one entry per dimension"):
        snp.histogramdd(s, [2, 2])


# ---- set operations ------------------------------------------------------------------------------

SET_CASES = [
    (np.array([3, 1, 2, 3, nan, nan, -0.0, 5]), np.array([nan, 0.0, 2, 2, 7, 1])),
    (np.array([1.0, 2]), np.zeros(0)), (np.zeros(0), np.zeros(0)),
    (np.array([4, 4, 4]), np.array([4])), (np.array([[5, 1], [2, 9]]), np.array([9, 0, 5, 5])),
    (np.array([1 + 1j, 2, 1 + 1j, 3j]), np.array([3j, 2, 2 + 1j])),
    (np.array([1, 200], np.uint8), np.array([-1, 200], np.int16)),
]


@pytest.mark.parametrize("a,b", SET_CASES)
def test_set_ops(a, b):
    for name in ("union1d", "intersect1d", "setdiff1d", "setxor1d"):
        got, want = getattr(snp, name)(a, b), getattr(np, name)(a, b)
        close(got, want, dtype=np.result_type(a, b) if a.size else None)
    close(snp.intersect1d(a, b, return_indices=True), np.intersect1d(a, b, return_indices=True))
    close(snp.isin(a, b), np.isin(a, b), dtype=np.bool_)
    close(snp.isin(a, b, invert=True), np.isin(a, b, invert=True))
    ua, ub = np.unique(a), np.unique(b)  # assume_unique needs unique inputs
    for name in ("intersect1d", "setdiff1d", "setxor1d"):
        close(getattr(snp, name)(ua, ub, assume_unique=True),
              getattr(np, name)(ua, ub, assume_unique=True))


def test_set_ops_unsorted_assume_unique():
    a, b = np.array([5, 3, 1]), np.array([3, 9])
    close(snp.setdiff1d(a, b, assume_unique=True), np.setdiff1d(a, b, assume_unique=True))
    close(snp.intersect1d(a, b, assume_unique=True, return_indices=True),
          np.intersect1d(a, b, assume_unique=True, return_indices=True))


def test_set_ops_size_and_fill():
    a, b = np.array([4, 1, 1, 9]), np.array([9, 2])
    close(snp.union1d(a, b, size=6), [1, 2, 4, 9, 1, 1])
    close(snp.union1d(a, b, size=2), [1, 2])
    close(snp.setdiff1d(a, b, size=3, fill_value=-1), [1, 4, -1])
    close(snp.setxor1d(a, b, size=5, fill_value=0), [1, 2, 4, 0, 0])
    close(snp.intersect1d(a, b, size=2, return_indices=True), ([9, 9], [3, 4], [0, 2]))
    close(snp.setdiff1d(a, a, size=2), [0, 0])  # empty result: default fill 0
    for name, kw in (("union1d", {}), ("intersect1d", {"return_indices": True}),
                     ("setdiff1d", {}), ("setxor1d", {})):
        fn = getattr(snp, name)
        f = lambda x, y, fn=fn, kw=kw: fn(x, y, size=5, **kw)  # noqa: E731
        compiled_matches_eager(f, a, b)
        vmap_matches_loop(f, [a, a[::-1], np.array([2, 2, 2, 2])], [b, b[::-1], np.array([2, 1])])
        with pytest.raises(ConcretizationError, match=f"{name}: the length of the result"):
            starling.compile(lambda x, y, fn=fn: fn(x, y))(a, b)
    with pytest.raises(ValueError, match="union1d: size must be >= 0"):
        snp.union1d(a, b, size=-1)


def test_isin_shapes_and_kind():
    e = np.array([[1, 2], [3, 4]])
    close(snp.isin(e, [[4], [1]]), np.isin(e, [[4], [1]]))
    close(snp.isin(e, np.zeros(0, int)), np.isin(e, np.zeros(0, int)))
    close(snp.isin(2.0, [1, 2]), np.isin(2.0, [1, 2]))
    with pytest.raises(ValueError, match="isin: kind must be"):
        snp.isin(e, e, kind="hash")


# ---- convolution, covariance ---------------------------------------------------------------------

@pytest.mark.parametrize("n,m", [(1, 1), (5, 1), (1, 4), (5, 3), (3, 5), (4, 4), (6, 2), (2, 7)])
def test_convolve_correlate(n, m):
    a = RNG.normal(size=n) + 1j * RNG.normal(size=n)
    v = RNG.normal(size=m) + 1j * RNG.normal(size=m)
    for mode in ("full", "same", "valid"):
        close(snp.convolve(a, v, mode), np.convolve(a, v, mode))
        close(snp.correlate(a, v, mode), np.correlate(a, v, mode))
        close(snp.correlate(a.real, v.real, mode), np.correlate(a.real, v.real, mode))
    ai, vi = np.arange(n, dtype=np.int32) - 2, np.arange(m, dtype=np.int32)
    close(snp.convolve(ai, vi), np.convolve(ai, vi), dtype=np.int32)
    close(snp.correlate(ai, vi, "same"), np.correlate(ai, vi, "same"))


def test_convolve_bool_and_errors():
    b1, b2 = np.array([True, False, True]), np.array([True, True])
    close(snp.convolve(b1, b2), np.convolve(b1, b2), dtype=np.bool_)
    with pytest.raises(ValueError, match="convolve: v must not be empty"):
        snp.convolve(np.ones(3), np.ones(0))
    with pytest.raises(ValueError, match="correlate: mode must be one of"):
        snp.correlate(np.ones(3), np.ones(2), "circular")
    with pytest.raises(ValueError, match="convolve: a must be 1-D"):
        snp.convolve(np.ones((2, 2)), np.ones(2))


COV_CASES = [{}, {"bias": True}, {"ddof": 2}, {"fweights": np.array([1, 2, 0, 3, 1, 1])},
             {"aweights": np.array([0.5, 1, 2, 0.1, 1, 3])},
             {"fweights": np.array([1, 2, 0, 3, 1, 1]), "aweights": np.linspace(0.1, 1, 6),
              "ddof": 3}, {"fweights": np.array([1, 2, 0, 3, 1, 1]), "ddof": 0}]


@pytest.mark.parametrize("kw", COV_CASES, ids=[str(sorted(k)) for k in COV_CASES])
def test_cov(kw):
    x = RNG.normal(size=(3, 6))
    y = RNG.normal(size=6)
    close(snp.cov(x, **kw), np.cov(x, **kw))
    close(snp.cov(x, y, **kw), np.cov(x, y, **kw))
    close(snp.cov(x.T, rowvar=False, **kw), np.cov(x.T, rowvar=False, **kw))
    xc = x + 1j * RNG.normal(size=x.shape)
    close(snp.cov(xc, **kw), np.cov(xc, **kw))


def test_cov_corrcoef_shapes_and_errors():
    y = RNG.normal(size=7)
    close(snp.cov(y), np.cov(y))
    assert snp.cov(y).shape == ()
    close(snp.cov(np.arange(5)), np.cov(np.arange(5)), dtype=np.float32)
    x = RNG.normal(size=(4, 6))
    close(snp.corrcoef(x), np.corrcoef(x))
    close(snp.corrcoef(x, rowvar=False), np.corrcoef(x, rowvar=False))
    close(snp.corrcoef(x[0], x[1]), np.corrcoef(x[0], x[1]))
    xc = x + 1j * RNG.normal(size=x.shape)
    close(snp.corrcoef(xc), np.corrcoef(xc))
    close(snp.corrcoef(y), np.corrcoef(y))
    with pytest.raises(ValueError, match="cov: the data must be 1-D or 2-D"):
        snp.cov(np.ones((2, 2, 2)))
    with pytest.raises(TypeError, match="cov: fweights must be integers"):
        snp.cov(x, fweights=np.ones(6))
    with pytest.raises(ValueError, match="cov: aweights cannot be negative"):
        snp.cov(x, aweights=-np.ones(6))
    with pytest.raises(ValueError, match="cov: fweights must be 1-D with one entry"):
        snp.cov(x, fweights=np.ones(5, int))
    with pytest.raises(ValueError, match="cov: ddof must be an integer"):
        snp.cov(x, ddof=1.5)


# ---- polynomials ---------------------------------------------------------------------------------

def test_vander_polyval_arith():
    x = np.array([0.0, 1, 2, -1.5])
    close(snp.vander(x), np.vander(x))
    close(snp.vander(x, 6, increasing=True), np.vander(x, 6, increasing=True))
    close(snp.vander(np.array([2, 3]), 3), np.vander(np.array([2, 3]), 3), dtype=np.int64)
    close(snp.vander(x, 0), np.vander(x, 0))
    close(snp.vander(np.array([True, False])), np.vander(np.array([True, False])))
    p = np.array([2.0, -1, 0, 3])
    close(snp.polyval(p, x), np.polyval(p, x))
    close(snp.polyval([1, 2], 3), np.polyval([1, 2], 3))
    close(snp.polyval(np.ones((3, 2)), np.array([2.0, 3.0])),
          np.polyval(np.ones((3, 2)), np.array([2.0, 3.0])))
    for a1, a2 in (([1, 2], [3, 4, 5]), ([2.5], [1, 0, -1]), (4, [1, 1])):
        close(snp.polyadd(a1, a2), np.polyadd(a1, a2))
        close(snp.polysub(a1, a2), np.polysub(a1, a2))
        close(snp.polymul(a1, a2), np.polymul(a1, a2))
    for m in (0, 1, 2, 5):
        close(snp.polyder(p, m), np.polyder(p, m))
    close(snp.polyder(np.array([1, 2, 3])), np.polyder(np.array([1, 2, 3])), dtype=np.int64)
    for m, k in ((1, None), (2, [1, 2]), (3, 4.0), (0, None)):
        close(snp.polyint(p, m, k), np.polyint(p, m, k))
    with pytest.raises(ValueError, match="polyder: the order of the derivative"):
        snp.polyder(p, -1)
    with pytest.raises(ValueError, match="polyint: k must be a scalar or hold m = 3"):
        snp.polyint(p, 3, [1, 2])
    with pytest.raises(ValueError, match="vander: x must be 1-D"):
        snp.vander(np.ones((2, 2)))


@pytest.mark.parametrize("weighted", [False, True])
def test_polyfit(weighted):
    x = np.linspace(-1, 1, 9)
    ys = np.stack([np.sin(3 * x), np.cos(x)], axis=1)
    kw = {"w": RNG.uniform(0.5, 1.5, 9)} if weighted else {}
    close(snp.polyfit(x, ys[:, 0], 3, **kw), np.polyfit(x, ys[:, 0], 3, **kw), rtol=1e-9)
    close(snp.polyfit(x, ys, 3, **kw), np.polyfit(x, ys, 3, **kw), rtol=1e-9)
    for y in (ys[:, 0], ys):
        close(snp.polyfit(x, y, 2, cov=True, **kw), np.polyfit(x, y, 2, cov=True, **kw),
              rtol=1e-9)
        close(snp.polyfit(x, y, 2, cov="unscaled", **kw),
              np.polyfit(x, y, 2, cov="unscaled", **kw), rtol=1e-9)
    got = snp.polyfit(x, ys[:, 0], 4, full=True, **kw)
    want = np.polyfit(x, ys[:, 0], 4, full=True, **kw)
    close(got[:4], want[:4], rtol=1e-9)
    assert got[4] == want[4]
    close(snp.polyfit(np.arange(4), np.arange(4) * 2 + 1, 1), [2.0, 1.0], rtol=1e-5)
    with pytest.raises(TypeError, match="polyfit: y must be 1-D or 2-D with x's length"):
        snp.polyfit(x, np.ones(3), 1)
    with pytest.raises(ValueError, match="polyfit: the number of data points"):
        snp.polyfit(x[:3], ys[:3, 0], 2, cov=True)


def test_roots():
    def same_roots(got, want):
        got, want = np.sort_complex(np.asarray(got)), np.sort_complex(np.asarray(want, complex))
        close(got, want, rtol=1e-6, atol=1e-6)
    same_roots(snp.roots([0, 0, 1, -3, 2, 0, 0]), np.roots([0, 0, 1, -3, 2, 0, 0]))
    same_roots(snp.roots([1, 0, 1]), np.roots([1, 0, 1]))
    same_roots(snp.roots([2.0, -3, 5, 7]), np.roots([2.0, -3, 5, 7]))
    assert snp.roots([0, 0]).shape == (0,) and snp.roots([5]).shape == (0,)
    assert snp.roots(np.array([1.0, 2.0])).dtype == np.complex128
    f = starling.compile(lambda p: snp.roots(p, strip_zeros=False))
    same_roots(f(np.array([1.0, -6, 11, -6])), [1, 2, 3])
    with pytest.raises(ConcretizationError, match="roots: with strip_zeros=True"):
        starling.compile(snp.roots)(np.array([1.0, 2.0]))


# ---- windows -------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["bartlett", "blackman", "hamming", "hanning"])
def test_windows(name):
    for M in (-1, 0, 1, 2, 5, 8):
        close(getattr(snp, name)(M), getattr(np, name)(M), atol=1e-7, dtype=np.float32)
    with pytest.raises(TypeError, match=f"{name}: M must be a Python int"):
        getattr(snp, name)(4.5)


def test_kaiser():
    for M in (0, 1, 2, 7, 12):
        for beta in (0.0, 1.5, 8.6, 50.0, 300.0):
            close(snp.kaiser(M, beta), np.kaiser(M, beta), rtol=2e-6, atol=1e-7,
                  dtype=np.float32)
    close(snp.kaiser(6, np.float64(3.0)), np.kaiser(6, 3.0), rtol=1e-12, dtype=np.float64)


# ---- derivatives, vmap, compile ------------------------------------------------------------------

_Y = RNG.normal(size=(4, 5))
_XS = np.sort(RNG.normal(size=5))
_XP, _FP = np.array([0.0, 1, 1.5, 2, 3.5]), RNG.normal(size=5)
_XI = np.array([-1, 0.3, 1.2, 1.7, 2.5, 5])
_FW = np.array([1, 2, 1, 1, 3])

GRAD_CASES = {
    "diff": (lambda a: snp.diff(a, n=2, axis=1, prepend=1.0), [_Y]),
    "gradient": (lambda a, c: snp.gradient(a, 1.5, c, edge_order=2), [_Y, _XS]),
    "trapezoid": (lambda a, c: snp.trapezoid(a, c), [_Y, _XS]),
    "unwrap": (lambda a: snp.unwrap(3 * a), [_Y]),
    "interp": (snp.interp, [_XI, _XP, _FP]),
    "interp_complex": (snp.interp, [_XI, _XP, _FP + 1j * _FP[::-1]]),
    "convolve": (lambda a, b: snp.convolve(a, b, "same"), [_Y[0], _Y[1, :3] + 1j]),
    "correlate": (lambda a, b: snp.correlate(a, b, "full"), [_Y[0] + 0j, _Y[1, :3] + 1j]),
    "cov": (lambda a, w: snp.cov(a, fweights=_FW, aweights=w), [_Y, np.linspace(0.5, 1, 5)]),
    "corrcoef": (snp.corrcoef, [_Y]),
    "polyval": (snp.polyval, [_Y[0, :4], _Y[1, :3]]),
    "polyfit": (lambda a, b: snp.polyfit(a, b, 2), [np.linspace(-1, 1, 6), _Y[2, :3].repeat(2)]),
    "vander": (lambda a: snp.vander(a, 4), [np.array([0.0, 1.5, -2])]),
    "polyint": (lambda p, k: snp.polyint(p, 2, k), [_Y[0, :3], _Y[1, :2]]),
    "polymul": (snp.polymul, [_Y[0, :3], _Y[1, :2]]),
    "histogram_weights": (lambda w: snp.histogram(_Y, 4, weights=w)[0], [np.abs(_Y)]),
    "histogram_density": (lambda a: snp.histogram(a, 4, density=True), [_Y]),
    "histogramdd_weights": (lambda w: snp.histogramdd(_Y[:, :2], 3, weights=w)[0],
                            [np.abs(_Y[:, 0])]),
    "bincount_weights": (lambda w: snp.bincount(np.array([0, 2, 2, 1]), w), [_Y[0, :4]]),
    "kaiser": (lambda b: snp.kaiser(7, b), [np.array(2.5)]),
}


@pytest.mark.parametrize("name", sorted(GRAD_CASES))
def test_grads(name):
    f, args = GRAD_CASES[name]
    check_grads(f, args, order=1 if name == "polyfit" else 2)


def _ex(a, b):
    return [a, b, 2 * a]


VMAP_CASES = {
    "diff": (lambda a: snp.diff(a, prepend=0.5), [_ex(_Y[0], _Y[1])]),
    "gradient": (lambda a, c: snp.gradient(a, c, edge_order=2), [_ex(_Y[0], _Y[1]),
                                                                _ex(_XS, np.sort(_Y[2]))]),
    "trapezoid": (lambda a, c: snp.trapezoid(a, c), [_ex(_Y[0], _Y[1]), _ex(_XS, _XS + 1)]),
    "unwrap": (lambda a: snp.unwrap(3 * a), [_ex(_Y[0], _Y[1])]),
    "interp": (snp.interp, [_ex(_XI, _XI[::-1]), _ex(_XP, _XP * 0.5), _ex(_FP, _FP[::-1])]),
    "interp_period": (lambda x, xp, fp: snp.interp(x, xp, fp, period=2.0),
                      [_ex(_XI, _XI[::-1]), _ex(_XP, _XP[::-1]), _ex(_FP, _FP[::-1])]),
    "convolve": (lambda a, b: snp.convolve(a, b, "same"), [_ex(_Y[0], _Y[1]), _ex(_XS, _FP)]),
    "correlate": (snp.correlate, [_ex(_Y[0], _Y[1]), _ex(_XS[:2], _FP[:2])]),
    "cov": (lambda a, w: snp.cov(a, aweights=w), [_ex(_Y, _Y[::-1]), _ex(_FP ** 2, _XP + 1)]),
    "corrcoef": (snp.corrcoef, [_ex(_Y, _Y[::-1])]),
    "polyval": (snp.polyval, [_ex(_Y[0], _Y[1]), _ex(_XS, _FP)]),
    "polyfit": (lambda a, b: snp.polyfit(a, b, 2, cov=True), [_ex(_XS, _FP), _ex(_Y[0], _Y[1])]),
    "roots": (lambda p: snp.roots(p, strip_zeros=False),
              [[np.array([1.0, -6, 11, -6]), np.array([1.0, -3, 2, 0]),
                np.array([2.0, -12, 22, -12])]]),
    "histogram": (lambda a, w: snp.histogram(a, 3, weights=w, density=True),
                  [_ex(_Y[0], _Y[1]), _ex(_FP ** 2, _XP)]),
    "histogram_edges": (lambda a, e: snp.histogram(a, e),
                        [_ex(_Y[0], _Y[1]), _ex(np.array([-1.0, 0, 2]), np.array([0.0, 1, 1]))]),
    "histogram2d": (lambda a, b: snp.histogram2d(a, b, [2, 3]), [_ex(_Y[0], _Y[1]),
                                                                 _ex(_Y[2], _Y[3])]),
    "bincount": (lambda a: snp.bincount(a, length=4),
                 [[np.array([0, 2, 2, 1]), np.array([3, 3, 0, 9]), np.array([1, 1, 1, 1])]]),
    "digitize": (snp.digitize, [_ex(_Y[0], _Y[1]), [np.array([-1.0, 0, 1]),
                                                     np.array([1.0, 0, -1]),
                                                     np.array([0.0, 0, 2])]]),
    "isin": (snp.isin, [[np.array([1, 2, 3]), np.array([4, 5, 6]), np.array([7, 8, 9])],
                        [np.array([3, 1]), np.array([5, 0]), np.array([9, 8])]]),
}


@pytest.mark.parametrize("name", sorted(VMAP_CASES))
def test_vmap_and_compile(name):
    f, examples = VMAP_CASES[name]
    vmap_matches_loop(f, *examples)
    compiled_matches_eager(f, *[ex[0] for ex in examples])
