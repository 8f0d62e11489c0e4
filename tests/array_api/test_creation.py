"""Creation functions (Array API 2023.12): arange, asarray, empty, empty_like, eye, from_dlpack,
full, full_like, linspace, meshgrid, ones, ones_like, tril, triu, zeros, zeros_like."""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, strategies as st

import starling.numpy as xp
from tests.array_api import (
    ALL_DTYPES, COMPLEX_FLOATS, DEFAULT_COMPLEX, DEFAULT_FLOAT, DEFAULT_INT, NUMERIC,
    REAL_FLOATS, dname,
)


def _vals(x):
    return np.asarray(x).tolist()


# ---- arange ------------------------------------------------------------------------------------

@given(start=st.integers(-20, 20), stop=st.integers(-20, 20),
       step=st.integers(-7, 7).filter(bool))
def test_arange_integers(start, stop, step):
    r = xp.arange(start, stop, step)
    assert r.dtype == DEFAULT_INT and r.ndim == 1
    assert _vals(r) == list(range(start, stop, step))
    # length ceil((stop - start) / step) when the signs agree, else 0
    n = math.ceil((stop - start) / step) if (stop - start) * step > 0 else 0
    assert r.shape == (n,)


@given(start=st.floats(-10, 10), span=st.floats(-10, 10), step=st.sampled_from(
    [0.25, 0.5, 1.5, -0.25, -0.5, -1.5]))
def test_arange_floats(start, span, step):
    stop = start + span
    r = xp.arange(start, stop, step)
    assert r.dtype == DEFAULT_FLOAT
    n = math.ceil((stop - start) / step) if (stop - start) * step > 0 else 0
    assert abs(r.shape[0] - n) <= 1  # rounding may add or drop the last element (the standard)
    if r.shape[0]:
        np.testing.assert_allclose(np.asarray(r), start + step * np.arange(r.shape[0]),
                                   rtol=1e-5, atol=1e-4)


def test_arange_forms_and_dtypes():
    assert _vals(xp.arange(5)) == [0, 1, 2, 3, 4]
    assert _vals(xp.arange(2, 5)) == [2, 3, 4]
    assert _vals(xp.arange(5, 1, -2)) == [5, 3]
    assert xp.arange(1, 5, -1).shape == (0,)
    assert xp.arange(0).shape == (0,)
    assert xp.arange(3.0).dtype == DEFAULT_FLOAT
    assert xp.arange(0, 3, 0.5).dtype == DEFAULT_FLOAT
    assert _vals(xp.arange(0.0, 1.0, 0.25)) == [0.0, 0.25, 0.5, 0.75]
    for dt in (xp.int8, xp.uint16, xp.float64, xp.float32):
        r = xp.arange(1, 7, 2, dtype=dt)
        assert r.dtype == dt and _vals(r) == [1, 3, 5]
    assert xp.arange(0, 5, step=2).shape == (3,)
    assert xp.arange(3, device=xp.asarray(0).device).shape == (3,)


# ---- asarray -----------------------------------------------------------------------------------

def test_asarray_infers_default_dtypes():
    assert xp.asarray(True).dtype == xp.bool
    assert xp.asarray([True, False]).dtype == xp.bool
    assert xp.asarray(3).dtype == DEFAULT_INT
    assert xp.asarray([True, 1]).dtype == DEFAULT_INT  # bool and int mix -> default int
    assert xp.asarray([1, 2.0]).dtype == DEFAULT_FLOAT
    assert xp.asarray(2.5).dtype == DEFAULT_FLOAT
    assert xp.asarray([1, 2j]).dtype == DEFAULT_COMPLEX
    assert xp.asarray([1.5, 2j]).dtype == DEFAULT_COMPLEX
    assert xp.asarray([[1, 2], [3, 4]]).shape == (2, 2)
    assert xp.asarray([]).shape == (0,)
    assert xp.asarray(7).shape == ()


