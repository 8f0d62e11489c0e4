"""starling.scipy.signal / integrate / ndimage against SciPy (every mode, swapped and size-1
operands, integers, complex, out-of-range coordinates and half-integers), derivatives against
finite differences, vmap against a loop and compile against eager."""
from __future__ import annotations

import numpy as np
import pytest
import scipy.integrate as si
import scipy.ndimage as nd
import scipy.signal as ss

import starling
import starling.numpy as snp
import starling.scipy.integrate as sint
import starling.scipy.ndimage as snd
import starling.scipy.signal as ssig
from starling.test_util import check_grads

_SHAPES = [((7,), (3,)), ((3,), (7,)), ((5, 6), (2, 3)), ((2, 3), (5, 6)), ((4, 1, 3), (2, 3, 2)),
           ((1,), (1,)), ((6,), (6,)), ((4, 4), (1, 1))]


@pytest.mark.parametrize("s1,s2", _SHAPES)
@pytest.mark.parametrize("fn", ["convolve", "correlate"])
def test_convolve_correlate_against_scipy(s1, s2, fn):
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=s1), rng.normal(size=s2)
    for mode in ["full", "same", "valid"]:
        for method in ["direct", "fft", "auto"]:
            try:
                want = getattr(ss, fn)(a, b, mode=mode, method=method)
            except ValueError:
                with pytest.raises(ValueError, match=fn):
                    getattr(ssig, fn)(snp.asarray(a), snp.asarray(b), mode=mode, method=method)
                continue
            got = getattr(ssig, fn)(snp.asarray(a), snp.asarray(b), mode=mode, method=method)
            assert got.shape == want.shape, (mode, method)
            np.testing.assert_allclose(np.asarray(got), want, rtol=1e-12, atol=1e-13)


def test_convolve_integers_complex_and_errors():
    rng = np.random.default_rng(1)
    ai, bi = rng.integers(-5, 5, size=(6, 4)), rng.integers(-5, 5, size=(3, 2))
    for method in ["direct", "fft", "auto"]:
        got = ssig.convolve(snp.asarray(ai), snp.asarray(bi), method=method)
        assert got.dtype == np.int64
        np.testing.assert_array_equal(np.asarray(got), ss.convolve(ai, bi, method=method))
    ac = rng.normal(size=5) + 1j * rng.normal(size=5)
    bc = rng.normal(size=3) + 1j * rng.normal(size=3)
    for fn in ["convolve", "correlate"]:
        for method in ["direct", "fft"]:
            np.testing.assert_allclose(
                np.asarray(getattr(ssig, fn)(snp.asarray(ac), snp.asarray(bc), method=method)),
                getattr(ss, fn)(ac, bc, method=method), rtol=1e-13, atol=1e-14)
    with pytest.raises(ValueError, match="mode"):
        ssig.convolve(snp.ones(3), snp.ones(2), mode="wide")
    with pytest.raises(ValueError, match="method"):
        ssig.convolve(snp.ones(3), snp.ones(2), method="winograd")
    with pytest.raises(ValueError, match="same number of dimensions"):
        ssig.convolve(snp.ones(3), snp.ones((2, 2)))
    with pytest.raises(ValueError, match="empty"):
        ssig.convolve(snp.ones(3), snp.ones(0))


def test_fftconvolve_axes_and_auto_switch():
    rng = np.random.default_rng(2)
    a, b = rng.normal(size=(3, 40)), rng.normal(size=(1, 7))
    for mode in ["full", "same", "valid"]:
        np.testing.assert_allclose(
            np.asarray(ssig.fftconvolve(snp.asarray(a), snp.asarray(b), mode=mode, axes=1)),
            ss.fftconvolve(a, b, mode=mode, axes=1), rtol=1e-12, atol=1e-13)
    with pytest.raises(ValueError, match="not convolved"):
        ssig.fftconvolve(snp.ones((3, 4)), snp.ones((2, 4)), axes=1)
    big, k = rng.normal(size=3000), rng.normal(size=500)   # 3.5e6 multiply-adds: "auto" = fft
    np.testing.assert_allclose(np.asarray(ssig.convolve(snp.asarray(big), snp.asarray(k))),
                               ss.convolve(big, k), rtol=1e-9, atol=1e-11)


def test_signal_grads_vmap_compile():
    rng = np.random.default_rng(3)
    a, b = snp.asarray(rng.normal(size=(5, 4))), snp.asarray(rng.normal(size=(2, 3)))
    for method in ["direct", "fft"]:
        for mode in ["full", "same", "valid"]:
            check_grads(lambda x, y: ssig.correlate(x, y, mode=mode, method=method), (a, b),
                        order=2, rtol=1e-5, atol=1e-7)
    xs = snp.asarray(rng.normal(size=(3, 8)))
    k = snp.asarray(rng.normal(size=3))
    for method in ["direct", "fft"]:
        def f(x):
            return ssig.convolve(x, k, mode="same", method=method)
        loop = np.stack([np.asarray(f(xs[i])) for i in range(3)])
        np.testing.assert_allclose(np.asarray(starling.vmap(f)(xs)), loop, rtol=1e-13)
        np.testing.assert_allclose(np.asarray(starling.compile(f)(xs[0])), loop[0], rtol=1e-13)


