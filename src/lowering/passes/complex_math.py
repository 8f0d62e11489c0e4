"""Real formulas for the complex elementary functions, emitted by the complex decomposition pass.

Every function takes the parts ``(x, y)`` of ``z = x + iy`` (``R`` handles on IR values) and
returns the parts of the result; ``complex_decompose`` calls them through ``RULES``. The
formulas reproduce what the NumPy reference (``numpy_ref``) computes, special values included
(NaN / inf components, signed zeros on the branch cuts), to a few ulps:

* ``log``, ``sqrt``, ``sin``, ``cos``, ``tan``, ``sinh``, ``cosh``, ``tanh``, ``arcsin``,
  ``arccos``, ``arctan``, ``arcsinh``, ``arccosh``, ``arctanh``: NumPy calls the C library's
  ``clog``, ``csqrt``, ... whose special values are those of ISO C99 Annex G (G.6). Here they are
  computed in float64 (complex64 operands too: their parts are exact in float64, no float32
  formula then needs overflow scaling) with accurate real formulas:

  - ``|z|`` by ``hypot`` (correctly rounded in the cpp backend, cpp/hypot.py; glibc's, which
    NumPy calls, is within 0.51 ulp, and NumPy's naive ``log1p`` / ``sign`` formulas below
    expose its error, e.g. ``log`` of a value next to 1); ``log|z|`` by
    ``log1p(x^2 + y^2 - 1) / 2`` near the unit circle, where
    ``x^2 + y^2 - 1`` is computed exactly enough with Dekker's exact products (T. J. Dekker, "A
    floating-point technique for extending the available precision", Numer. Math. 18, 1971;
    Veltkamp's splitting) and Knuth's TwoSum (D. E. Knuth, TAOCP vol. 2, 4.2.2); far from it by
    ``log(hypot)`` with power-of-two scaling against overflow / underflow;
  - ``sqrt``, ``asin``, ``acos``, ``atanh``, ``tanh``: W. Kahan, "Branch cuts for complex
    elementary functions, or much ado about nothing's sign bit", in The State of the Art in
    Numerical Analysis (A. Iserles, M. J. D. Powell eds.), Clarendon Press, 1987 (``sqrt`` by
    ``sqrt((|x| + |z|) / 2)``; ``asin`` / ``acos`` from ``sqrt(1 - z)`` and ``sqrt(1 + z)``;
    ``tanh`` by ``t = tan y``, ``s = sinh x``; ``atanh`` by ``log1p(4x / ((1 - x)^2 + y^2)) / 4``);
  - ``|z| > 2**28`` (and infinities) for the inverse functions: ``asinh(z) ~ log(2z)`` (error
    ``1 / (4 z^2)``, below an ulp there), as in T. E. Hull, T. F. Fairgrieve, P. T. P. Tang,
    "Implementing the complex arcsine and arccosine functions using exception handling",
    ACM TOMS 23(3), 1997;
  - ``sin(z) = -i sinh(iz)``, ``cos(z) = cosh(iz)``, ``tan(z) = -i tanh(iz)``,
    ``asin(z) = -i asinh(iz)``, ``atan(z) = -i atanh(iz)`` and ``acosh(z) = +-i acos(z)`` (the
    sign of ``Im z``): the definitions of Annex G, which fix the special values.

* ``log1p``, ``expm1``, ``exp2``, ``log2``, ``log10``, ``pow``, ``sign``: NumPy uses its own
  formulas for complex input (``log1p(z) = log(|1 + z|) + i atan2(y, 1 + x)`` without extra
  precision; ``expm1`` from ``expm1(x) cos y - 2 sin^2(y / 2)``; ``exp2(z) = exp(z ln 2)``;
  ``log2`` / ``log10`` scale both parts of ``log``; integer powers ``|n| < 100`` by repeated
  squaring, other powers as ``exp(b log a)``; ``sign(z) = z / |z|``). They are reproduced in the
  operand's own precision, step by step, so that compiled programs equal eager ones.

* ``exp``: C99 ``cexp``, in the operand's precision, scaled for ``exp(x)`` beyond overflow.
"""
from __future__ import annotations

import math

import numpy as np

from ...core.avals import ShapedArray
from ...core.ir import Literal
from ...core.primitive import Primitive