def test_asarray_values_and_dtype_keyword():
    for dt in NUMERIC:
        r = xp.asarray([[0, 1], [2, 3]], dtype=dt)
        assert r.dtype == dt and _vals(r) == [[0, 1], [2, 3]]
    r = xp.asarray([1.5, -0.0, float("inf")], dtype=xp.float64)
    a = np.asarray(r)
    assert a[0] == 1.5 and math.copysign(1, a[1]) < 0 and a[2] == math.inf


def test_asarray_python_ints_in_range_of_dtype():
    # Python ints within the bounds of the requested dtype convert exactly.
    r = xp.asarray(2 ** 63, dtype=xp.uint64)
    assert r.dtype == xp.uint64 and int(r) == 2 ** 63
    r = xp.asarray([2 ** 64 - 1, 0], dtype=xp.uint64)
    assert np.asarray(r).tolist() == [2 ** 64 - 1, 0]
    assert int(xp.asarray(-2 ** 63, dtype=xp.int64)) == -2 ** 63
    assert int(xp.asarray(255, dtype=xp.uint8)) == 255


def test_asarray_of_arrays():
    x = xp.asarray([1.0, 2.0])
    assert _vals(xp.asarray(x)) == [1.0, 2.0]
    assert xp.asarray(x).dtype == x.dtype
    assert xp.asarray(x, dtype=xp.float64).dtype == xp.float64
    assert xp.asarray(x).device == x.device
    # nested sequences of 0-d arrays
    assert _vals(xp.asarray([xp.asarray(1.0), xp.asarray(2.0)])) == [1.0, 2.0]


def test_asarray_buffer_protocol():
    # obj may be "an object supporting the Python buffer protocol".
    buf = np.array([1, 2, 3], dtype=np.int16)
    r = xp.asarray(memoryview(buf))
    assert r.dtype == xp.int16 and _vals(r) == [1, 2, 3]
    r = xp.asarray(bytearray(b"\x01\x02"))
    assert r.dtype == xp.uint8 and _vals(r) == [1, 2]


def test_asarray_copy_semantics():
    x = xp.asarray([1.0, 2.0])
    # copy=False must never copy; when a copy is needed it must raise ValueError.
    assert _vals(xp.asarray(x, copy=False)) == [1.0, 2.0]
    with pytest.raises(ValueError):
        xp.asarray(x, dtype=xp.float64, copy=False)
    with pytest.raises(ValueError):
        xp.asarray([1, 2], copy=False)  # a list always needs a copy
    y = xp.asarray(x, copy=True)
    assert _vals(y) == [1.0, 2.0]
    # a copy of a NumPy buffer does not see later writes to the source
    src = np.array([1.0, 2.0])
    z = xp.asarray(src, copy=True)
    src[0] = 9.0
    assert _vals(z) == [1.0, 2.0]


# ---- empty / zeros / ones / full and the _like forms -------------------------------------------

@pytest.mark.parametrize("name", ["empty", "zeros", "ones"])
def test_filled_shapes_and_dtypes(name):
    fn = getattr(xp, name)
    assert fn(3).shape == (3,)
    assert fn((2, 0, 3)).shape == (2, 0, 3)
    assert fn(()).shape == ()
    assert fn((2,)).dtype == DEFAULT_FLOAT
    for dt in ALL_DTYPES:
        r = fn((2, 1), dtype=dt)
        assert r.dtype == dt and r.shape == (2, 1)
        if name != "empty":
            assert _vals(r) == ([[0], [0]] if name == "zeros" else [[1], [1]])
    assert fn((1,), device=xp.asarray(0).device).shape == (1,)


def test_full():
    assert xp.full((2,), True).dtype == xp.bool
    assert xp.full((2,), 3).dtype == DEFAULT_INT
    assert xp.full((2,), 3.5).dtype == DEFAULT_FLOAT
    assert xp.full((2,), 1j).dtype == DEFAULT_COMPLEX
    assert _vals(xp.full(3, 7)) == [7, 7, 7]
    r = xp.full((2, 2), -0.0, dtype=xp.float64)
    assert np.signbit(np.asarray(r)).all()
    for dt in NUMERIC:
        r = xp.full((1, 2), 1, dtype=dt)
        assert r.dtype == dt and _vals(r) == [[1, 1]]
    assert np.isnan(np.asarray(xp.full((2,), float("nan")))).all()


