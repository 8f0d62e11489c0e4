"""Elementwise math built by composition (rsqrt, deg2rad, sinc, modf, angle, isclose, ...) and
the few remaining primitives with an unusual signature (frexp: two outputs; ldexp: an integer
exponent operand; gcd / lcm; i0).

Compositions use only public ops, so they trace, stage and differentiate through the rules of
the primitives they are made of.
"""
from __future__ import annotations

import math

import numpy as np

from ...core import casting, dtypes, scalar as S
from ...core.avals import ShapedArray
from ...core.primitive import Primitive
from ..convert import operand
from .arithmetic import (
    _logical_and, _logical_not, _logical_or, abs, add, divide, equal, floor_divide, less,
    less_equal, multiply, negative, pow, reciprocal, remainder, subtract,
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
from . import rules_sharding as RS
from .rules import (
    Zero, batch_elementwise, defjvp, defjvp_zero, tangent_aval, unbroadcast,
)

__all__ = [
    "rsqrt", "deg2rad", "radians", "rad2deg", "degrees", "fabs", "isneginf", "isposinf", "angle",
    "sinc", "i0", "float_power", "gcd", "lcm", "divmod", "modf", "frexp", "ldexp", "isclose",
]


def _floats(op, x, domain="inexact"):
    return promote_operands(op, (x,), domain)[0]


# Each wrapper's docstring is its summary; unary_doc / binary_doc add the shared sections.

def rsqrt(x, /):
    """Elementwise ``1 / sqrt(x)`` (composition: reciprocal of sqrt)."""
    return reciprocal(sqrt(x))


rsqrt.__doc__ = unary_doc(rsqrt.__doc__, "inexact",
                          notes="``rsqrt(0) == inf``; negative real input gives nan.")

_D2R = math.pi / 180.0
_R2D = 180.0 / math.pi


def deg2rad(x, /):
    """Elementwise degrees to radians: ``x * (pi / 180)``."""
    return multiply(_floats("deg2rad", x, "real_inexact"), _D2R)


def rad2deg(x, /):
    """Elementwise radians to degrees: ``x * (180 / pi)``."""
    return multiply(_floats("rad2deg", x, "real_inexact"), _R2D)


deg2rad.__doc__ = unary_doc(deg2rad.__doc__, "real_inexact",
                            notes="The factor is rounded to the dtype. Alias: ``radians``.")
rad2deg.__doc__ = unary_doc(rad2deg.__doc__, "real_inexact",
                            notes="The factor is rounded to the dtype. Alias: ``degrees``.")
radians, degrees = deg2rad, rad2deg


def fabs(x, /):
    """Elementwise absolute value of real numbers, as floats."""
    return abs(_floats("fabs", x, "real_inexact"))


fabs.__doc__ = unary_doc(fabs.__doc__, "real_inexact")


def isneginf(x, /):
    """Elementwise test for -inf."""
    x = operand(x, "isneginf")
    _check_domain("isneginf", x.dtype, "real")
    return _logical_and(isinf(x), signbit(x))


def isposinf(x, /):
    """Elementwise test for +inf."""
    x = operand(x, "isposinf")
    _check_domain("isposinf", x.dtype, "real")
    return _logical_and(isinf(x), _logical_not(signbit(x)))


for _fn in (isneginf, isposinf):
    _fn.__doc__ = unary_doc(_fn.__doc__, "real", "bool",
                            notes="Integer and bool input is never infinite: all False.")
del _fn


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

    Composition: for ``|pi x| < (5040 eps) ** (1/6)`` (eps of the dtype) the Maclaurin polynomial
    ``1 - y**2 / 6 + y**4 / 120`` (``y = pi x``) is used, whose truncation error is below eps
    there; elsewhere ``sin(y) / y`` with the divisor made nonzero first (the "double where"
    pattern). So derivatives at and near 0 are finite and right up to the fourth order
    (``sinc'(0) == 0``, ``sinc''(0) == -pi**2 / 3``).
    """
    x = _floats("sinc", x)
    y = multiply(x, math.pi)
    small = less(abs(y), (5040.0 * float(dtypes.finfo(dtypes.real_dtype(x.dtype)).eps)) ** (1 / 6))
    y2 = multiply(y, y)
    taylor = subtract(1, multiply(divide(y2, 6), subtract(1, divide(y2, 20))))
    ys = where(small, 1, y)
    return where(small, taylor, divide(sin(ys), ys))


def _i0_impl(x):
    return np.asarray(np.i0(x)).astype(x.dtype)


i0 = Elementwise("i0", _i0_impl, 1, domain="real_inexact", low_precision_in_float32=True,
                 doc=unary_doc(
                     "Elementwise modified Bessel function of the first kind, order 0.",
                     "real_inexact",
                     notes="Reference implementation: NumPy's ``i0`` (Clenshaw's Chebyshev "
                           "series, Cephes). Overflows to inf for ``|x| > ~89`` in float32. "
                           "Derivative: I1 (the internal primitive ``i1``).")
                 ).wrapper

_I1_SERIES_MAX = 25.0  # |x| up to here: power series; beyond: the asymptotic expansion


def _i1_impl(x):
    """I1 in float64, by the ascending series sum_k (x/2)**(2k+1) / (k! (k+1)!) (positive terms,
    no cancellation) for |x| <= 25, and for larger |x| by the asymptotic expansion
    I1(a) ~ e**a / sqrt(2 pi a) * sum_k c_k / a**k, c_k = c_{k-1} ((2k-1)**2 - 4) / (8k)
    (Abramowitz & Stegun 9.6.10 and 9.7.1); 60 / 40 terms reach double precision there."""
    a = np.abs(np.asarray(x, np.float64))
    out = np.empty_like(a)
    small = a <= _I1_SERIES_MAX
    h = a[small] / 2.0
    term, q = h.copy(), h * h
    total = term.copy()
    for k in range(1, 60):
        term = term * q / (k * (k + 1))
        total += term
    out[small] = total
    big = ~small
    b = a[big]
    term = np.ones_like(b)
    total = term.copy()
    for k in range(1, 40):
        term = term * ((2 * k - 1) ** 2 - 4) / (8 * k * b)
        total += term
    half = np.exp(b / 2.0)  # e**a as two factors: finite wherever the result is
    with np.errstate(invalid="ignore"):
        out[big] = np.where(b == np.inf, np.inf, half * (half / np.sqrt(2.0 * np.pi * b)) * total)
    return casting.astype(np.copysign(out, x), x.dtype)  # odd function; nan stays nan


_i1 = Elementwise("i1", _i1_impl, 1, domain="real_inexact", low_precision_in_float32=True,
                  doc=unary_doc(
                      "Elementwise modified Bessel function of the first kind, order 1 (the "
                      "derivative of ``i0``).", "real_inexact",
                      notes="Power series for ``|x| <= 25``, asymptotic expansion beyond "
                            "(Abramowitz & Stegun 9.6.10, 9.7.1).")).wrapper


def _i1_d(g, ans, x):
    # I1'(x) = I0(x) - I1(x) / x, with the limit 1/2 at 0 (the divisor is made 1 there first).
    zero = equal(x, 0)
    return multiply(g, where(zero, 0.5, subtract(i0(x), divide(ans, where(zero, 1, x)))))


defjvp(i0.primitive, lambda g, ans, x: multiply(g, _i1(x)))
defjvp(_i1.primitive, _i1_d)


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


gcd = binary("gcd", np.gcd,
             formula=lambda a,
             b, **_: S.gcd(a, b), domain="int_only", doc=binary_doc(
    "Elementwise greatest common divisor of ``|x1|`` and ``|x2|`` (``gcd(0, 0) == 0``).",
    "int_only", notes="Results that do not fit the dtype wrap (``gcd(int8(-128), 0) == -128``)."))
lcm = binary("lcm", np.lcm,
             formula=lambda a,
             b, **_: S.lcm(a, b), domain="int_only", doc=binary_doc(
    "Elementwise least common multiple of ``|x1|`` and ``|x2|`` (0 if either is 0).",
    "int_only", notes="Integer overflow wraps."))
defjvp_zero(gcd.primitive)
defjvp_zero(lcm.primitive)


def divmod(x1, x2, /):  # noqa: A001  (NumPy's name)
    """Elementwise ``(floor_divide(x1, x2), remainder(x1, x2))``."""
    a, b = promote_operands("divmod", (x1, x2), "real_num")
    broadcast_shapes("divmod", a.shape, b.shape)
    return floor_divide.primitive.bind(a, b), remainder.primitive.bind(a, b)


divmod.__doc__ = binary_doc(
    divmod.__doc__, "real_num",
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


def _frexp_jvp(primals, tangents):
    # x == m * 2**e with e locally constant: dm = dx * 2**-e (exact, by ldexp); e is integer.
    (x,), (g,) = primals, tangents
    m, e = frexp_p.bind(x)
    dm = Zero(tangent_aval(m.aval)) if type(g) is Zero else ldexp_p.bind(g, negative(e))
    return [m, e], [dm, Zero(tangent_aval(e.aval))]


def _frexp_batch(args, dims):
    out = frexp_p.bind(*args)
    return out, [dims[0], dims[0]]


frexp_p.jvp = _frexp_jvp
frexp_p.batch = _frexp_batch
frexp_p.sharding = RS.elementwise()
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


def _ldexp_formula(x, e, *, out, params, fmt):
    if not S.is_float(x.dtype) or e.dtype.kind not in "iub":
        return None
    # exponents beyond +-100000 saturate every float: clamped, the int32 cast cannot overflow
    if e.dtype.kind != "b" and np.iinfo(e.dtype).max > 100000:
        e = S.select(S.gt(e, 100000), 100000, e)
    if e.dtype.kind == "i" and np.iinfo(e.dtype).min < -100000:
        e = S.select(S.lt(e, -100000), -100000, e)
    return S.ldexp(x, S.cast(e, S.I32))


ldexp_p.scalar_formula = S.ScalarFormula(_ldexp_formula)
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


# ldexp is linear in x1 (the exponent x2 is an integer: no tangent); scaling by 2**x2 is its own
# transpose, summed back over the dims broadcasting added to x1.
def _ldexp_jvp(primals, tangents):
    x1, x2 = primals
    ans = ldexp_p.bind(x1, x2)
    g = tangents[0]
    if type(g) is Zero:
        return ans, Zero(tangent_aval(ans.aval))
    return ans, ldexp_p.bind(g, x2)


def _ldexp_transpose(ct, x1, x2):
    if type(ct) is Zero:
        return [Zero(tangent_aval(x1.aval)), None]
    return [unbroadcast(ldexp_p.bind(ct, x2), x1.aval), None]


ldexp_p.jvp = _ldexp_jvp
ldexp_p.transpose = _ldexp_transpose
ldexp_p.is_linear = True
batch_elementwise(ldexp_p)
ldexp_p.sharding = RS.elementwise()   # (no scaling partials: see rules_sharding)

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