LN2 = math.log(2.0)
PI = math.pi
F64 = np.dtype(np.float64)
# |z| above which the inverse functions use log(2z) (its relative error 1/(4|z|^2) < 2**-58).
_ASYMPTOTIC = 2.0 ** 28


class R:
    """A real IR value (Var or Literal) with arithmetic that emits equations. ``ft`` is the
    float dtype Python numbers combined with it take (a comparison result keeps the dtype of
    its operands)."""

    __slots__ = ("b", "v", "ft")

    def __init__(self, b, v, ft=None):
        self.b, self.v = b, v
        dt = np.dtype(v.aval.dtype)
        self.ft = dt if dt.kind == "f" else ft

    @property
    def dtype(self):
        return np.dtype(self.v.aval.dtype)

    def __add__(self, o):
        return op("add", self, o)

    def __radd__(self, o):
        return op("add", o, self)

    def __sub__(self, o):
        return op("subtract", self, o)

    def __rsub__(self, o):
        return op("subtract", o, self)

    def __mul__(self, o):
        return op("multiply", self, o)

    def __rmul__(self, o):
        return op("multiply", o, self)

    def __truediv__(self, o):
        return op("divide", self, o)

    def __rtruediv__(self, o):
        return op("divide", o, self)

    def __neg__(self):
        return op("negative", self)

    def __lt__(self, o):
        return op("less", self, o)

    def __le__(self, o):
        return op("less_equal", self, o)

    def __gt__(self, o):
        return op("greater", self, o)

    def __ge__(self, o):
        return op("greater_equal", self, o)

    def eq(self, o):
        return op("equal", self, o)

    def __and__(self, o):
        return op("logical_and", self, o)

    def __or__(self, o):
        return op("logical_or", self, o)

    def __invert__(self):
        return op("logical_not", self)


def _literal(value, dt):
    dt = np.dtype(dt)
    return Literal(dt.type(value), ShapedArray((), dt, False))


def const(like, value):
    """A Literal of ``like``'s float dtype."""
    return R(like.b, _literal(value, like.ft))


def op(name, *args, **params):
    """Emits ``name`` on ``args`` (R handles or Python numbers, which take the float dtype of
    the first R operand); folds it when every operand is a Literal."""
    first = next(a for a in args if isinstance(a, R))
    b, ft = first.b, first.ft
    vals = []
    for a in args:
        if isinstance(a, R):
            vals.append(a.v)
        elif isinstance(a, (bool, np.bool_)):
            vals.append(_literal(a, np.bool_))
        else:
            vals.append(_literal(a, ft))
    prim = Primitive.registry[name]
    if all(isinstance(v, Literal) for v in vals):
        aval = prim.abstract_eval(*[v.aval for v in vals], **params)
        with np.errstate(all="ignore"):
            out = np.asarray(prim.impl(*[np.asarray(v.val) for v in vals], **params))
        return R(b, _literal(out.astype(aval.dtype)[()], aval.dtype), ft)
    return R(b, b.op(name, *vals, **params), ft)


def _fn(name):
    return lambda *a, **p: op(name, *a, **p)


exp, log, log1p, expm1 = _fn("exp"), _fn("log"), _fn("log1p"), _fn("expm1")
sqrt, sin, cos, tan = _fn("sqrt"), _fn("sin"), _fn("cos"), _fn("tan")
sinh, cosh, atan, asinh = _fn("sinh"), _fn("cosh"), _fn("arctan"), _fn("arcsinh")
fabs, floor = _fn("abs"), _fn("floor")
isnan, isinf, isfinite = _fn("isnan"), _fn("isinf"), _fn("isfinite")
atan2, hypot, copysign = _fn("arctan2"), _fn("hypot"), _fn("copysign")


def where(c, x, y):
    """Emits ``where(c, x, y)``: ``x`` where ``c`` is true, else ``y``."""
    return op("where", c, x, y)


def opaque(p):
    """``p`` itself, in a form the C++ compiler cannot see through (a select on ``p == p``),
    for products that NumPy's own complex formulas round: GCC would otherwise contract them
    with a following addition into an FMA, which where the terms cancel changes more than the
    last bits (even the sign of a zero result)."""
    return where(p.eq(p), p, math.nan)


