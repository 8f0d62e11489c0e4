"""Elementwise math built by composition (rsqrt, deg2rad, sinc, modf, angle, isclose, ...) and
the few remaining primitives with an unusual signature (frexp: two outputs; ldexp: an integer
exponent operand; gcd / lcm; i0).

Compositions use only public ops, so they trace, stage and differentiate through the rules of
the primitives they are made of.
"""
from __future__ import annotations

import math

import numpy as np

from ...core import dtypes
from ...core.avals import ShapedArray
from ...core.primitive import Primitive
from ..convert import operand
from .arithmetic import (
    _logical_and, _logical_not, _logical_or, abs, add, divide, equal, floor_divide, less_equal,
    multiply, pow, reciprocal, remainder, subtract,
)
from .convert_element_type import convert_element_type
from .elementwise_docs import binary_doc, unary_doc
from .elementwise_family import (
    Elementwise, _check_domain, binary, broadcast_shapes, promote_operands,
)
from .math_basic import (
    arctan2, copysign, imag, isfinite, isinf, isnan, real, signbit, sin, sqrt, trunc,
)
from .math_select import where

__all__ = [
    "rsqrt", "deg2rad", "radians", "rad2deg", "degrees", "fabs", "isneginf", "isposinf", "angle",
    "sinc", "i0", "float_power", "gcd", "lcm", "divmod", "modf", "frexp", "ldexp", "isclose",
]


def _floats(op, x, domain="inexact"):
    return promote_operands(op, (x,), domain)[0]


def rsqrt(x, /):
    return reciprocal(sqrt(x))


rsqrt.__doc__ = unary_doc("Elementwise ``1 / sqrt(x)`` (composition: reciprocal of sqrt).",
                          "inexact", notes="``rsqrt(0) == inf``; negative real input gives nan.")

_D2R = math.pi / 180.0
_R2D = 180.0 / math.pi


def deg2rad(x, /):
    return multiply(_floats("deg2rad", x, "real_inexact"), _D2R)


def rad2deg(x, /):
    return multiply(_floats("rad2deg", x, "real_inexact"), _R2D)


deg2rad.__doc__ = unary_doc("Elementwise degrees to radians: ``x * (pi / 180)``.", "real_inexact",
                            notes="The factor is rounded to the dtype. Alias: ``radians``.")
rad2deg.__doc__ = unary_doc("Elementwise radians to degrees: ``x * (180 / pi)``.", "real_inexact",
                            notes="The factor is rounded to the dtype. Alias: ``degrees``.")
radians, degrees = deg2rad, rad2deg


def fabs(x, /):
    return abs(_floats("fabs", x, "real_inexact"))


fabs.__doc__ = unary_doc("Elementwise absolute value of real numbers, as floats.", "real_inexact")


def isneginf(x, /):
    x = operand(x, "isneginf")
    _check_domain("isneginf", x.dtype, "real")
    return _logical_and(isinf(x), signbit(x))


def isposinf(x, /):
    x = operand(x, "isposinf")
    _check_domain("isposinf", x.dtype, "real")
    return _logical_and(isinf(x), _logical_not(signbit(x)))


isneginf.__doc__ = unary_doc("Elementwise test for -inf.", "real", "bool")
isposinf.__doc__ = unary_doc("Elementwise test for +inf.", "real", "bool")


def angle(z, /, deg=False):
    """Elementwise argument (phase angle) of complex numbers: ``arctan2(imag(z), real(z))``.

    Args:
        z: array of shape ``(*shape)``; any numeric dtype (bool / integers become float32).
        deg: static bool: degrees instead of radians.
    Returns:
        Array of shape ``(*shape)``, in ``[-pi, pi]``: the real dtype of ``z`` (float32 for
        bool / integer input, as in JAX; NumPy gives float64). Real input gives 0 or pi
        (pi for negative numbers and -0.0).
    """
    z = _floats("angle", z)
    a = arctan2(imag(z), real(z))
    return multiply(a, _R2D) if deg else a


