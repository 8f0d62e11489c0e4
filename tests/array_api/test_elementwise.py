"""Elementwise functions (Array API 2023.12): dtypes of results, broadcasting, values.

Every elementwise function of the standard is run (hypothesis) on arrays of each dtype the
standard says it should accept, with small broadcast-compatible shapes (size-0 dims included),
and compared with the same computation in NumPy. The special cases live in
test_special_cases_real.py / test_special_cases_complex.py.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from hypothesis.extra import numpy as hnp

import starling.numpy as xp
from tests.array_api import (
    BOOL, COMPLEX_FLOATS, DEFAULT_FLOAT, FLOATS, INTS, NUMERIC, REAL, REAL_FLOATS, REAL_OF,
    SIGNED_INTS, dname, tol,
)

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

INT_AND_BOOL = INTS + BOOL
ALL = BOOL + NUMERIC

# ---- how each function is called, what it accepts, what it returns ---------------------------
# result: "same" (the input dtype / the promoted dtype), "bool", "real" (real dtype of a complex)
# domain: "any", "pos" (> 0), "unit" ([-1, 1]), "ge1" (>= 1), "gtm1" (> -1), "open_unit"
UNARY = {
    "abs": (NUMERIC, "absreal", np.abs, "any"),
    "acos": (FLOATS, "same", np.arccos, "unit"),
    "acosh": (FLOATS, "same", np.arccosh, "ge1"),
    "asin": (FLOATS, "same", np.arcsin, "unit"),
    "asinh": (FLOATS, "same", np.arcsinh, "any"),
    "atan": (FLOATS, "same", np.arctan, "any"),
    "atanh": (FLOATS, "same", np.arctanh, "open_unit"),
    "bitwise_invert": (INT_AND_BOOL, "same", np.invert, "any"),
    "ceil": (REAL, "same", np.ceil, "any"),
    "conj": (COMPLEX_FLOATS, "same", np.conj, "any"),
    "cos": (FLOATS, "same", np.cos, "any"),
    "cosh": (FLOATS, "same", np.cosh, "any"),
    "exp": (FLOATS, "same", np.exp, "any"),
    "expm1": (FLOATS, "same", np.expm1, "any"),
    "floor": (REAL, "same", np.floor, "any"),
    "imag": (COMPLEX_FLOATS, "real", np.imag, "any"),
    "isfinite": (NUMERIC, "bool", np.isfinite, "any"),
    "isinf": (NUMERIC, "bool", np.isinf, "any"),
    "isnan": (NUMERIC, "bool", np.isnan, "any"),
    "log": (FLOATS, "same", np.log, "pos"),
    "log1p": (FLOATS, "same", np.log1p, "gtm1"),
    "log2": (FLOATS, "same", np.log2, "pos"),
    "log10": (FLOATS, "same", np.log10, "pos"),
    "logical_not": (BOOL, "bool", np.logical_not, "any"),
    "negative": (NUMERIC, "same", np.negative, "any"),
    "positive": (NUMERIC, "same", np.positive, "any"),
    "real": (COMPLEX_FLOATS, "real", np.real, "any"),
    "round": (NUMERIC, "same", np.round, "any"),
    "sign": (NUMERIC, "same", np.sign, "any"),
    "signbit": (REAL_FLOATS, "bool", np.signbit, "any"),
    "sin": (FLOATS, "same", np.sin, "any"),
    "sinh": (FLOATS, "same", np.sinh, "any"),
    "sqrt": (FLOATS, "same", np.sqrt, "pos"),
    "square": (NUMERIC, "same", np.square, "any"),
    "tan": (FLOATS, "same", np.tan, "any"),
    "tanh": (FLOATS, "same", np.tanh, "any"),
    "trunc": (REAL, "same", np.trunc, "any"),
}

BINARY = {
    "add": (NUMERIC, "same", np.add, "any"),
    "atan2": (REAL_FLOATS, "same", np.arctan2, "any"),
    "bitwise_and": (INT_AND_BOOL, "same", np.bitwise_and, "any"),
    "bitwise_left_shift": (INTS, "same", np.left_shift, "shift"),
    "bitwise_or": (INT_AND_BOOL, "same", np.bitwise_or, "any"),
    "bitwise_right_shift": (INTS, "same", np.right_shift, "shift"),
    "bitwise_xor": (INT_AND_BOOL, "same", np.bitwise_xor, "any"),
    "copysign": (REAL_FLOATS, "same", np.copysign, "any"),
    "divide": (FLOATS, "same", np.divide, "nonzero"),
    "equal": (ALL, "bool", np.equal, "any"),
    "floor_divide": (REAL, "same", np.floor_divide, "nonzero"),
    "greater": (REAL, "bool", np.greater, "any"),
    "greater_equal": (REAL, "bool", np.greater_equal, "any"),
    "hypot": (REAL_FLOATS, "same", np.hypot, "any"),
    "less": (REAL, "bool", np.less, "any"),
    "less_equal": (REAL, "bool", np.less_equal, "any"),
    "logaddexp": (REAL_FLOATS, "same", np.logaddexp, "any"),
    "logical_and": (BOOL, "bool", np.logical_and, "any"),
    "logical_or": (BOOL, "bool", np.logical_or, "any"),
    "logical_xor": (BOOL, "bool", np.logical_xor, "any"),
    "maximum": (REAL, "same", np.maximum, "any"),
    "minimum": (REAL, "same", np.minimum, "any"),
    "multiply": (NUMERIC, "same", np.multiply, "small"),
    "not_equal": (ALL, "bool", np.not_equal, "any"),
    "pow": (NUMERIC, "same", np.power, "pow"),
    "remainder": (REAL, "same", np.remainder, "nonzero"),
    "subtract": (NUMERIC, "same", np.subtract, "any"),
}


def _float_bounds(domain):
    # bounds exactly representable in float32 (hypothesis insists)
    return {"any": (-5.0, 5.0), "pos": (0.015625, 50.0), "unit": (-1.0, 1.0), "ge1": (1.0, 50.0),
            "gtm1": (-0.984375, 50.0), "open_unit": (-0.984375, 0.984375),
            "nonzero": (-5.0, 5.0), "small": (-5.0, 5.0), "pow": (0.125, 4.0),
            "shift": (-5.0, 5.0)}[domain]


def _elements(dt, domain, second=False):
    """Hypothesis elements of dtype ``dt`` inside the function's domain (no overflow for ints:
    integer overflow is implementation-defined)."""
    dt = np.dtype(dt)
    if dt == np.bool_:
        return st.booleans()
    if dt.kind in "iu":
        info = np.iinfo(dt)
        lo = 0 if dt.kind == "u" else -10
        if domain == "shift" and second:
            return st.integers(0, info.bits - 1)
        if domain == "pow" and second:
            return st.integers(0, 3)
        if domain == "pow":
            return st.integers(max(lo, -4), 4)
        if domain == "nonzero" and second:
            return st.integers(lo, 10).filter(bool)
        if domain in ("small", "any") and dt.itemsize == 1:
            return st.integers(lo, 10)
        return st.integers(max(info.min, -1000), min(info.max, 1000))
    lo, hi = _float_bounds(domain)
    width = 32 if dt in (np.dtype(np.float32), np.dtype(np.complex64)) else 64
    real = st.floats(lo, hi, width=width)
    if domain == "nonzero" and second:
        real = real.filter(lambda v: abs(v) > 0.05)
    if dt.kind == "c":
        if domain in ("pos", "unit", "ge1", "gtm1", "open_unit", "pow"):
            # stay off the branch cuts on the real axis
            return st.builds(complex, st.floats(0.125, 3.0, width=width),
                             st.floats(0.125, 3.0, width=width))
        return st.builds(complex, real, real)
    return real


def _arrays(dt, shape, domain, second=False):
    return hnp.arrays(np.dtype(dt), shape, elements=_elements(dt, domain, second))


def _result_dtype(kind, dt):
    if kind == "bool":
        return np.dtype(np.bool_)
    if kind == "real":
        return np.dtype(REAL_OF[dt])
    if kind == "absreal":
        return np.dtype(REAL_OF.get(dt, dt))
    return np.dtype(dt)


# Integer results that can leave the dtype's range: overflow is implementation-defined, so only
# in-range results are compared (the exact value is computed with Python ints).
_EXACT = {"add": lambda a, b: a + b, "subtract": lambda a, b: a - b,
          "multiply": lambda a, b: a * b, "pow": lambda a, b: a ** b,
          "bitwise_left_shift": lambda a, b: a << b, "negative": lambda a: -a,
          "square": lambda a: a * a, "abs": abs}


def _in_range_mask(name, dt, arrays, shape):
    dt = np.dtype(dt)
    if name not in _EXACT or dt.kind not in "iu":
        return None
    info = np.iinfo(dt)
    f = np.vectorize(lambda *v: info.min <= _EXACT[name](*map(int, v)) <= info.max,
                     otypes=[bool])
    return np.broadcast_to(f(*arrays) if all(a.size for a in arrays) else np.ones(shape, bool),
                           shape)


def _check_values(name, got, want, dt, mask=None):
    g = np.asarray(got)
    assert g.shape == want.shape, f"{name}: shape {g.shape} != {want.shape}"
    if mask is not None:
        g, want = g[mask], want[mask]
    if want.dtype.kind in "fc":
        np.testing.assert_allclose(g, want.astype(g.dtype), rtol=tol(dt), atol=tol(dt),
                                   equal_nan=True, err_msg=name)
    else:
        np.testing.assert_array_equal(g, want, err_msg=name)


def _np_ref(fn, name, *arrays):
    with np.errstate(all="ignore"):
        if name in ("ceil", "floor", "trunc", "round") and arrays[0].dtype.kind in "iub":
            return arrays[0].copy()
        if name == "round":
            return np.round(arrays[0])
        return np.asarray(fn(*arrays))


# 64 functions: a few examples each keep the file within its share of the time budget.
_FEW = settings(max_examples=10)


@pytest.mark.parametrize("name", sorted(UNARY))
@_FEW
@given(data=st.data())
def test_unary(name, data):
    dtypes, kind, ref, domain = UNARY[name]
    dt = data.draw(st.sampled_from(dtypes), label="dtype")
    shape = data.draw(hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4),
                      label="shape")
    x = data.draw(_arrays(dt, shape, domain), label="x")
    r = getattr(xp, name)(xp.asarray(x))
    assert r.dtype == _result_dtype(kind, dt), f"{name}({dname(dt)}) -> {r.dtype}"
    assert r.shape == x.shape
    _check_values(name, r, _np_ref(ref, name, x), dt, _in_range_mask(name, dt, (x,), x.shape))


@pytest.mark.parametrize("name", sorted(BINARY))
@_FEW
@given(data=st.data())
def test_binary(name, data):
    dtypes, kind, ref, domain = BINARY[name]
    dt = data.draw(st.sampled_from(dtypes), label="dtype")
    shapes = data.draw(hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=3,
                                                         min_side=0, max_side=3),
                       label="shapes")
    s1, s2 = shapes.input_shapes
    x1 = data.draw(_arrays(dt, s1, domain), label="x1")
    x2 = data.draw(_arrays(dt, s2, domain, second=True), label="x2")
    r = getattr(xp, name)(xp.asarray(x1), xp.asarray(x2))
    assert r.dtype == _result_dtype(kind, dt), f"{name}({dname(dt)}) -> {r.dtype}"
    assert r.shape == shapes.result_shape
    _check_values(name, r, _np_ref(ref, name, x1, x2), dt,
                  _in_range_mask(name, dt, (x1, x2), shapes.result_shape))


# ---- things the table above cannot say ----------------------------------------------------------

@pytest.mark.parametrize("dt", INTS, ids=dname)
def test_integer_division_floors_and_remainder_has_divisor_sign(dt):
    info = np.iinfo(dt)
    lo = 0 if info.min == 0 else -7
    a = np.array([v for v in range(lo, 8) for _ in range(4)], dtype=dt)
    b = np.array([d for _ in range(lo, 8) for d in ((1, 2, 3, 5) if lo == 0 else (2, -3, 5, -1))],
                 dtype=dt)
    q = np.asarray(xp.floor_divide(xp.asarray(a), xp.asarray(b)))
    r = np.asarray(xp.remainder(xp.asarray(a), xp.asarray(b)))
    assert q.tolist() == [int(x) // int(y) for x, y in zip(a, b)]
    assert r.tolist() == [int(x) % int(y) for x, y in zip(a, b)]


@pytest.mark.parametrize("dt", SIGNED_INTS, ids=dname)
def test_right_shift_is_arithmetic_for_signed(dt):
    x = xp.asarray([-8, -1, 7], dtype=dt)
    s = xp.asarray([1, 3, 1], dtype=dt)
    assert np.asarray(xp.bitwise_right_shift(x, s)).tolist() == [-4, -1, 3]
    assert np.asarray(xp.bitwise_left_shift(x, s)).tolist() == [-16, -8, 14]


def test_bool_bitwise_ops_are_logical():
    t = xp.asarray([True, True, False, False])
    f = xp.asarray([True, False, True, False])
    assert np.asarray(xp.bitwise_and(t, f)).tolist() == [True, False, False, False]
    assert np.asarray(xp.bitwise_or(t, f)).tolist() == [True, True, True, False]
    assert np.asarray(xp.bitwise_xor(t, f)).tolist() == [False, True, True, False]
    r = xp.bitwise_invert(t)
    assert r.dtype == xp.bool and np.asarray(r).tolist() == [False, False, True, True]


@pytest.mark.parametrize("dt", REAL_FLOATS, ids=dname)
def test_remainder_sign_follows_divisor(dt):
    # "Each element-wise result must have the same sign as the respective element x2_i."
    a = xp.asarray([5.5, -5.5, 5.5, -5.5, 1e-3], dtype=dt)
    b = xp.asarray([2.0, 2.0, -2.0, -2.0, -7.0], dtype=dt)
    r = np.asarray(xp.remainder(a, b))
    assert (np.sign(r) == np.sign(np.asarray(b))).all(), r
    np.testing.assert_allclose(r, [1.5, 0.5, -0.5, -1.5, -6.999], rtol=1e-6)


def test_clip():
    x = xp.asarray([-3.0, -1.0, 0.0, 1.0, 3.0])
    assert np.asarray(xp.clip(x, -1.5, 2.0)).tolist() == [-1.5, -1.0, 0.0, 1.0, 2.0]
    assert np.asarray(xp.clip(x, min=0.5)).tolist() == [0.5, 0.5, 0.5, 1.0, 3.0]
    assert np.asarray(xp.clip(x, max=0.5)).tolist() == [-3.0, -1.0, 0.0, 0.5, 0.5]
    # both None: the elements of x, same dtype
    r = xp.clip(x)
    assert r.dtype == x.dtype and np.asarray(r).tolist() == np.asarray(x).tolist()
    # array bounds broadcast against x; the result keeps x's dtype
    lo = xp.asarray([[0.0], [-2.0]])
    r = xp.clip(x, lo, xp.asarray(2.5))
    assert r.shape == (2, 5) and r.dtype == xp.float32
    assert np.asarray(r).tolist() == [[0.0, 0.0, 0.0, 1.0, 2.5], [-2.0, -1.0, 0.0, 1.0, 2.5]]
    for dt in INTS:
        xi = xp.asarray([0, 5, 9], dtype=dt)
        r = xp.clip(xi, 2, 7)
        assert r.dtype == dt and np.asarray(r).tolist() == [2, 5, 7], dname(dt)


@pytest.mark.parametrize("name", ["sin", "exp", "sqrt", "log", "tanh", "acos"])
def test_float_functions_on_integers_give_default_float(name):
    # Implementation-defined by the standard; Starling promotes integers to its default float.
    r = getattr(xp, name)(xp.asarray([1, 2], dtype=xp.int32))
    assert r.dtype == DEFAULT_FLOAT


def test_divide_integers_gives_default_float():
    # "Specification-compliant libraries may choose to raise an error or return an array" of a
    # real-valued floating-point dtype; Starling returns its default float.
    r = xp.divide(xp.asarray([3, 4]), xp.asarray([2, 8]))
    assert r.dtype == DEFAULT_FLOAT
    assert np.asarray(r).tolist() == [1.5, 0.5]


def test_sign_integers_and_zero():
    for dt in SIGNED_INTS:
        r = xp.sign(xp.asarray([-5, 0, 7], dtype=dt))
        assert r.dtype == dt and np.asarray(r).tolist() == [-1, 0, 1]


def test_logaddexp_matches_log_of_sum():
    x1 = xp.asarray([0.0, 100.0, -100.0], dtype=xp.float64)
    x2 = xp.asarray([0.0, 100.0, -101.0], dtype=xp.float64)
    np.testing.assert_allclose(np.asarray(xp.logaddexp(x1, x2)),
                               [math.log(2), 100 + math.log(2), -100 + math.log1p(math.exp(-1))],
                               rtol=1e-14)


def test_broadcast_failure_raises():
    with pytest.raises((ValueError, TypeError)):
        xp.add(xp.ones((2, 3)), xp.ones((4,)))