def sin_beside_cos(y, x):
    """``sin(y)`` where ``x`` is not NaN, else NaN: for a ``sin(y)`` that only multiplies a
    factor that is NaN with ``x``, next to a ``cos(y)``. GCC merges ``sin`` and ``cos`` of one
    value into a ``sincos`` call, which it cannot vectorise (the whole loop then runs scalar,
    several times slower); a different argument prevents that."""
    return sin(where(x.eq(x), y, math.nan))


def to(x, dt):
    """``x`` converted to float dtype ``dt`` (round to nearest; no-op when equal)."""
    if x.dtype == np.dtype(dt):
        return x
    return op("convert_element_type", x, new_dtype=np.dtype(dt), weak_type=False)


def _rot(p):
    """``-i * (a + ib) = b - ia``."""
    return p[1], -p[0]


# ---- exact helpers (float64) ---------------------------------------------------------------------

def _two_sum(a, b):
    """``s + e == a + b`` exactly (Knuth's TwoSum; no products, so FMA contraction by the C++
    compiler cannot change it)."""
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


def _split(a):
    """Veltkamp's split ``a == hi + lo`` with 26-bit halves, so every product of halves is
    exact (and FMA contraction leaves exact products unchanged)."""
    c = a * 134217728.0 + a          # (2**27 + 1) * a
    hi = c - (c - a)
    return hi, a - hi


def _x2y2m1(a, b):
    """``a^2 + b^2 - 1`` to a few ulps of the result, for ``a`` in [0.5, 2], ``0 <= b <= a``."""
    ah, al = _split(a)
    bh, bl = _split(b)
    s, e1 = _two_sum(ah * ah, -1.0)
    s, e2 = _two_sum(s, bh * bh)
    s, e3 = _two_sum(s, (ah + ah) * al)
    s, e4 = _two_sum(s, (bh + bh) * bl)
    return s + ((((e1 + e2) + (e3 + e4)) + al * al) + bl * bl)


def _max_min(x, y):
    ax, ay = fabs(x), fabs(y)
    first = ax > ay
    return where(first, ax, ay), where(first, ay, ax)


def log_abs(x, y):
    """``log|z|`` in float64: accurate near ``|z| = 1`` and for huge / tiny parts."""
    a, b = _max_min(x, y)
    near = (a >= 0.5) & (a <= 2.0)
    near_v = 0.5 * log1p(_x2y2m1(a, b))
    big, tiny = a > 2.0 ** 1000, a < 2.0 ** -1000
    s = where(big, 2.0 ** -8, where(tiny, 2.0 ** 100, 1.0))
    off = where(big, 8 * LN2, where(tiny, -100 * LN2, 0.0))
    far = log(hypot(x * s, y * s)) + off
    return where(near, near_v, far)


# ---- Annex G functions (float64 working precision) -----------------------------------------------

def c_log(x, y):
    """``log|z| + i atan2(y, x)`` (the principal branch; ``atan2`` keeps the sign of a zero
    ``y`` on the cut, and gives Annex G's values for infinite parts)."""
    return log_abs(x, y), atan2(y, x)


def c_sqrt(x, y):
    """Kahan's ``sqrt((|x| + |z|) / 2)`` with power-of-four scaling; Annex G special values."""
    a, _ = _max_min(x, y)
    big, tiny = a > 2.0 ** 1018, a < 2.0 ** -1018
    s = where(big, 2.0 ** -4, where(tiny, 2.0 ** 100, 1.0))
    u = where(big, 4.0, where(tiny, 2.0 ** -50, 1.0))
    xs, ys = x * s, y * s
    t = sqrt((fabs(xs) + hypot(xs, ys)) * 0.5)
    d = ys / (t + t)
    pos = x >= 0.0
    re = where(pos, t, fabs(d)) * u
    im = where(pos, d, copysign(t, y)) * u
    zero = x.eq(0.0) & y.eq(0.0)
    re, im = where(zero, 0.0, re), where(zero, y, im)
    yinf = isinf(y)
    return where(yinf, math.inf, re), where(yinf, y, im)


