"""The ``fft`` extension (Array API 2023.12): fft, ifft, fftn, ifftn, rfft, irfft, rfftn, irfftn,
hfft, ihfft, fftfreq, rfftfreq, fftshift, ifftshift."""
from __future__ import annotations

import numpy as np
import pytest

import starling.numpy as xp
from tests.array_api import COMPLEX_FLOATS, COMPLEX_OF, DEFAULT_FLOAT, REAL_FLOATS, REAL_OF, dname

F = xp.fft
NORMS = ["backward", "ortho", "forward"]


def _rand(shape, dt, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(shape)
    if np.dtype(dt).kind == "c":
        a = a + 1j * rng.standard_normal(shape)
    return a.astype(dt)


def _rtol(dt):
    return 1e-4 if np.dtype(dt) in (np.dtype(np.float32), np.dtype(np.complex64)) else 1e-10


def _close(got, want, dt):
    g = np.asarray(got)
    assert g.shape == np.shape(want), (g.shape, np.shape(want))
    np.testing.assert_allclose(g, want, rtol=_rtol(dt), atol=_rtol(dt) * 10)


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("dt", COMPLEX_FLOATS, ids=dname)
@pytest.mark.parametrize("name", ["fft", "ifft"])
def test_fft_ifft(name, dt, norm):
    x = _rand((3, 6), dt)
    fn, ref = getattr(F, name), getattr(np.fft, name)
    for kw in ({}, {"n": 4}, {"n": 9}, {"axis": 0}, {"axis": -2, "n": 5}):
        r = fn(xp.asarray(x), norm=norm, **kw)
        assert r.dtype == dt
        _close(r, ref(x, norm=norm, **kw), dt)
    # round trip: ifft(fft(x)) == x with the same arguments
    back = F.ifft(F.fft(xp.asarray(x), norm=norm), norm=norm)
    _close(back, x, dt)


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("dt", COMPLEX_FLOATS, ids=dname)
@pytest.mark.parametrize("name", ["fftn", "ifftn"])
def test_fftn_ifftn(name, dt, norm):
    x = _rand((2, 3, 4), dt)
    fn, ref = getattr(F, name), getattr(np.fft, name)
    for kw in ({}, {"axes": (0, 2)}, {"axes": (-1,)}, {"s": (3, 5), "axes": (1, 2)}):
        r = fn(xp.asarray(x), norm=norm, **kw)
        assert r.dtype == dt
        _close(r, ref(x, norm=norm, **kw), dt)


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("dt", REAL_FLOATS, ids=dname)
def test_rfft_irfft(dt, norm):
    x = _rand((3, 6), dt)
    for kw in ({}, {"n": 4}, {"n": 9}, {"axis": 0}):
        r = F.rfft(xp.asarray(x), norm=norm, **kw)
        assert r.dtype == COMPLEX_OF[dt]
        _close(r, np.fft.rfft(x, norm=norm, **kw), dt)
    spec = np.fft.rfft(x).astype(COMPLEX_OF[dt])
    for kw in ({}, {"n": 6}, {"n": 7}, {"n": 3}, {"axis": 0, "n": 4}):
        r = F.irfft(xp.asarray(spec), norm=norm, **kw)
        assert r.dtype == dt
        _close(r, np.fft.irfft(spec, norm=norm, **kw), dt)
    back = F.irfft(F.rfft(xp.asarray(x), norm=norm), n=6, norm=norm)
    _close(back, x, dt)


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("dt", REAL_FLOATS, ids=dname)
def test_rfftn_irfftn(dt, norm):
    x = _rand((2, 4, 6), dt)
    for kw in ({}, {"axes": (0, 2)}, {"s": (3, 8), "axes": (1, 2)}):
        r = F.rfftn(xp.asarray(x), norm=norm, **kw)
        assert r.dtype == COMPLEX_OF[dt]
        _close(r, np.fft.rfftn(x, norm=norm, **kw), dt)
    spec = np.fft.rfftn(x).astype(COMPLEX_OF[dt])
    for kw in ({}, {"s": (2, 4, 6), "axes": (0, 1, 2)}, {"s": (4, 5), "axes": (1, 2)}):
        r = F.irfftn(xp.asarray(spec), norm=norm, **kw)
        assert r.dtype == dt
        _close(r, np.fft.irfftn(spec, norm=norm, **kw), dt)


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("dt", COMPLEX_FLOATS, ids=dname)
def test_hfft_ihfft(dt, norm):
    x = _rand((2, 5), dt)
    for kw in ({}, {"n": 8}, {"n": 7}, {"axis": 0, "n": 4}):
        r = F.hfft(xp.asarray(x), norm=norm, **kw)
        assert r.dtype == REAL_OF[dt]
        _close(r, np.fft.hfft(x, norm=norm, **kw), dt)
    real = _rand((2, 6), REAL_OF[dt])
    for kw in ({}, {"n": 4}, {"n": 9}):
        r = F.ihfft(xp.asarray(real), norm=norm, **kw)
        assert r.dtype == dt
        n = kw.get("n", 6)
        assert r.shape == (2, n // 2 + 1)
        _close(r, np.fft.ihfft(real, norm=norm, **kw), dt)


def test_default_norm_is_backward():
    x = _rand((8,), np.complex128)
    _close(F.fft(xp.asarray(x)), np.fft.fft(x), np.complex128)
    _close(F.ifft(xp.asarray(x)), np.fft.ifft(x), np.complex128)  # 1/n on the inverse


@pytest.mark.parametrize("n", [1, 2, 5, 8])
def test_fftfreq_rfftfreq(n):
    for d in (1.0, 0.5):
        r = F.fftfreq(n, d=d)
        assert r.dtype == DEFAULT_FLOAT and r.shape == (n,)
        np.testing.assert_allclose(np.asarray(r), np.fft.fftfreq(n, d=d), rtol=1e-6)
        r = F.rfftfreq(n, d=d)
        assert r.dtype == DEFAULT_FLOAT and r.shape == (n // 2 + 1,)
        np.testing.assert_allclose(np.asarray(r), np.fft.rfftfreq(n, d=d), rtol=1e-6)
    dev = xp.asarray(0).device
    assert F.fftfreq(n, device=dev).device == dev
    assert F.rfftfreq(n, device=dev).device == dev


@pytest.mark.parametrize("name", ["fftshift", "ifftshift"])
def test_shifts(name):
    x = np.arange(30.0).reshape(5, 6)
    fn, ref = getattr(F, name), getattr(np.fft, name)
    for axes in (None, 0, -1, (0, 1), [1]):
        r = fn(xp.asarray(x), axes=axes)
        assert r.dtype == xp.float64 and r.shape == x.shape  # NumPy input keeps its dtype
        np.testing.assert_array_equal(np.asarray(r), ref(x, axes=axes))
    np.testing.assert_array_equal(np.asarray(fn(xp.asarray(x))), ref(x))
    np.testing.assert_array_equal(np.asarray(F.ifftshift(F.fftshift(xp.asarray(x)))), x)
