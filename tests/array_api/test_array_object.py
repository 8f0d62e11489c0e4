"""The array object (Array API 2023.12): attributes, operators (arithmetic, comparison, bitwise,
array, in-place, reflected), conversion dunders, ``__array_namespace__``, ``to_device`` and DLPack.
"""
from __future__ import annotations

import math
import operator

import numpy as np
import pytest
from hypothesis import given, strategies as st
from hypothesis.extra import numpy as hnp

import starling.numpy as xp
from tests.array_api import (
    ALL_DTYPES, FLOATS, INTS, NUMERIC, REAL, REAL_FLOATS, dname,
)

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


# ---- attributes --------------------------------------------------------------------------------

@given(shape=hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=3),
       dt=st.sampled_from(ALL_DTYPES))
def test_attributes(shape, dt):
    x = xp.zeros(shape, dtype=dt)
    assert x.dtype == dt
    assert x.shape == shape and isinstance(x.shape, tuple)
    assert x.ndim == len(shape)
    assert x.size == math.prod(shape)
    assert x.device == xp.__array_namespace_info__().default_device()


def test_transposes():
    x = xp.asarray(np.arange(6).reshape(2, 3))
    assert x.T.shape == (3, 2)
    assert np.asarray(x.T).tolist() == [[0, 3], [1, 4], [2, 5]]
    assert x.T.dtype == x.dtype
    b = xp.asarray(np.arange(24).reshape(2, 3, 4), dtype=xp.float32)
    assert b.mT.shape == (2, 4, 3) and b.mT.dtype == xp.float32
    np.testing.assert_array_equal(np.asarray(b.mT), np.swapaxes(np.arange(24).reshape(2, 3, 4),
                                                                 -1, -2))
    with pytest.raises((ValueError, TypeError)):
        xp.asarray([1, 2, 3]).mT  # "If an array instance has fewer than two dimensions, an
        #                            error should be raised."


def test_T_on_other_ranks_follows_numpy():
    # The standard says T "should" raise for arrays that are not 2-d; Starling keeps NumPy's
    # meaning (reverse all axes, src/arrays/methods.py), which agrees with it on matrices.
    x = xp.ones((2, 3, 4))
    assert x.T.shape == (4, 3, 2)
    assert xp.ones((3,)).T.shape == (3,)


# ---- operators ---------------------------------------------------------------------------------
# (operator, namespace function, dtypes it accepts)
_ARITH = [
    (operator.add, "add", NUMERIC), (operator.sub, "subtract", NUMERIC),
    (operator.mul, "multiply", NUMERIC), (operator.truediv, "divide", FLOATS),
    (operator.floordiv, "floor_divide", REAL), (operator.mod, "remainder", REAL),
    (operator.pow, "pow", FLOATS),
    (operator.and_, "bitwise_and", INTS + (xp.bool,)),
    (operator.or_, "bitwise_or", INTS + (xp.bool,)),
    (operator.xor, "bitwise_xor", INTS + (xp.bool,)),
    (operator.lshift, "bitwise_left_shift", INTS), (operator.rshift, "bitwise_right_shift", INTS),
    (operator.eq, "equal", ALL_DTYPES), (operator.ne, "not_equal", ALL_DTYPES),
    (operator.lt, "less", REAL), (operator.le, "less_equal", REAL),
    (operator.gt, "greater", REAL), (operator.ge, "greater_equal", REAL),
]
_INPLACE = {operator.add: operator.iadd, operator.sub: operator.isub,
            operator.mul: operator.imul, operator.truediv: operator.itruediv,
            operator.floordiv: operator.ifloordiv, operator.mod: operator.imod,
            operator.pow: operator.ipow, operator.and_: operator.iand, operator.or_: operator.ior,
            operator.xor: operator.ixor, operator.lshift: operator.ilshift,
            operator.rshift: operator.irshift}


def _pair(dt):
    dt = np.dtype(dt)
    if dt == np.bool_:
        return [True, False, True], [True, True, False]
    if dt.kind == "u":
        return [5, 7, 2], [1, 3, 2]
    if dt.kind == "i":
        return [-5, 7, 2], [1, 3, 2]
    if dt.kind == "c":
        return [1 + 2j, -3 + 0.5j, 2j], [0.5 - 1j, 2 + 0j, 1 + 1j]
    return [-2.5, 7.0, 0.5], [1.5, -3.0, 2.0]