def _hyp_parts(x, y):
    """(cosh x cos y, cosh x sin y, sinh x cos y, sinh x sin y), as ``e^|x| / 2`` products
    formed without overflow for ``|x| > 700``."""
    ax, sx = fabs(x), copysign(1.0, x)
    c, s = cos(y), sin_beside_cos(y, x)
    large = ax > 700.0
    h = exp(ax * 0.5)
    hh = h * 0.5
    lc, ls = (hh * c) * h, (hh * s) * h
    ch, sh = cosh(x), sinh(x)
    return (where(large, lc, ch * c), where(large, ls, ch * s),
            where(large, lc * sx, sh * c), where(large, ls * sx, sh * s))


def c_sinh(x, y):
    """``sinh x cos y + i cosh x sin y``."""
    _, ch_s, sh_c, _ = _hyp_parts(x, y)
    re, im = sh_c, where(y.eq(0.0), y, ch_s)
    bad_y = ~isfinite(y)
    # Annex G (signs as glibc): sinh(+-0 + i inf/nan) = +-0 + i nan,
    # sinh(+-inf + i inf/nan) = +inf + i nan
    zero_x, inf_x = bad_y & x.eq(0.0), bad_y & isinf(x)
    re = where(zero_x, x, where(inf_x, math.inf, re))
    return re, where(zero_x | inf_x, y - y, im)


def c_cosh(x, y):
    """``cosh x cos y + i sinh x sin y``."""
    ch_c, _, _, sh_s = _hyp_parts(x, y)
    # on the real axis Im = sinh(x) * y: the sign of x times that of y (y's own for NaN x)
    axis_im = where(isnan(x), y, y * copysign(1.0, x))
    re, im = ch_c, where(y.eq(0.0), axis_im, sh_s)
    bad_y = ~isfinite(y)
    # Annex G (signs as glibc): cosh(+-0 + i inf/nan) = nan + i0, cosh(+-inf + i inf/nan) =
    # +inf + i nan
    zero_x, inf_x = bad_y & x.eq(0.0), bad_y & isinf(x)
    re = where(zero_x, y - y, where(inf_x, math.inf, re))
    im = where(zero_x, 0.0, where(inf_x, y - y, im))
    return re, im


def c_tanh(x, y):
    """Kahan's formula ``(beta rho s + i t) / (1 + beta s^2)`` with ``t = tan y``,
    ``beta = 1 + t^2``, ``s = sinh x``, ``rho = sqrt(1 + s^2)``; ``|x| > 22``: ``tanh x`` is
    ``+-1`` and the imaginary part ``4 sin y cos y e^{-2|x|} = (4t / beta) e^{-2|x|}``."""
    ax = fabs(x)
    t = tan(y)
    beta = 1.0 + t * t
    s = sinh(x)
    rho = sqrt(1.0 + s * s)
    den = 1.0 + (beta * s) * s
    re = (beta * rho * s) / den
    im = t / den
    e = exp(-ax)
    large = ax > 22.0
    # a finite x with a non-finite y gives nan + i nan (Annex G), also for |x| > 22
    re = where(large, where(isfinite(y) | isinf(x), copysign(1.0, x), math.nan), re)
    # 4 sin y cos y = 4t / beta (no sin and cos pair: see sin_beside_cos)
    im = where(large, ((4.0 * t) / beta) * e * e, im)
    im = where(y.eq(0.0), y, im)
    # Annex G (signs as glibc): tanh(+-inf + i inf/nan) = +-1 + i copysign(0, y),
    # tanh(+-0 + i inf/nan) = +-0 + i nan
    bad_y = ~isfinite(y)
    zero_x = bad_y & x.eq(0.0)
    im = where(isinf(x) & bad_y, copysign(0.0, y), im)
    return where(zero_x, x, re), where(zero_x, y - y, im)


def c_sin(x, y):
    """``sin z = -i sinh(iz)``, with glibc's ``sin(inf/nan + i inf) = nan + i inf``."""
    re, im = _rot(c_sinh(-y, x))
    edge = isinf(y) & ~isfinite(x)     # glibc: sin(inf/nan + i inf) = nan + i inf
    return re, where(edge, math.inf, im)


def c_cos(x, y):
    """``cos z = cosh(iz)``."""
    return c_cosh(-y, x)


def c_tan(x, y):
    """``tan z = -i tanh(iz)`` (Kahan's formula, through ``c_tanh``)."""
    return _rot(c_tanh(-y, x))


