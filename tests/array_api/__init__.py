"""Array API standard (2023.12) conformance tests for ``starling.numpy``.

Written from the text of the standard (the specification pages and the signatures of its stubs),
one file per section. Where the standard leaves a choice to the implementation, the tests check
Starling's documented choice instead:

- default dtypes: float32 (real floating), complex64, int64 (integral and indexing);
- mixed-kind promotion (int with float, Python float with an int array, ...) follows the JAX
  lattice documented in src/core/dtypes.py;
- arrays are immutable: ``__setitem__`` raises TypeError (use ``x.at[idx].set(v)``).

This module holds the helpers the test files share.
"""
from __future__ import annotations

import math

import numpy as np

import starling.numpy as xp

NAN = float("nan")
INF = float("inf")
NINF = float("-inf")
PI = math.pi

BOOL = (xp.bool,)
SIGNED_INTS = (xp.int8, xp.int16, xp.int32, xp.int64)
UNSIGNED_INTS = (xp.uint8, xp.uint16, xp.uint32, xp.uint64)
INTS = SIGNED_INTS + UNSIGNED_INTS
REAL_FLOATS = (xp.float32, xp.float64)
COMPLEX_FLOATS = (xp.complex64, xp.complex128)
FLOATS = REAL_FLOATS + COMPLEX_FLOATS
REAL = INTS + REAL_FLOATS
NUMERIC = INTS + FLOATS
ALL_DTYPES = BOOL + NUMERIC

# Starling's documented defaults (the standard lets the implementation choose).
DEFAULT_FLOAT = xp.float32
DEFAULT_COMPLEX = xp.complex64
DEFAULT_INT = xp.int64
DEFAULT_INDEX = xp.int64

REAL_OF = {xp.complex64: xp.float32, xp.complex128: xp.float64}
COMPLEX_OF = {xp.float32: xp.complex64, xp.float64: xp.complex128}


def dname(dt) -> str:
    return np.dtype(dt).name


def A(values, dtype=None):
    """A Starling array from Python values through the standard's ``asarray``."""
    if dtype is None:
        return xp.asarray(values)
    return xp.asarray(values, dtype=dtype)


def N(x) -> np.ndarray:
    """The NumPy copy of a Starling array (for comparisons)."""
    return np.asarray(x)


def scalar(x):
    """The single element of a Starling array as a NumPy scalar."""
    a = N(x)
    assert a.size == 1, a.shape
    return a.reshape(())[()]


def same_float(got, want) -> bool:
    """Exact equality of two real floats where NaN equals NaN and -0 differs from +0."""
    got, want = float(got), float(want)
    if math.isnan(want):
        return math.isnan(got)
    if want == 0.0:
        return got == 0.0 and math.copysign(1.0, got) == math.copysign(1.0, want)
    return got == want


def assert_same(got, want, *, rtol=0.0, atol=0.0, msg=""):
    """Compares a Starling array to a NumPy array: shape, NaN positions, signed zeros, values."""
    g = N(got)
    w = np.asarray(want)
    assert g.shape == w.shape, f"{msg} shape {g.shape} != {w.shape}"
    if w.dtype.kind in "fc" or g.dtype.kind in "fc":
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, equal_nan=True, err_msg=msg)
    else:
        np.testing.assert_array_equal(g, w, err_msg=msg)


def tol(dtype) -> float:
    """A relative tolerance for transcendental results in ``dtype``."""
    dt = np.dtype(dtype)
    if dt in (np.dtype(np.float32), np.dtype(np.complex64)):
        return 2e-5
    return 1e-12


# ---- expected-value specifications for special cases ----------------------------------------

class Approx:
    """An implementation-dependent approximation to ``value``."""

    def __init__(self, value):
        self.value = float(value)

    def __repr__(self):
        return f"~{self.value:.6g}"

    def neg(self):
        return Approx(-self.value)

    def scale(self, c):
        return Approx(self.value * c)

    def matches(self, got, dtype) -> bool:
        got = float(got)
        return math.isfinite(got) and abs(got - self.value) <= 1e-5 * max(1.0, abs(self.value))


class AnySign:
    """``value`` with an unspecified sign (e.g. "0 + 0j, sign unspecified" or "±infinity")."""

    def __init__(self, value):
        self.value = value

    def __repr__(self):
        v = self.value
        return "+-" + (fmt(abs(v)).lstrip("+") if isinstance(v, float) else repr(v))

    def neg(self):
        return self

    def scale(self, c):
        v = self.value
        return AnySign(v.scale(c) if isinstance(v, Approx) else v * c)

    def matches(self, got, dtype) -> bool:
        v = self.value
        if isinstance(v, Approx):
            return v.matches(abs(float(got)), dtype)
        return float(abs(float(got))) == abs(v)


class OneOf:
    """Any of several allowed results (where the standard lets libraries follow Python)."""

    def __init__(self, *options):
        self.options = options

    def __repr__(self):
        return " or ".join(map(repr, self.options))

    def neg(self):
        return OneOf(*(neg_spec(o) for o in self.options))

    def scale(self, c):
        return OneOf(*(scale_spec(o, c) for o in self.options))

    def matches(self, got, dtype) -> bool:
        return any(matches(o, got, dtype) for o in self.options)


ANYZ = AnySign(0.0)
ANYINF = AnySign(INF)


def matches(spec, got, dtype=None) -> bool:
    """Whether a real component ``got`` satisfies the expected ``spec``."""
    if isinstance(spec, (Approx, AnySign, OneOf)):
        return spec.matches(got, dtype)
    if isinstance(spec, bool):
        return bool(got) is spec
    return same_float(got, spec)


def neg_spec(spec):
    if isinstance(spec, (Approx, AnySign, OneOf)):
        return spec.neg()
    return -spec


def scale_spec(spec, c):
    """The spec of ``value * c`` for a positive finite constant ``c``."""
    if isinstance(spec, (Approx, AnySign, OneOf)):
        return spec.scale(c)
    if math.isnan(spec) or math.isinf(spec) or spec == 0.0:
        return spec
    return Approx(spec * c)


def fmt(v) -> str:
    """Readable form of a real or complex special value (shows the sign of zeros)."""
    if isinstance(v, complex):
        return f"({fmt(v.real)}{'+' if not str(fmt(v.imag)).startswith('-') else ''}{fmt(v.imag)}j)"
    if isinstance(v, float):
        if v == 0.0:
            return "-0" if math.copysign(1.0, v) < 0 else "+0"
        if math.isnan(v):
            return "NaN"
        if math.isinf(v):
            return "+inf" if v > 0 else "-inf"
    return repr(v)


def cis(b: float, mag: float) -> tuple[float, float]:
    """Components of ``mag * cis(b)`` (``cos(b) + sin(b)j``) as the standard writes it."""
    return (mag * math.cos(b), mag * math.sin(b))