def sinc(x, /):
    """Elementwise normalized sinc: ``sin(pi x) / (pi x)``, with ``sinc(0) == 1``.

    Args:
        x: array of shape ``(*shape)``; any numeric dtype (bool / integers become float32).
    Returns:
        Array of shape ``(*shape)`` and the (float) dtype of ``x``; complex input is supported.

    Composition: the divisor is made nonzero where ``x == 0`` before dividing, so that
    derivatives at 0 stay finite (the "double where" pattern).
    """
    x = _floats("sinc", x)
    zero = equal(x, 0)
    y = multiply(where(zero, 1, x), math.pi)
    return where(zero, 1, divide(sin(y), y))


def _i0_impl(x):
    return np.asarray(np.i0(x)).astype(x.dtype)


i0 = Elementwise("i0", _i0_impl, 1, domain="real_inexact", low_precision_in_float32=True,
                 doc=unary_doc(
                     "Elementwise modified Bessel function of the first kind, order 0.",
                     "real_inexact",
                     notes="Reference implementation: NumPy's ``i0`` (Clenshaw's Chebyshev "
                           "series, Cephes). Overflows to inf for ``|x| > ~89`` in float32.")
                 ).wrapper


def float_power(x1, x2, /):
    """Elementwise ``x1 ** x2`` computed in float64 (complex128 for complex operands).

    Args:
        x1, x2: arrays or Python scalars whose shapes broadcast to ``(*shape)``; any dtype.
    Returns:
        Array of shape ``(*shape)``, float64 or complex128 (NumPy's ``float_power``: the
        point of the function is double precision, so Starling keeps NumPy's dtype rather
        than JAX's promotion). Negative integer exponents are fine.
    Raises:
        ValueError: shapes do not broadcast. TypeError: no promotion between the dtypes.
    """
    a, b = promote_operands("float_power", (x1, x2))
    target = dtypes.complex128 if dtypes.is_complex(a.dtype) else dtypes.float64
    return pow(convert_element_type(a, target, False), convert_element_type(b, target, False))


gcd = binary("gcd", np.gcd, domain="int_only", doc=binary_doc(
    "Elementwise greatest common divisor of ``|x1|`` and ``|x2|`` (``gcd(0, 0) == 0``).",
    "int_only", notes="Results that do not fit the dtype wrap (``gcd(int8(-128), 0) == -128``)."))
lcm = binary("lcm", np.lcm, domain="int_only", doc=binary_doc(
    "Elementwise least common multiple of ``|x1|`` and ``|x2|`` (0 if either is 0).",
    "int_only", notes="Integer overflow wraps."))


def divmod(x1, x2, /):  # noqa: A001  (NumPy's name)
    a, b = promote_operands("divmod", (x1, x2), "real_num")
    broadcast_shapes("divmod", a.shape, b.shape)
    return floor_divide.primitive.bind(a, b), remainder.primitive.bind(a, b)


divmod.__doc__ = binary_doc(
    "Elementwise ``(floor_divide(x1, x2), remainder(x1, x2))``.", "real_num",
    notes="Returns a tuple of two arrays. Integer division by zero gives (0, 0) (NumPy).")


def modf(x, /):
    """Elementwise fractional and integral parts, both with the sign of ``x``.

    Args:
        x: array of shape ``(*shape)``; real dtype (bool / integers become float32).
    Returns:
        Tuple ``(fractional, integral)`` of arrays of shape ``(*shape)`` and the (float) dtype of
        ``x``: ``modf(-2.5) == (-0.5, -2.0)``, ``modf(inf) == (0.0, inf)``, ``modf(-2.0) ==
        (-0.0, -2.0)``.
    Raises:
        TypeError: complex input.
    """
    x = _floats("modf", x, "real_inexact")
    integral = trunc(x)
    frac = copysign(where(isinf(x), 0, subtract(x, integral)), x)
    return frac, integral


# ---- frexp / ldexp -----------------------------------------------------------------------------

frexp_p = Primitive("frexp", multiple_results=True, family="elementwise")


def _frexp_impl(x):
    m, e = np.frexp(x)
    return [np.asarray(m).astype(x.dtype), np.asarray(e).astype(np.int32)]