def _big(x, y):
    """|z| beyond the asymptotic threshold, or not finite (NaN included)."""
    a, _ = _max_min(x, y)
    return ~(a <= _ASYMPTOTIC)


def _asinh_large(x, y):
    """``log(2z)`` in the first quadrant, signs of ``x`` / ``y`` restored (asinh is odd)."""
    ax, ay = fabs(x), fabs(y)
    return copysign(log_abs(ax, ay) + LN2, x), copysign(atan2(ay, ax), y)


def _asin_mid(x, y):
    """Kahan: ``asin z = atan(x / Re(sqrt(1-z) sqrt(1+z))) + i asinh(Im(conj(sqrt(1-z))
    sqrt(1+z)))``."""
    ar, ai = c_sqrt(1.0 - x, -y)
    br, bi = c_sqrt(1.0 + x, y)
    return atan(x / (ar * br - ai * bi)), asinh(ar * bi - ai * br)


def c_asinh(x, y):
    """``-i asin(iz)`` by Kahan's formula; ``log(2z)`` for ``|z| > 2**28`` and non-finite z."""
    big = _big(x, y)
    mre, mim = _rot(_asin_mid(-y, x))
    lre, lim = _asinh_large(x, y)
    re, im = where(big, lre, mre), where(big, lim, mim)
    nan_real = isnan(x) & y.eq(0.0)      # asinh(nan + i0) = nan + i0
    return re, where(nan_real, y, im)


def c_asin(x, y):
    """``asin z = -i asinh(iz)`` (Kahan's formula, through ``c_asinh``)."""
    return _rot(c_asinh(-y, x))


def c_acos(x, y):
    """Kahan: ``acos z = 2 atan(Re sqrt(1-z) / Re sqrt(1+z)) + i asinh(Im(conj(sqrt(1+z))
    sqrt(1-z)))``; ``|z| > 2**28``: ``acos z = -+i log(2z)``."""
    ar, ai = c_sqrt(1.0 - x, -y)
    br, bi = c_sqrt(1.0 + x, y)
    mre, mim = 2.0 * atan2(ar, br), asinh(br * ai - bi * ar)
    big = _big(x, y)
    lre = fabs(atan2(y, x))
    lim = -copysign(log_abs(x, y) + LN2, y)
    re, im = where(big, lre, mre), where(big, lim, mim)
    zero_nan = x.eq(0.0) & isnan(y)       # acos(+-0 + i nan) = pi/2 + i nan
    return where(zero_nan, PI / 2, re), im


def c_acosh(x, y):
    """``i acos z`` where ``Im z`` has its sign bit clear or is NaN, else ``-i acos z``
    (the C library gives ``acosh(+-0 + i nan) = nan + i pi/2`` whatever the NaN's sign bit)."""
    re, im = c_acos(x, y)
    # signbit(y) (which GCC does not vectorise for double), NaN counted as positive
    neg = (copysign(1.0, y) < 0.0) & ~isnan(y)
    # the principal branch has Re >= 0: |.| also fixes acosh(inf + i nan) whatever the NaN's
    # sign bit (acos gives -+i inf there by that sign)
    return fabs(where(neg, im, -im)), where(neg, -re, re)


def c_atanh(x, y):
    """Kahan: ``Re = log1p(4|x| / ((1 - |x|)^2 + y^2)) / 4`` (sign of x),
    ``Im = atan2(2y, (1 - |x|)(1 + |x|) - y^2) / 2``; ``|z| > 2**500``: ``1/z + i pi/2``."""
    ax = fabs(x)
    one_m = 1.0 - ax
    re = 0.25 * log1p((4.0 * ax) / (one_m * one_m + y * y))
    # x = +-1 exactly: y^2 alone may underflow; log(sqrt(4 + y^2) / |y|) / 2 has no such issue
    at1 = 0.25 * log(4.0 + y * y) - 0.5 * log(fabs(y))
    re = where(ax.eq(1.0) & (fabs(y) < 1.0), at1, re)
    im = 0.5 * atan2(y + y, one_m * (1.0 + ax) - y * y)
    a, _ = _max_min(x, y)
    big = (a > 2.0 ** 500) & ~isnan(x) & ~isnan(y)
    h = hypot(x, y)
    re = where(big, (ax / h) / h, re)
    im = where(big, copysign(PI / 2, y), im)
    inf = isinf(x) | isinf(y)
    re = where(inf, 0.0, re)
    im = where(inf, where(isnan(y), y, copysign(PI / 2, y)), im)
    re = where(x.eq(0.0) & isnan(y), 0.0, re)   # atanh(+-0 + i nan) = +-0 + i nan
    return copysign(re, x), im