@pytest.mark.parametrize("name", ["empty_like", "zeros_like", "ones_like"])
def test_like_functions(name):
    fn = getattr(xp, name)
    for dt in ALL_DTYPES:
        x = xp.ones((2, 3), dtype=dt)
        r = fn(x)
        assert r.shape == (2, 3) and r.dtype == dt
        assert r.device == x.device
        if name == "zeros_like":
            assert not np.asarray(r).any()
        if name == "ones_like":
            assert (np.asarray(r) == 1).all()
    r = fn(xp.ones((0, 2)), dtype=xp.int8)
    assert r.shape == (0, 2) and r.dtype == xp.int8
    assert fn(xp.ones(()), device=xp.asarray(0).device).shape == ()


def test_full_like():
    x = xp.ones((2, 2), dtype=xp.int16)
    r = xp.full_like(x, 5)
    assert r.dtype == xp.int16 and _vals(r) == [[5, 5], [5, 5]]
    r = xp.full_like(x, 2.5, dtype=xp.float64)
    assert r.dtype == xp.float64 and _vals(r) == [[2.5, 2.5], [2.5, 2.5]]
    r = xp.full_like(xp.ones((3,), dtype=xp.bool), False)
    assert r.dtype == xp.bool and _vals(r) == [False] * 3
    r = xp.full_like(xp.ones((1,), dtype=xp.complex128), 1 - 2j)
    assert r.dtype == xp.complex128 and _vals(r) == [1 - 2j]


# ---- eye ---------------------------------------------------------------------------------------

@given(n=st.integers(0, 5), m=st.none() | st.integers(0, 5), k=st.integers(-6, 6))
def test_eye(n, m, k):
    r = xp.eye(n, m, k=k)
    cols = n if m is None else m
    assert r.shape == (n, cols) and r.dtype == DEFAULT_FLOAT
    np.testing.assert_array_equal(np.asarray(r), np.eye(n, cols, k=k))


def test_eye_dtypes():
    for dt in ALL_DTYPES:
        r = xp.eye(3, dtype=dt)
        assert r.dtype == dt
        np.testing.assert_array_equal(np.asarray(r), np.eye(3, dtype=dt))
    r = np.asarray(xp.eye(2, dtype=xp.complex64))
    assert r.tolist() == [[1 + 0j, 0j], [0j, 1 + 0j]]


# ---- linspace ----------------------------------------------------------------------------------

@given(start=st.floats(-100, 100), stop=st.floats(-100, 100), num=st.integers(0, 12),
       endpoint=st.booleans())
def test_linspace(start, stop, num, endpoint):
    r = xp.linspace(start, stop, num, endpoint=endpoint)
    assert r.dtype == DEFAULT_FLOAT and r.shape == (num,)
    if num:
        want = np.linspace(start, stop, num, endpoint=endpoint)
        np.testing.assert_allclose(np.asarray(r), want, rtol=1e-5, atol=1e-4)
        assert float(np.asarray(r)[0]) == pytest.approx(start, rel=1e-6, abs=1e-5)
        if endpoint and num > 1:
            assert float(np.asarray(r)[-1]) == pytest.approx(stop, rel=1e-6, abs=1e-5)


def test_linspace_dtypes_and_complex():
    assert xp.linspace(0, 1, 3).dtype == DEFAULT_FLOAT
    assert xp.linspace(0, 1j, 3).dtype == DEFAULT_COMPLEX
    r = xp.linspace(1 + 2j, 3 + 6j, 3)
    assert _vals(r) == [1 + 2j, 2 + 4j, 3 + 6j]
    for dt in REAL_FLOATS + COMPLEX_FLOATS:
        r = xp.linspace(0, 1, 5, dtype=dt)
        assert r.dtype == dt and _vals(r) == [0, 0.25, 0.5, 0.75, 1]
    r = xp.linspace(0, 1, 4, endpoint=False)
    assert _vals(r) == [0, 0.25, 0.5, 0.75]
    assert _vals(xp.linspace(2, 3, 1)) == [2.0]
    assert xp.linspace(0, 1, num=2, device=xp.asarray(0).device).shape == (2,)