def _same(a, b):
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype and a.shape == b.shape
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("op,name,dts", _ARITH, ids=[a[1] for a in _ARITH])
def test_binary_operators_match_functions(op, name, dts):
    fn = getattr(xp, name)
    for dt in dts:
        a, b = _pair(dt)
        x1, x2 = xp.asarray(a, dtype=dt), xp.asarray(b, dtype=dt)
        _same(op(x1, x2), fn(x1, x2))
        # 0-d and broadcast operands
        _same(op(x1, x2[0]), fn(x1, x2[0]))
        _same(op(x1[:, None], x2), fn(x1[:, None], x2))
        if op in _INPLACE:
            y = xp.asarray(a, dtype=dt)
            y = _INPLACE[op](y, x2)  # "x1 op= x2 must equal x1 = x1 op x2"
            _same(y, fn(x1, x2))
            assert y.dtype == dt and y.shape == x1.shape


def test_reflected_operators_with_scalars():
    x = xp.asarray([1.0, 2.0, 4.0], dtype=xp.float64)
    cases = [(operator.add, 3), (operator.sub, 3), (operator.mul, 3), (operator.truediv, 3),
             (operator.floordiv, 3), (operator.mod, 3), (operator.pow, 2)]
    for op, s in cases:
        got = np.asarray(op(s, x))
        want = op(s, np.asarray(x))
        np.testing.assert_allclose(got, want, rtol=1e-15)
        assert op(s, x).dtype == xp.float64
    i = xp.asarray([1, 2, 3])
    for op in (operator.and_, operator.or_, operator.xor, operator.lshift, operator.rshift):
        _same(op(6, i), op(xp.asarray(6), i))
    b = xp.asarray([True, False])
    for op in (operator.and_, operator.or_, operator.xor):
        _same(op(True, b), op(xp.asarray(True), b))


def test_unary_operators():
    for dt in NUMERIC:
        a, _ = _pair(dt)
        x = xp.asarray(a, dtype=dt)
        _same(-x, xp.negative(x))
        _same(+x, xp.positive(x))
        _same(abs(x), xp.abs(x))
    for dt in INTS + (xp.bool,):
        a, _ = _pair(dt)
        x = xp.asarray(a, dtype=dt)
        _same(~x, xp.bitwise_invert(x))
    assert (~xp.asarray([True, False])).dtype == xp.bool


def test_matmul_operator():
    a = xp.asarray(np.arange(6.0).reshape(2, 3))
    b = xp.asarray(np.arange(12.0).reshape(3, 4))
    _same(a @ b, xp.matmul(a, b))
    v = xp.asarray([1.0, 2.0, 3.0])
    assert (v @ v).shape == () and float(v @ v) == 14.0
    assert (a @ v).shape == (2,)
    assert (v @ b).shape == (4,)
    c = a
    c @= xp.ones((3, 3))
    assert c.shape == (2, 3)
    with pytest.raises((ValueError, TypeError)):
        a @ a
    with pytest.raises((ValueError, TypeError)):
        xp.asarray(1.0) @ xp.asarray(1.0)  # operands must have at least one dimension


def test_inplace_with_scalars_keeps_dtype_and_shape():
    for dt in (xp.int8, xp.uint16, xp.float32, xp.complex64):
        x = xp.asarray([1, 2], dtype=dt)
        x += 1
        x *= 2
        x -= 1
        assert x.dtype == dt and np.asarray(x).tolist() == [3, 5]
    x = xp.asarray([1.0, 2.0], dtype=xp.float32)
    x /= 2
    x **= 2
    assert x.dtype == xp.float32 and np.asarray(x).tolist() == [0.25, 1.0]


def test_operators_reject_non_arrays():
    x = xp.asarray([1, 2])
    for op in (operator.add, operator.mul, operator.lt, operator.and_):
        with pytest.raises(TypeError):
            op(x, "a")
        with pytest.raises(TypeError):
            op(x, object())


# ---- indexing dunders --------------------------------------------------------------------------

def test_getitem_and_immutable_setitem():
    x = xp.asarray([[1, 2], [3, 4]])
    assert np.asarray(x[1]).tolist() == [3, 4]
    # Starling arrays are immutable (like JAX); the standard allows libraries without in-place
    # mutation. __setitem__ raises and x.at[...] is the functional form.
    with pytest.raises(TypeError):
        x[0, 0] = 9
    y = x.at[0, 0].set(9)
    assert np.asarray(y).tolist() == [[9, 2], [3, 4]]
    assert np.asarray(x).tolist() == [[1, 2], [3, 4]]
    assert y.dtype == x.dtype


# ---- conversion to Python scalars --------------------------------------------------------------

def test_bool():
    assert bool(xp.asarray(True)) is True and bool(xp.asarray(False)) is False
    for v, want in ((float("nan"), True), (float("inf"), True), (-float("inf"), True),
                    (0.0, False), (-0.0, False), (2.5, True)):
        for dt in REAL_FLOATS:
            assert bool(xp.asarray(v, dtype=dt)) is want, (v, dname(dt))
    for v, want in ((0j, False), (complex(0, -0.0), False), (1j, True), (complex(1, 0), True),
                    (complex(float("nan"), 0), True)):
        assert bool(xp.asarray(v)) is want, v
    assert bool(xp.asarray(3)) is True and bool(xp.asarray(0, dtype=xp.uint8)) is False