def c_atan(x, y):
    """``atan z = -i atanh(iz)`` (Kahan's formula, through ``c_atanh``)."""
    return _rot(c_atanh(-y, x))


# ---- in the operand's precision: cexp and NumPy's own formulas -----------------------------------

def c_exp(x, y):
    """C99 ``cexp`` (Annex G special values); ``exp(x)`` beyond overflow as
    ``(e^{x/2} cos y) e^{x/2}``."""
    limit = 88.0 if x.dtype == np.float32 else 709.0
    e = exp(x)
    c, s = cos(y), sin_beside_cos(y, x)
    big = x > limit
    h = exp(x * 0.5)
    re = where(big, (h * c) * h, e * c)
    im = where(big, (h * s) * h, e * s)
    # a zero imaginary part stays exact (exp(inf + 0j) is inf + 0j); with a non-finite
    # imaginary part exp(+inf + iy) is inf + nan j and exp(-inf + iy) is 0 + 0j.
    real_axis = y.eq(0.0)
    re, im = where(real_axis, e, re), where(real_axis, y, im)
    bad_im = ~isfinite(y)
    pos, neg = bad_im & x.eq(math.inf), bad_im & x.eq(-math.inf)
    re = where(neg, 0.0, where(pos, math.inf, re))
    im = where(neg, copysign(0.0, y), where(pos, math.nan, im))
    return re, im


def c_expm1(x, y):
    """NumPy: ``expm1(x) cos y - 2 sin^2(y/2) + i e^x sin y``; ``exp(z) - 1`` where z is not
    finite (Starling's eager rule, C99 special values)."""
    h = sin(y * 0.5)
    re = opaque(expm1(x) * cos(y)) - opaque((2.0 * h) * h)
    im = exp(x) * sin_beside_cos(y, x)
    er, ei = c_exp(x, y)
    bad = ~(isfinite(x) & isfinite(y))
    return where(bad, er - 1.0, re), where(bad, ei, im)


def c_log1p(x, y):
    """NumPy: ``log(hypot(1 + x, y)) + i atan2(y, 1 + x)`` in the operand's precision."""
    u = x + 1.0
    return log(hypot(u, y)), atan2(y, u)


def c_exp2(x, y):
    """NumPy: ``exp(z ln 2)``, the product in the operand's precision."""
    ln2 = x.dtype.type(LN2)
    return c_exp(x * ln2, y * ln2)


def c_sign(x, y):
    """NumPy: ``z / |z|``; 0 at 0; NaN + NaN j for NaN or two infinite parts; an infinite
    part gives +-1 on its axis."""
    h = hypot(x, y)
    re, im = x / h, y / h
    zero = h.eq(0.0)
    re, im = where(zero, 0.0, re), where(zero, 0.0, im)
    ix, iy = isinf(x), isinf(y)
    one_x, one_y = ix & ~iy, iy & ~ix
    re = where(one_x, copysign(1.0, x), where(one_y, 0.0, re))
    im = where(one_x, 0.0, where(one_y, copysign(1.0, y), im))
    nan = isnan(h) | (ix & iy)
    return where(nan, math.nan, re), where(nan, math.nan, im)


def cmul(a, b):
    """Complex product by the textbook formula (NumPy's, no inf recovery; every product
    rounded as in NumPy's scalar code)."""
    (ar, ai), (br, bi) = a, b
    return (opaque(ar * br) - opaque(ai * bi), opaque(ar * bi) + opaque(ai * br))