# ---- meshgrid ----------------------------------------------------------------------------------

def test_meshgrid():
    a = xp.asarray([1, 2, 3])
    b = xp.asarray([4, 5])
    c = xp.asarray([6, 7, 8, 9])
    out = xp.meshgrid(a, b)
    assert isinstance(out, list) and len(out) == 2
    assert [o.shape for o in out] == [(2, 3), (2, 3)]
    assert _vals(out[0]) == [[1, 2, 3], [1, 2, 3]] and _vals(out[1]) == [[4, 4, 4], [5, 5, 5]]
    out = xp.meshgrid(a, b, indexing="ij")
    assert [o.shape for o in out] == [(3, 2), (3, 2)]
    assert _vals(out[0]) == [[1, 1], [2, 2], [3, 3]]
    assert [o.shape for o in xp.meshgrid(a, b, c)] == [(2, 3, 4)] * 3
    assert [o.shape for o in xp.meshgrid(a, b, c, indexing="ij")] == [(3, 2, 4)] * 3
    assert [o.dtype for o in xp.meshgrid(a, b)] == [a.dtype, a.dtype]
    # one vector: indexing has no effect
    assert [o.shape for o in xp.meshgrid(a, indexing="xy")] == [(3,)]
    assert [o.shape for o in xp.meshgrid(a, indexing="ij")] == [(3,)]
    assert xp.meshgrid() == [] or list(xp.meshgrid()) == []


# ---- tril / triu -------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["tril", "triu"])
@given(shape=st.sampled_from([(3, 3), (2, 4), (4, 2), (2, 3, 3), (0, 3), (1, 2, 0, 2)]),
       k=st.integers(-4, 4))
def test_tril_triu(name, shape, k):
    x = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape) + 1
    r = getattr(xp, name)(xp.asarray(x), k=k)
    assert r.shape == shape and r.dtype == xp.float32
    np.testing.assert_array_equal(np.asarray(r), getattr(np, name)(x, k=k))


# ---- from_dlpack -------------------------------------------------------------------------------

def test_from_dlpack():
    src = np.arange(6, dtype=np.float64).reshape(2, 3)
    r = xp.from_dlpack(src)
    assert r.shape == (2, 3) and r.dtype == xp.float64 and _vals(r) == src.tolist()
    x = xp.asarray([1, 2, 3], dtype=xp.int16)
    r = xp.from_dlpack(x)
    assert r.dtype == xp.int16 and _vals(r) == [1, 2, 3]
    r = xp.from_dlpack(x, device=x.device, copy=True)
    assert r.device == x.device and _vals(r) == [1, 2, 3]
    # a round trip through another library
    back = xp.from_dlpack(np.from_dlpack(x))
    assert _vals(back) == [1, 2, 3]


def test_from_dlpack_copy_false():
    # copy=False: never copy; when a copy would be needed, raise (ValueError per the Raises
    # section, BufferError per the copy parameter). Starling always owns its buffers, so a
    # foreign buffer needs a copy; its own arrays do not.
    src = np.arange(3.0)
    with pytest.raises((ValueError, BufferError)):
        xp.from_dlpack(src, copy=False)
    x = xp.asarray([1.0, 2.0])
    assert _vals(xp.from_dlpack(x, copy=False)) == [1.0, 2.0]
    r = xp.from_dlpack(src, copy=True)
    src[0] = 99.0
    assert _vals(r) == [0.0, 1.0, 2.0]


def test_from_dlpack_without_protocol_raises():
    with pytest.raises((AttributeError, TypeError)):
        xp.from_dlpack([1, 2, 3])


@pytest.mark.parametrize("dt", ALL_DTYPES, ids=dname)
def test_from_dlpack_dtypes(dt):
    x = xp.ones((2,), dtype=dt)
    r = xp.from_dlpack(x)
    assert r.dtype == dt and r.shape == (2,)