frexp_p.impl = _frexp_impl
frexp_p.abstract_eval = lambda x: [x, ShapedArray(x.shape, dtypes.int32, False)]
frexp_p.weak_type = lambda w: [w, False]
frexp_p.meta.update(nin=1, domain="real_inexact", numpy_impl=_frexp_impl)


def frexp(x, /):
    """Elementwise decomposition ``x == mantissa * 2 ** exponent``.

    Args:
        x: array of shape ``(*shape)``; real dtype (bool / integers become float32).
    Returns:
        Tuple ``(mantissa, exponent)`` of shape ``(*shape)``: the mantissa in the dtype of ``x``
        with ``0.5 <= |mantissa| < 1`` (0, inf and nan are returned as is, exponent 0), the
        exponent int32.
    Raises:
        TypeError: complex input.
    """
    return tuple(frexp_p.bind(_floats("frexp", x, "real_inexact")))


frexp.primitive = frexp_p
ldexp_p = Primitive("ldexp", family="elementwise")


def _ldexp_impl(x1, x2):
    if x2.dtype == np.uint64:
        x2 = np.minimum(x2, np.uint64(2 ** 31))
    out = np.ldexp(x1, np.asarray(x2).astype(np.int64))
    return out if out.dtype == x1.dtype else np.asarray(out).astype(x1.dtype)


def _ldexp_abstract_eval(x1, x2):
    return ShapedArray(broadcast_shapes("ldexp", x1.shape, x2.shape), x1.dtype, x1.weak_type)


ldexp_p.impl = _ldexp_impl
ldexp_p.abstract_eval = _ldexp_abstract_eval
ldexp_p.weak_type = lambda w1, w2: w1
ldexp_p.meta.update(nin=2, domain="real_inexact", numpy_impl=_ldexp_impl)


def ldexp(x1, x2, /):
    """Elementwise ``x1 * 2 ** x2``, exactly (no intermediate overflow of ``2 ** x2``).

    Args:
        x1: array or Python scalar; real dtype (bool / integers become float32).
        x2: array or Python int of a bool or integer dtype (the exponent); shapes broadcast
            with ``x1`` to ``(*shape)``.
    Returns:
        Array of shape ``(*shape)`` and the (float) dtype of ``x1``.
    Raises:
        TypeError: ``x1`` is complex or ``x2`` is not an integer dtype.
        ValueError: shapes do not broadcast.
    """
    x1 = _floats("ldexp", x1, "real_inexact")
    x2 = operand(x2, "ldexp")
    if x2.dtype.kind not in "biu":
        raise TypeError(f"ldexp: the exponent x2 must have an integer dtype, got {x2.dtype}")
    broadcast_shapes("ldexp", x1.shape, x2.shape)
    return ldexp_p.bind(x1, x2)


ldexp.primitive = ldexp_p

# ---- isclose -----------------------------------------------------------------------------------


def isclose(a, b, /, rtol=1e-05, atol=1e-08, equal_nan=False):
    """Elementwise ``|a - b| <= atol + rtol * |b|`` for finite ``b``, or ``a == b``.

    Args:
        a, b: arrays or Python scalars whose shapes broadcast to ``(*shape)``; any numeric dtype
            (promoted together; bool / integers become float32).
        rtol, atol: relative and absolute tolerances (scalars or broadcastable arrays); computed
            in the promoted dtype, so ``atol=1e-8`` is 0 in float16 (as in NumPy).
        equal_nan: static bool: treat nan as equal to nan.
    Returns:
        bool Array of shape ``(*shape)``. Not symmetric in ``a`` and ``b`` (NumPy's definition).
        Infinities are close only to the same infinity.
    Raises:
        ValueError: shapes do not broadcast. TypeError: no promotion between the dtypes.
    """
    a, b = promote_operands("isclose", (a, b), "inexact")
    broadcast_shapes("isclose", a.shape, b.shape)
    tol = add(atol, multiply(rtol, abs(b)))
    out = _logical_or(_logical_and(isfinite(b), less_equal(abs(subtract(a, b)), tol)),
                      equal(a, b))
    if equal_nan:
        out = _logical_or(out, _logical_and(isnan(a), isnan(b)))
    return out