def cmul_annex_g(z, w):
    """Complex product with C99's recovery of infinities (ISO C99 G.5.1, the ``_Cmultd``
    example; what C compilers emit for ``z * w``): when the textbook formula gives NaN in both
    parts but an operand is infinite, the infinities are recomputed from the signs."""
    (a, b), (c, d) = z, w
    ac, bd, ad, bc = a * c, b * d, a * d, b * c
    x, y = ac - bd, ad + bc
    both_nan = isnan(x) & isnan(y)
    z_inf = isinf(a) | isinf(b)
    w_inf = isinf(c) | isinf(d)
    prod_inf = isinf(ac) | isinf(bd) | isinf(ad) | isinf(bc)

    def unit(v):        # +-1 for an infinite part, +-0 otherwise (NaN included)
        return copysign(where(isinf(v), 1.0, 0.0), v)

    def zero_nan(v):
        return where(isnan(v), copysign(0.0, v), v)

    a2 = where(z_inf, unit(a), where(w_inf | prod_inf, zero_nan(a), a))
    b2 = where(z_inf, unit(b), where(w_inf | prod_inf, zero_nan(b), b))
    c2 = where(w_inf, unit(c), where(z_inf | prod_inf, zero_nan(c), c))
    d2 = where(w_inf, unit(d), where(z_inf | prod_inf, zero_nan(d), d))
    recalc = both_nan & (z_inf | w_inf | prod_inf)
    x = where(recalc, math.inf * (a2 * c2 - b2 * d2), x)
    y = where(recalc, math.inf * (a2 * d2 + b2 * c2), y)
    return x, y


def cdiv(a, b):
    """Complex quotient by Smith's algorithm with NumPy's branch for a zero divisor."""
    (ar, ai), (br, bi) = a, b
    abr, abi = fabs(br), fabs(bi)
    first = abr >= abi
    both0 = abr.eq(0.0) & abi.eq(0.0)
    rat = bi / br
    scl = 1.0 / (br + bi * rat)
    ra, ia = (ar + ai * rat) * scl, (ai - ar * rat) * scl
    rat2 = br / bi
    scl2 = 1.0 / (bi + br * rat2)
    rb, ib = (ar * rat2 + ai) * scl2, (ai * rat2 - ar) * scl2
    re = where(first, where(both0, ar / abr, ra), rb)
    im = where(first, where(both0, ai / abr, ia), ib)
    return re, im


def c_pow(a, b):
    """NumPy's complex power: ``b == 0``: 1; ``a == 0``: 0 if ``Re b > 0`` else NaN; integer
    ``b`` with ``|b| < 100``: ``a``, ``a*a``, ``a*(a*a)`` for 1, 2, 3, else binary powering from
    1 (then the reciprocal for negative ``b``); otherwise ``exp(b * log a)``."""
    (ar, ai), (br, bi) = a, b
    n = fabs(br)
    # binary powering over the 7 bits of n < 100; squaring past the top bit changes nothing
    acc, p, q = (const(ar, 1.0), const(ar, 0.0)), (ar, ai), n
    for k in range(7):
        half = floor(q * 0.5)
        bit = (q - (half + half)).eq(1.0)
        m = cmul(acc, p)
        acc = (where(bit, m[0], acc[0]), where(bit, m[1], acc[1]))
        p = cmul(p, p) if k < 6 else p
        q = half
    neg = br < 0.0
    inv = cdiv((const(ar, 1.0), const(ar, 0.0)), acc)
    ire, iim = where(neg, inv[0], acc[0]), where(neg, inv[1], acc[1])
    sq = cmul(a, a)
    for k, val in ((1.0, a), (2.0, sq), (3.0, cmul(a, sq))):
        cond = br.eq(k)
        ire, iim = where(cond, val[0], ire), where(cond, val[1], iim)
    # otherwise exp(b * log a), log accurate in float64 then rounded to the operand's dtype
    dt = ar.dtype
    lr, li = c_log(to(ar, F64), to(ai, F64))
    gr, gi = c_exp(*cmul_annex_g(b, (to(lr, dt), to(li, dt))))
    is_int = bi.eq(0.0) & floor(br).eq(br) & (n < 100.0)
    re, im = where(is_int, ire, gr), where(is_int, iim, gi)
    a0 = ar.eq(0.0) & ai.eq(0.0)
    zero = a0 & (br > 0.0)
    re = where(zero, 0.0, where(a0, math.nan, re))
    im = where(zero, 0.0, where(a0, math.nan, im))
    b0 = br.eq(0.0) & bi.eq(0.0)
    return where(b0, 1.0, re), where(b0, 0.0, im)