def test_int():
    assert int(xp.asarray(True)) == 1 and int(xp.asarray(False)) == 0
    assert int(xp.asarray(-2.7)) == -2 and int(xp.asarray(2.7)) == 2  # the integer part
    assert int(xp.asarray(-0.0)) == 0
    assert int(xp.asarray(-7, dtype=xp.int8)) == -7
    assert int(xp.asarray(np.array(2 ** 63, dtype=np.uint64))) == 2 ** 63
    with pytest.raises(OverflowError):
        int(xp.asarray(float("inf")))
    with pytest.raises(OverflowError):
        int(xp.asarray(-float("inf")))
    with pytest.raises(ValueError):
        int(xp.asarray(float("nan")))
    with pytest.raises(TypeError):
        int(xp.asarray(1 + 1j))


def test_float():
    assert float(xp.asarray(True)) == 1.0 and float(xp.asarray(False)) == 0.0
    assert float(xp.asarray(3, dtype=xp.int16)) == 3.0
    r = float(xp.asarray(-0.0))
    assert r == 0.0 and math.copysign(1, r) < 0
    assert math.isnan(float(xp.asarray(float("nan"))))
    assert isinstance(float(xp.asarray(1.5)), float)
    with pytest.raises(TypeError):
        float(xp.asarray(1 + 1j))


def test_complex():
    assert complex(xp.asarray(True)) == 1 + 0j and complex(xp.asarray(False)) == 0j
    assert complex(xp.asarray(float("inf"))) == complex(math.inf, 0)
    assert complex(xp.asarray(-float("inf"))) == complex(-math.inf, 0)
    assert complex(xp.asarray(2.5)) == 2.5 + 0j
    assert complex(xp.asarray(1 - 2j)) == 1 - 2j
    r = complex(xp.asarray(float("nan")))
    assert math.isnan(r.real) and math.isnan(r.imag), r  # "the result is NaN + NaN j"


def test_index():
    for dt in INTS:
        assert operator.index(xp.asarray(3, dtype=dt)) == 3
    assert [10, 20, 30][xp.asarray(1)] == 20
    for dt in FLOATS:
        with pytest.raises(TypeError):
            operator.index(xp.asarray(1, dtype=dt))


@pytest.mark.parametrize("conv", [bool, int, float, complex])
def test_scalar_conversion_of_arrays_with_many_elements_raises(conv):
    with pytest.raises((TypeError, ValueError)):
        conv(xp.asarray([1, 2]))


# ---- namespace, device, DLPack -----------------------------------------------------------------

def test_array_namespace():
    x = xp.asarray([1.0])
    assert x.__array_namespace__() is xp
    assert x.__array_namespace__(api_version=None) is xp
    assert x.__array_namespace__(api_version="2023.12") is xp
    with pytest.raises(ValueError):
        x.__array_namespace__(api_version="1999.01")
    assert xp.__array_api_version__ == "2024.12"


def test_to_device():
    info = xp.__array_namespace_info__()
    x = xp.asarray([1.0, 2.0])
    for dev in info.devices():
        y = x.to_device(dev)
        assert y.device == dev and y.dtype == x.dtype
        assert np.asarray(y).tolist() == [1.0, 2.0]
    y = x.to_device(x.device, stream=None)
    assert y.device == x.device


def test_device_keywords_accept_array_devices():
    x = xp.asarray([1, 2])
    dev = x.device
    assert xp.asarray([1], device=dev).device == dev
    assert xp.zeros((1,), device=dev).device == dev
    assert xp.empty_like(x, device=dev).device == dev
    assert xp.zeros_like(x).device == x.device  # inferred from x


@pytest.mark.parametrize("dt", ALL_DTYPES, ids=dname)
def test_dlpack_round_trip(dt):
    x = xp.asarray([0, 1, 1], dtype=dt)
    dev = x.__dlpack_device__()
    assert isinstance(dev, tuple) and len(dev) == 2 and int(dev[0]) == 1  # kDLCPU
    y = np.from_dlpack(x)
    assert y.dtype == np.dtype(dt) and y.tolist() == np.asarray(x).tolist()
    z = xp.from_dlpack(x)
    assert z.dtype == dt and np.asarray(z).tolist() == np.asarray(x).tolist()


def test_dlpack_keywords():
    x = xp.asarray([1.0, 2.0])
    for kw in ({}, {"stream": None}, {"max_version": (1, 0)}, {"copy": True}, {"copy": False},
               {"dl_device": x.__dlpack_device__()}):
        cap = x.__dlpack__(**kw)
        assert type(cap).__name__ == "PyCapsule"
    with pytest.raises(BufferError):  # a device this producer cannot handle
        x.__dlpack__(dl_device=(2, 0))
