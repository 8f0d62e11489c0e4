"""What the Array API 2024.12 revision added or changed relative to 2023.12 (from its changelog):
the new functions count_nonzero, cumulative_prod, nextafter, reciprocal, take_along_axis (diff
is not provided yet), the "max dimensions" capability, Python scalars accepted by binary
functions and where / result_type, complex mean, conj / real on real arrays, fftfreq's dtype,
complex Python scalars with real arrays, and the Python float / int fields of finfo / iinfo.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from . import FLOATS, INTS, A, N, assert_same, dname, xp


def test_version_and_namespace():
    assert xp.__array_api_version__ == "2024.12"
    x = A([1.0])
    for v in (None, "2024.12", "2023.12"):
        assert x.__array_namespace__(api_version=v) is xp
    with pytest.raises(ValueError, match="2024.12"):
        x.__array_namespace__(api_version="2099.12")
    caps = xp.__array_namespace_info__().capabilities()
    assert caps["max dimensions"] == 64
    assert xp.ones((1,) * 64).ndim == 64


@pytest.mark.parametrize("axis,keepdims", [(None, False), (0, False), (1, True), ((0, 1), True),
                                           ((), False)])
def test_count_nonzero(axis, keepdims):
    x = np.array([[0.0, -0.0, 1.0], [np.nan, 2.0, 0.0]])
    got = xp.count_nonzero(A(x), axis=axis, keepdims=keepdims)
    assert got.dtype == xp.int64
    assert_same(got, np.count_nonzero(x, axis=axis, keepdims=keepdims))
    assert int(N(xp.count_nonzero(A(np.zeros((0, 3)))))) == 0


@pytest.mark.parametrize("dt", [xp.int8, xp.uint8, xp.int64, xp.float32, xp.complex64], ids=dname)
def test_cumulative_prod(dt):
    x = np.array([[2, 1, 3], [1, 0, 4]]).astype(np.dtype(dt))
    got = xp.cumulative_prod(A(x, dt), axis=1, include_initial=True)
    want = np.concatenate([np.ones((2, 1), x.dtype), np.cumprod(x, axis=1)], axis=1)
    assert_same(got, want)
    assert xp.cumulative_prod(A([], xp.float32)).shape == (0,)
    assert xp.cumulative_prod(A([], xp.float32), include_initial=True).shape == (1,)


def test_nextafter():
    x1 = np.array([0.0, -0.0, 1.0, np.inf, np.nan, 1.0, -np.inf], np.float32)
    x2 = np.array([1.0, -1.0, 2.0, 0.0, 1.0, np.nan, 0.0], np.float32)
    assert_same(xp.nextafter(A(x1), A(x2)), np.nextafter(x1, x2))
    assert_same(xp.nextafter(A(x1.astype(np.float64)), 1.5), np.nextafter(x1.astype(np.float64),
                                                                          1.5))


@pytest.mark.parametrize("dt", FLOATS, ids=dname)
def test_reciprocal(dt):
    x = np.array([2.0, -0.0, 0.0, np.inf, 0.5]).astype(np.dtype(dt))
    with np.errstate(divide="ignore"):
        assert_same(xp.reciprocal(A(x, dt)), np.reciprocal(x), rtol=1e-6)


def test_take_along_axis_negative_indices():
    x = np.arange(12).reshape(3, 4)
    idx = np.array([[-1, 0], [2, -4], [3, 3]])
    assert_same(xp.take_along_axis(A(x), A(idx), axis=1),
                np.take_along_axis(x, idx % 4, axis=1))
    rows = np.array([[-1, 0, 2, -3], [1, 1, -2, 0]])
    assert_same(xp.take_along_axis(A(x), A(rows), axis=0), np.take_along_axis(x, rows % 3, 0))


_SCALAR_BINARY = ["add", "atan2", "copysign", "divide", "equal", "floor_divide", "greater",
                  "greater_equal", "hypot", "less", "less_equal", "logaddexp", "maximum",
                  "minimum", "multiply", "nextafter", "not_equal", "pow", "remainder",
                  "subtract"]


@pytest.mark.parametrize("name", _SCALAR_BINARY)
def test_binary_functions_take_python_scalars(name):
    fn = getattr(xp, name)
    x = np.array([0.5, 2.0, -3.0], np.float32)
    ref = getattr(np, {"atan2": "arctan2", "pow": "power"}.get(name, name))
    for got, want in ((fn(A(x), 1.5), ref(x, np.float32(1.5))),
                      (fn(1.5, A(x)), ref(np.float32(1.5), x))):
        w = np.asarray(want)
        assert N(got).dtype == (np.bool_ if w.dtype == np.bool_ else np.float32)
        assert_same(got, w, rtol=1e-6)


@pytest.mark.parametrize("name", ["bitwise_and", "bitwise_or", "bitwise_xor",
                                  "bitwise_left_shift", "bitwise_right_shift"])
@pytest.mark.parametrize("dt", INTS, ids=dname)
def test_bitwise_functions_take_python_ints(name, dt):
    fn = getattr(xp, name)
    x = np.array([1, 6, 3]).astype(np.dtype(dt))
    ref = getattr(np, {"bitwise_left_shift": "left_shift",
                       "bitwise_right_shift": "right_shift"}.get(name, name))
    got = fn(A(x, dt), 2)
    assert N(got).dtype == np.dtype(dt)
    assert_same(got, ref(x, np.array(2, x.dtype)))
    assert_same(fn(3, A(x, dt)), ref(np.array(3, x.dtype), x))


def test_logical_and_where_and_result_type_take_scalars():
    b = A([True, False])
    assert_same(xp.logical_and(b, True), [True, False])
    assert_same(xp.logical_or(False, b), [True, False])
    assert_same(xp.logical_xor(b, True), [False, True])
    x = A([1.0, 2.0], xp.float32)
    got = xp.where(b, x, 0.0)
    assert got.dtype == xp.float32
    assert_same(got, [1.0, 0.0])
    assert_same(xp.where(b, 5.0, x), [5.0, 2.0])
    assert xp.result_type(x, 1.0) == xp.float32
    assert xp.result_type(xp.int8, 1) == xp.int8
    assert xp.result_type(A([1], xp.uint8), 1) == xp.uint8


def test_complex_scalar_with_real_array_and_complex_mean():
    x = A([1.0, 2.0], xp.float32)
    assert (x + 1j).dtype == xp.complex64
    assert (A([1.0], xp.float64) * 2j).dtype == xp.complex128
    z = A([1 + 1j, 2 - 3j, 0j], xp.complex64)
    m = xp.mean(z)
    assert m.dtype == xp.complex64
    assert_same(m, np.mean(N(z)), rtol=1e-6)


@pytest.mark.parametrize("dt", [xp.float32, xp.int16, xp.bool], ids=dname)
def test_conj_real_imag_of_real_arrays(dt):
    x = A([1, 0, 1], dt)
    assert xp.conj(x).dtype == dt and xp.real(x).dtype == dt
    assert_same(xp.conj(x), N(x))
    assert_same(xp.real(x), N(x))


def test_fftfreq_dtype():
    for fn in (xp.fft.fftfreq, xp.fft.rfftfreq):
        out = fn(6, d=0.5, dtype=xp.float64)
        assert out.dtype == xp.float64
        ref = getattr(np.fft, fn.__name__)(6, d=0.5)
        assert_same(out, ref, rtol=1e-15)


@pytest.mark.parametrize("dt", [xp.float32, xp.float64, xp.complex64, xp.complex128], ids=dname)
def test_finfo_fields_are_python_numbers(dt):
    fi = xp.finfo(dt)
    assert type(fi.bits) is int
    for name in ("eps", "max", "min", "smallest_normal"):
        assert type(getattr(fi, name)) is float, name
    ref = np.finfo(np.dtype(dt))
    assert fi.eps == float(ref.eps) and fi.max == float(ref.max) and fi.min == -fi.max
    assert fi.smallest_normal == float(ref.smallest_normal)
    assert fi.dtype == {xp.complex64: xp.float32, xp.complex128: xp.float64}.get(dt, dt)
    assert math.isfinite(fi.max)


def test_iinfo_fields_are_python_ints():
    ii = xp.iinfo(xp.uint64)
    assert (type(ii.bits), type(ii.max), type(ii.min)) == (int, int, int)
    assert ii.max == 2 ** 64 - 1 and ii.dtype == xp.uint64