# ---- integrate ----------------------------------------------------------------------------------
def test_trapezoid_and_cumulative_against_scipy():
    rng = np.random.default_rng(4)
    y, x = rng.normal(size=(3, 5)), np.sort(rng.normal(size=5))
    A = snp.asarray
    np.testing.assert_allclose(np.asarray(sint.trapezoid(A(y), A(x))), si.trapezoid(y, x),
                               rtol=1e-14)
    np.testing.assert_allclose(np.asarray(sint.trapezoid(A(y), dx=0.5, axis=0)),
                               si.trapezoid(y, dx=0.5, axis=0), rtol=1e-14)
    for kw in [{}, {"initial": 0}, {"axis": 0, "dx": 0.25}, {"axis": 0, "initial": 0}]:
        np.testing.assert_allclose(np.asarray(sint.cumulative_trapezoid(A(y), **kw)),
                                   si.cumulative_trapezoid(y, **kw), rtol=1e-14)
    np.testing.assert_allclose(np.asarray(sint.cumulative_trapezoid(A(y), A(x))),
                               si.cumulative_trapezoid(y, x), rtol=1e-14)
    xx = np.sort(rng.normal(size=(3, 5)), axis=1)
    np.testing.assert_allclose(np.asarray(sint.cumulative_trapezoid(A(y), A(xx))),
                               si.cumulative_trapezoid(y, xx), rtol=1e-14)
    assert sint.cumulative_trapezoid(A(np.ones(1))).shape == (0,)   # size-1 axis: empty
    with pytest.raises(ValueError, match="initial"):
        sint.cumulative_trapezoid(A(y), initial=1.0)
    with pytest.raises(ValueError, match="x must be"):
        sint.cumulative_trapezoid(A(y), A(np.ones(4)))
    check_grads(lambda v, t: sint.cumulative_trapezoid(v, t), (A(y), A(x)), order=2)
    np.testing.assert_allclose(np.asarray(starling.vmap(sint.cumulative_trapezoid)(A(y))),
                               si.cumulative_trapezoid(y), rtol=1e-14)


# ---- ndimage ------------------------------------------------------------------------------------
_ND_MODES = ["constant", "nearest", "wrap", "mirror", "reflect", "grid-constant", "grid-wrap",
             "grid-mirror"]


@pytest.mark.parametrize("shape", [(5,), (4, 6), (1, 5), (3, 2, 4)])
def test_map_coordinates_against_scipy(shape):
    rng = np.random.default_rng(5)
    a = rng.normal(size=shape)
    c = rng.uniform(-12, 12, size=(len(shape), 200))
    c[:, :40] = np.round(c[:, :40] * 2) / 2   # half-integers and integers: the rounding ties
    for mode in _ND_MODES:
        for order in (0, 1):
            want = nd.map_coordinates(a, c, order=order, mode=mode, cval=-3.5)
            got = snd.map_coordinates(snp.asarray(a), snp.asarray(c), order, mode=mode,
                                      cval=-3.5)
            assert got.dtype == np.float64
            np.testing.assert_allclose(np.asarray(got), want, rtol=1e-13, atol=1e-13,
                                       err_msg=f"{mode} order {order}")


def test_map_coordinates_dtypes_lists_and_errors():
    a = np.arange(12, dtype=np.int32).reshape(3, 4)
    coords = [np.array([0.4, 1.5, 2.2]), np.array([2.5, 0.5, 3.0])]
    got = snd.map_coordinates(snp.asarray(a), [snp.asarray(c) for c in coords], 1)
    assert got.dtype == np.int32
    np.testing.assert_array_equal(np.asarray(got), nd.map_coordinates(a, coords, order=1))
    f32 = snd.map_coordinates(snp.asarray(a.astype(np.float32)), snp.asarray(np.array(coords)), 1)
    assert f32.dtype == np.float32
    for order in (2, 3):
        with pytest.raises(NotImplementedError, match="map_coordinates: only order 0 and 1 "
                                                      f"are supported, got {order}"):
            snd.map_coordinates(snp.asarray(a), coords, order)
    with pytest.raises(ValueError, match="mode"):
        snd.map_coordinates(snp.asarray(a), coords, 1, mode="antireflect")
    with pytest.raises(ValueError, match="coordinate arrays"):
        snd.map_coordinates(snp.asarray(a), coords[:1], 1)


def test_map_coordinates_grads_vmap_compile():
    rng = np.random.default_rng(6)
    a = snp.asarray(rng.normal(size=(4, 5)))
    # coordinates away from the sample points and the mode's break points (finite differences)
    c = snp.asarray(np.array([[0.3, 1.7, -0.6, 3.4, 5.2], [2.2, -1.3, 0.4, 4.6, 2.9]]))
    for mode in _ND_MODES:
        check_grads(lambda x, y: snd.map_coordinates(x, y, 1, mode=mode, cval=0.5), (a, c),
                    order=1, rtol=1e-5, atol=1e-7)
        check_grads(lambda x: snd.map_coordinates(x, c, 0, mode=mode), (a,), order=1)

    def f(img, coords):
        return snd.map_coordinates(img, coords, 1, mode="reflect")
    imgs = snp.asarray(rng.normal(size=(3, 4, 5)))
    loop = np.stack([np.asarray(f(imgs[i], c)) for i in range(3)])
    np.testing.assert_allclose(np.asarray(starling.vmap(f, in_axes=(0, None))(imgs, c)), loop,
                               rtol=1e-14)
    np.testing.assert_allclose(np.asarray(starling.compile(f)(imgs[0], c)), loop[0], rtol=1e-14)


def test_namespaces_import():
    import starling.scipy as sp
    assert sp.signal is ssig and sp.integrate is sint and sp.ndimage is snd
    for mod in (ssig, sint, snd):
        for name in mod.__all__:
            assert "Args:" in getattr(mod, name).__doc__, name
