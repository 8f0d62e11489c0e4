"""Elementwise math with one primitive per function: exponentials and logarithms, powers and
roots, trigonometric and hyperbolic functions, rounding, floating-point predicates, complex parts.

Functions that need floats promote bool and integer input to float32 (the default float, as in
JAX: ``sin(int64) -> float32``; NumPy would give float64). Special values follow IEEE 754 and
NumPy, silently (no warnings): ``log(0) == -inf``, ``log(-1)`` and ``sqrt(-1)`` are nan for real
input, ``arctanh(+-1) == +-inf``. Complex input uses NumPy's principal branches.

Derivatives (JVP rules next to each primitive; reverse mode transposes them): complex input gets
the complex derivative of the holomorphic functions. Conventions at special points: ``sqrt`` and
``cbrt`` at 0 give inf (as JAX; use the double-``where`` pattern for a finite gradient);
``logaddexp(x, x)`` for ``x = +-inf`` gives weights 1/2, 1/2 (never nan); ``hypot`` at the origin
gives 0; rounding, ``spacing`` and the predicates have zero derivatives; ``nextafter`` follows
its first operand (derivative 1); ``heaviside`` depends on ``x2`` only where ``x1 == 0``.
``real`` / ``imag`` / ``conj`` are linear with the plain (non-conjugating) transposes.
"""
from __future__ import annotations

import math
import operator

import numpy as np

from ...core.primitive import Primitive
from ..convert import operand
from .arithmetic import add, divide, equal, multiply, negative, not_equal, square, subtract
from .convert_element_type import convert_element_type
from ...core import scalar as S
from .elementwise_docs import binary_doc, unary_doc
from .elementwise_family import _LOW, _check_domain, binary, unary
from . import rules_sharding as RS
from .rules import (
    Zero, batch_unary_same_axis, broadcast_to_shape, deflinear, defjvp, defjvp_zero, snp,
    tangent_aval,
)

__all__ = [
    "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt", "cbrt", "sin", "cos", "tan",
    "arcsin", "asin", "arccos", "acos", "arctan", "atan", "arctan2", "atan2", "sinh", "cosh",
    "tanh", "arcsinh", "asinh", "arccosh", "acosh", "arctanh", "atanh", "logaddexp",
    "logaddexp2", "hypot", "copysign", "nextafter", "heaviside", "spacing", "floor", "ceil",
    "trunc", "fix", "rint", "round", "isfinite", "isinf", "isnan", "signbit", "real", "imag",
    "conj", "conjugate",
]


def _inexact(name, impl, summary, notes="", domain="inexact", op=None, formula=None):
    """A float function; its scalar formula is the float op ``op`` (default: ``name``) of the
    formula language, unless ``formula`` is given."""
    return unary(name, impl, domain=domain, doc=unary_doc(summary, domain, notes=notes),
                 formula=formula or S.math1(op or name))


# JVP rules: ``fn(g, ans, *primals)`` gives the tangent contribution of one input (see
# rules.defjvp); they are written with public ops so that they differentiate again. For complex
# input the holomorphic functions use their complex derivative (principal branches, matching the
# branch cuts of the functions themselves). Batching comes from the elementwise family.

def _jvp(fn, *rules):
    defjvp(fn.primitive, *rules)


def _where(c, x, y):
    return snp().where(c, x, y)


# ---- exponentials, logarithms, powers ----------------------------------------------------------

exp = _inexact("exp", np.exp, "Elementwise ``e ** x``.", "Overflow gives inf.")
exp2 = _inexact("exp2", np.exp2, "Elementwise ``2 ** x``.")
def _expm1_impl(x):
    out = np.expm1(x)
    if x.dtype.kind == "c":
        # np.expm1 ignores the C99 special cases of complex infinities and NaNs (required by the
        # Array API): there exp(z) - 1 is exact, so use it wherever z is not finite.
        bad = ~np.isfinite(x)
        if np.any(bad):
            out = np.where(bad, np.exp(x) - 1, out)
    return out


expm1 = _inexact("expm1", _expm1_impl, "Elementwise ``exp(x) - 1``, accurate for small ``|x|``.")
log = _inexact("log", np.log, "Elementwise natural logarithm.",
               "``log(0) == -inf``; negative real input gives nan; complex input uses the "
               "principal branch (imaginary part in ``(-pi, pi]``).")
log2 = _inexact("log2", np.log2, "Elementwise base-2 logarithm.",
                "``log2(0) == -inf``; negative real input gives nan.")
log10 = _inexact("log10", np.log10, "Elementwise base-10 logarithm.",
                 "``log10(0) == -inf``; negative real input gives nan.")
log1p = _inexact("log1p", np.log1p, "Elementwise ``log(1 + x)``, accurate for small ``|x|``.",
                 "``log1p(-1) == -inf``; ``x < -1`` gives nan for real input.")
sqrt = _inexact("sqrt", np.sqrt, "Elementwise square root.",
                "Negative real input gives nan (``sqrt(-0.0) == -0.0``); complex input gives the "
                "principal root.")
cbrt = _inexact("cbrt", np.cbrt, "Elementwise real cube root (``cbrt(-8) == -2``).",
                domain="real_inexact")

_LN2, _LN10 = math.log(2.0), math.log(10.0)
_jvp(exp, lambda g, ans, x: multiply(g, ans))
_jvp(exp2, lambda g, ans, x: multiply(g, multiply(ans, _LN2)))
_jvp(expm1, lambda g, ans, x: multiply(g, add(ans, 1)))
_jvp(log, lambda g, ans, x: divide(g, x))
_jvp(log2, lambda g, ans, x: divide(g, multiply(x, _LN2)))
_jvp(log10, lambda g, ans, x: divide(g, multiply(x, _LN10)))
_jvp(log1p, lambda g, ans, x: divide(g, add(x, 1)))
# At 0 the derivatives of sqrt and cbrt are inf (times the tangent), as in JAX.
_jvp(sqrt, lambda g, ans, x: multiply(g, divide(0.5, ans)))
_jvp(cbrt, lambda g, ans, x: multiply(g, divide(1.0 / 3.0, square(ans))))

# ---- trigonometric and hyperbolic --------------------------------------------------------------

sin = _inexact("sin", np.sin, "Elementwise sine (radians).")
cos = _inexact("cos", np.cos, "Elementwise cosine (radians).")
tan = _inexact("tan", np.tan, "Elementwise tangent (radians).")
arcsin = _inexact("arcsin", np.arcsin, "Elementwise inverse sine, in ``[-pi/2, pi/2]``.",
                  "``|x| > 1`` gives nan for real input. Alias: ``asin``.", op="asin")
arccos = _inexact("arccos", np.arccos, "Elementwise inverse cosine, in ``[0, pi]``.",
                  "``|x| > 1`` gives nan for real input. Alias: ``acos``.", op="acos")
arctan = _inexact("arctan", np.arctan, "Elementwise inverse tangent, in ``[-pi/2, pi/2]``.",
                  "Alias: ``atan``.", op="atan")
sinh = _inexact("sinh", np.sinh, "Elementwise hyperbolic sine.")
cosh = _inexact("cosh", np.cosh, "Elementwise hyperbolic cosine.")
tanh = _inexact("tanh", np.tanh, "Elementwise hyperbolic tangent.")
arcsinh = _inexact("arcsinh", np.arcsinh, "Elementwise inverse hyperbolic sine.",
                   "Alias: ``asinh``.", op="asinh")
arccosh = _inexact("arccosh", np.arccosh, "Elementwise inverse hyperbolic cosine.",
                   "``x < 1`` gives nan for real input. Alias: ``acosh``.", op="acosh")
arctanh = _inexact("arctanh", np.arctanh, "Elementwise inverse hyperbolic tangent.",
                   "``arctanh(+-1) == +-inf``; ``|x| > 1`` gives nan for real input. "
                   "Alias: ``atanh``.", op="atanh")
asin, acos, atan = arcsin, arccos, arctan
asinh, acosh, atanh = arcsinh, arccosh, arctanh

_jvp(sin, lambda g, ans, x: multiply(g, cos(x)))
_jvp(cos, lambda g, ans, x: negative(multiply(g, sin(x))))
_jvp(tan, lambda g, ans, x: multiply(g, add(1, square(ans))))
_jvp(arcsin, lambda g, ans, x: divide(g, sqrt(subtract(1, square(x)))))
_jvp(arccos, lambda g, ans, x: negative(divide(g, sqrt(subtract(1, square(x))))))
_jvp(arctan, lambda g, ans, x: divide(g, add(1, square(x))))
_jvp(sinh, lambda g, ans, x: multiply(g, cosh(x)))
_jvp(cosh, lambda g, ans, x: multiply(g, sinh(x)))
_jvp(tanh, lambda g, ans, x: multiply(g, subtract(1, square(ans))))
_jvp(arcsinh, lambda g, ans, x: divide(g, sqrt(add(square(x), 1))))
# sqrt(x - 1) * sqrt(x + 1), not sqrt(x**2 - 1): the same for real x >= 1, and the derivative
# of the principal complex branch everywhere else.
_jvp(arccosh, lambda g, ans, x: divide(g, multiply(sqrt(subtract(x, 1)), sqrt(add(x, 1)))))
_jvp(arctanh, lambda g, ans, x: divide(g, subtract(1, square(x))))

arctan2 = binary("arctan2", np.arctan2,
                 formula=lambda a,
                 b, **_: S.atan2(a, b), domain="real_inexact", doc=binary_doc(
    "Elementwise angle of the point ``(x2, x1)``: ``arctan(x1 / x2)`` in the right quadrant, "
    "in ``[-pi, pi]``.", "real_inexact",
    notes="Signed zeros select the quadrant as in IEEE 754 / C ``atan2`` "
          "(``arctan2(0.0, -0.0) == pi``). Alias: ``atan2``."))
atan2 = arctan2


def _arctan2_dy(g, ans, y, x):
    return multiply(g, divide(x, add(square(x), square(y))))


def _arctan2_dx(g, ans, y, x):
    return multiply(g, divide(negative(y), add(square(x), square(y))))


_jvp(arctan2, _arctan2_dy, _arctan2_dx)

# ---- other binary float functions --------------------------------------------------------------

logaddexp = binary("logaddexp", np.logaddexp,
                   formula=lambda a,
                   b, **_: S.logaddexp(a, b), domain="real_inexact", doc=binary_doc(
    "Elementwise ``log(exp(x1) + exp(x2))`` without overflow.", "real_inexact",
    notes="``logaddexp(-inf, -inf) == -inf``; ``logaddexp(inf, inf) == inf``. Derivatives: "
          "``exp(x1 - out)``, ``exp(x2 - out)``; 1/2 each where both inputs are the same "
          "infinity."))
logaddexp2 = binary("logaddexp2", np.logaddexp2,
                    formula=lambda a,
                    b, **_: S.logaddexp2(a, b), domain="real_inexact", doc=binary_doc(
    "Elementwise ``log2(2 ** x1 + 2 ** x2)`` without overflow.", "real_inexact"))
hypot = binary("hypot", np.hypot,
               formula=lambda a,
               b, **_: S.hypot(a, b), domain="real_inexact", doc=binary_doc(
    "Elementwise ``sqrt(x1 ** 2 + x2 ** 2)`` without intermediate overflow.", "real_inexact",
    notes="``hypot(inf, nan) == inf`` (IEEE 754). The derivative at ``(0, 0)`` is 0."))
copysign = binary("copysign", np.copysign,
                  formula=S.ScalarFormula(lambda a, b, **_: S.copysign(a, b), lowp="exact"),
                  domain="real_inexact", doc=binary_doc(
    "Elementwise ``|x1|`` with the sign bit of ``x2`` (``copysign(1, -0.0) == -1``).",
    "real_inexact"))
nextafter = binary("nextafter", np.nextafter,
                   formula=S.ScalarFormula(lambda a, b, **_: S.nextafter(a, b)
                                           if S.is_float(a.dtype) else None, lowp=None),
                   domain="real_inexact", doc=binary_doc(
    "Elementwise next representable value after ``x1`` in the direction of ``x2``.",
    "real_inexact", notes="Works in the promoted dtype (so steps are float16 / bfloat16 "
                          "steps for those dtypes). Derivative: 1 in ``x1`` (the result follows "
                          "it), 0 in ``x2``."))
def _heaviside_formula(a, b, *, out, params, fmt):
    h = S.heaviside(a, b)
    # NumPy's float16 loop gives the quiet NaN for a NaN x1, whatever its payload
    return S.select(S.ne(a, a), float("nan"), h) if fmt == np.float16 else h


heaviside = binary("heaviside", np.heaviside,
                   formula=S.ScalarFormula(_heaviside_formula, lowp="exact"),
                   domain="real_inexact", doc=binary_doc(
    "Elementwise Heaviside step: 0 for ``x1 < 0``, ``x2`` for ``x1 == 0``, 1 for ``x1 > 0``.",
    "real_inexact", notes="nan in ``x1`` gives nan. Derivative: 0 in ``x1``; 1 in ``x2`` where "
                          "``x1 == 0``, else 0."))
# spacing / nextafter of the low-precision formats are defined on their bit patterns: no
# formula (NumPy / ml_dtypes compute them)
spacing = _inexact("spacing", np.spacing,
                   "Elementwise distance from ``x`` to the next larger-magnitude representable "
                   "value (signed like ``x``).", domain="real_inexact",
                   formula=S.ScalarFormula(lambda x, **_: S.spacing(x) if S.is_float(x.dtype)
                                           else None, lowp=None))


def _logaddexp_weight(expfn, half):
    """d ans / d x1 of logaddexp (``expfn=exp``) or logaddexp2 (``exp2``): ``expfn(x1 - ans)``,
    which is in [0, 1] (no overflow). Where ``x1 - ans`` is nan (both inputs the same infinity,
    or a nan input) the weight is 1/2 if ``x2 - ans`` is nan too, else 1 (``x1 = +inf`` wins);
    the double where keeps nan out of the unselected branch (and so out of reverse mode)."""
    def weight(g, ans, x, y):
        d = subtract(x, ans)
        bad = snp().isnan(d)
        w = expfn(_where(bad, 0, d))
        fallback = _where(snp().isnan(subtract(y, ans)), half, 1)
        return multiply(g, _where(bad, fallback, w))
    return weight


def _swap(fn):
    return lambda g, ans, x, y: fn(g, ans, y, x)


_lae, _lae2 = _logaddexp_weight(exp, 0.5), _logaddexp_weight(exp2, 0.5)
_jvp(logaddexp, _lae, _swap(_lae))
_jvp(logaddexp2, _lae2, _swap(_lae2))


def _hypot_d(g, ans, x, y):
    # x / hypot(x, y), and 0 at (0, 0) (the minimum-norm subgradient) selected by where, not
    # produced by a safe divisor: x / 1 would give the origin a second derivative of 1
    origin = equal(ans, 0)
    return multiply(g, _where(origin, 0, divide(x, _where(origin, 1, ans))))


_jvp(hypot, _hypot_d, _swap(_hypot_d))


def _copysign_dx(g, ans, x, y):
    # d|x| sgn(y) / dx = +1 where the sign bits of x and y agree, else -1.
    return _where(not_equal(signbit(x), signbit(y)), negative(g), g)


def _heaviside_dx2(g, ans, x1, x2):
    # heaviside(0, x2) == x2: the second operand matters only where x1 == 0.
    return _where(equal(x1, 0), g, 0)


def _nextafter_dx1(g, ans, x1, x2):
    # nextafter(x1, x2) is x1 moved by one ulp: it follows x1 (derivative 1, as finite
    # differences see it) and depends on x2 only through the direction of the step.
    return broadcast_to_shape(g, ans.shape)


_jvp(copysign, _copysign_dx, None)
_jvp(heaviside, None, _heaviside_dx2)
_jvp(nextafter, _nextafter_dx1, None)
defjvp_zero(spacing.primitive)  # constant between powers of two

# ---- rounding ----------------------------------------------------------------------------------
# floor / ceil / trunc of integers and bool are the input itself (Array API: same dtype), with
# no primitive in a staged program.

_floor = unary("floor", np.floor, formula=S.math1("floor", ints=lambda x: x), domain="real")
_ceil = unary("ceil", np.ceil, formula=S.math1("ceil", ints=lambda x: x), domain="real")
_trunc = unary("trunc", np.trunc, formula=S.math1("trunc", ints=lambda x: x), domain="real")


def floor(x, /):
    """Elementwise largest integer <= x."""
    x = operand(x, "floor")
    if x.dtype.kind in "biu":
        return x
    return _floor(x)


def ceil(x, /):
    """Elementwise smallest integer >= x."""
    x = operand(x, "ceil")
    if x.dtype.kind in "biu":
        return x
    return _ceil(x)


def trunc(x, /):
    """Elementwise integer part of x, rounding toward zero."""
    x = operand(x, "trunc")
    if x.dtype.kind in "biu":
        return x
    return _trunc(x)


_ROUNDING_NOTE = ("Integer and bool input is returned unchanged (Array API); complex raises "
                  "TypeError. -0.0 and nan are kept.")
# Each wrapper's docstring is its summary; unary_doc adds the shared sections.
for _fn in (floor, ceil, trunc):
    _fn.__doc__ = unary_doc(_fn.__doc__, "real", notes=_ROUNDING_NOTE + (
        " Alias: ``fix``." if _fn is trunc else ""))
    _fn.primitive = globals()["_" + _fn.__name__].primitive
fix = trunc

rint = _inexact("rint", np.rint, "Elementwise round to the nearest integer, ties to even.",
                "Integer input is promoted to float32 first (JAX). Complex input rounds both "
                "parts.")


def param_unary_primitive(name, impl):
    """A one-operand elementwise primitive with static params (output aval = input aval)."""
    prim = Primitive(name, family="elementwise")
    prim.impl = impl
    prim.abstract_eval = lambda x, **params: x
    prim.weak_type = lambda w, **params: w
    prim.meta.update(nin=1, out="same", numpy_impl=impl)
    prim.sharding = RS.elementwise()   # rounding / clamping: partial sums stay unsplit
    return prim


def _round_impl(x, *, decimals):
    if x.dtype in _LOW:
        return np.round(np.asarray(x, np.float32), decimals).astype(x.dtype)
    if x.dtype.kind in "iu" and decimals < 0:
        return _round_int(np.asarray(x), 10 ** -decimals)
    return np.round(x, decimals)


def _round_int(x, p):
    """Integers rounded to multiples of ``p``, half to even, exactly in integer arithmetic
    (NumPy goes through float64 and an out-of-range cast, whose result is undefined); a result
    beyond the dtype wraps like every integer operation."""
    wide = np.uint64 if x.dtype.kind == "u" else np.int64
    info = np.iinfo(x.dtype)
    if p // 2 >= max(-int(info.min), int(info.max)):   # every |x| <= p / 2: rounds to 0
        return np.zeros_like(x)
    if p > np.iinfo(wide).max:   # (int64 to 10**19) Python integers, exactly
        bits = 2 ** info.bits

        def one(v):
            q, r = divmod(int(v), p)
            q += 2 * r > p or (2 * r == p and q % 2)
            return (q * p - int(info.min)) % bits + int(info.min)
        return np.array([one(v) for v in x.reshape(-1)], dtype=x.dtype).reshape(x.shape)
    w = x.astype(wide)
    pw = wide(p)
    q = np.floor_divide(w, pw)
    r = w - q * pw                     # 0 <= r < p
    half = pw // wide(2)
    up = (r > half) | ((r == half) & (q % wide(2) == wide(1)))
    with np.errstate(over="ignore"):
        return ((q + up.astype(wide)) * pw).astype(x.dtype)


round_p = param_unary_primitive("round", _round_impl)


def _power_of_ten(n):
    """NumPy's scale factor of ``round(x, n)`` (numpy/_core/src/multiarray/calculation.c,
    ``power_of_ten``): exact up to 1e8, then multiplied by 10 step by step, so that beyond 1e22
    it is not 10**n rounded once (``round(1e30, 39)`` depends on it)."""
    if n < 9:
        return float(10 ** n)
    r = 1e9
    for _ in range(n - 9):
        r *= 10.0
    return r


def _round_formula(x, *, out, params, fmt):
    # NumPy: f = power_of_ten(|d|) in the operand's dtype; rint(x * f) / f, or rint(x / f) * f
    # for d < 0; float16 rounds each step to float16 (its loops are float32 ones)
    d = int(params.get("decimals", 0))
    if not S.is_float(x.dtype):
        return x if x.dtype.kind in "iu" and d >= 0 else None
    if d == 0:
        return S.rint(x)
    step = fmt if fmt == np.float16 else x.dtype
    f = S.cast(S.lit(_power_of_ten(abs(d)), step), x.dtype, exact=True)
    y = x * f if d > 0 else x / f
    if fmt == np.float16:
        y = S.cast(S.cast(y, np.float16), S.F32, exact=True)
    return S.rint(y) / f if d > 0 else S.rint(y) * f


round_p.scalar_formula = S.ScalarFormula(_round_formula)


def round(x, /, decimals=0):  # noqa: A001  (the Array API name)
    """Elementwise round to ``decimals`` decimal places, ties to even (IEEE 754 / Array API).

    Args:
        x: array of shape ``(*shape)``; any numeric dtype (bool raises TypeError).
        decimals: static int: decimal places; negative rounds to tens, hundreds, ...
    Returns:
        Array of shape ``(*shape)`` and the dtype of ``x``. Integer input with
        ``decimals >= 0`` is returned unchanged; with ``decimals < 0`` it is rounded exactly
        (half to even) and a result beyond the dtype wraps, as integer arithmetic does
        (``uint32 4294967295`` to tens is 4). Complex input rounds both parts.
    Raises:
        TypeError: ``x`` is bool, or ``decimals`` is not an int.

    For ``decimals != 0`` floats are scaled by ``10 ** decimals``, rounded to even and scaled
    back in the input dtype (NumPy's method), so results can differ from decimal rounding of
    the printed value (``round(2.675, 2) == 2.67`` in float64). bfloat16 / float8 / float4 work
    in float32 and round the result back.
    """
    x = operand(x, "round")
    dt = x.dtype
    _check_domain("round", dt, "numeric")
    try:
        decimals = operator.index(decimals)
    except TypeError:
        raise TypeError(f"round: decimals must be an int, got {type(decimals).__name__}") from None
    if dt.kind in "iu" and decimals >= 0:
        return x
    return round_p.bind(x, decimals=decimals)


round.primitive = round_p

# Rounding is piecewise constant: zero derivative (also at the jumps, as in JAX).
for _p in (_floor.primitive, _ceil.primitive, _trunc.primitive, rint.primitive, round_p):
    defjvp_zero(_p)
batch_unary_same_axis(round_p)

# ---- floating-point predicates -----------------------------------------------------------------

def _predicate(op, otherwise):
    """The formula of the float predicate ``op``: ``otherwise`` for integers and bool."""
    return lambda x, **_: S.call(op, x) if x.dtype.kind == "f" else S.lit(otherwise, S.BOOL)


isfinite = unary("isfinite", np.isfinite, formula=_predicate("isfinite", True), out="bool",
                 doc=unary_doc(
    "Elementwise test for finite values (not inf, not nan).", "any", "bool",
    notes="Integer and bool input is always finite; complex is finite when both parts are."))
isinf = unary("isinf", np.isinf, formula=_predicate("isinf", False), out="bool",
              doc=unary_doc(
    "Elementwise test for +-inf.", "any", "bool",
    notes="Complex is infinite when either part is."))
isnan = unary("isnan", np.isnan, formula=_predicate("isnan", False), out="bool",
              doc=unary_doc(
    "Elementwise test for nan.", "any", "bool", notes="Complex is nan when either part is."))
def _signbit_formula(x, *, out, params, fmt):
    if S.is_floating(x.dtype):
        return S.signbit(x)
    return S.lt(x, 0) if x.dtype.kind == "i" else S.lit(False, S.BOOL)


signbit = unary("signbit", np.signbit,
                formula=S.ScalarFormula(_signbit_formula, lowp=None),
                domain="real", out="bool", doc=unary_doc(
    "Elementwise test of the sign bit (True for -0.0 and negative numbers, and for nan with the "
    "sign bit set).", "real", "bool"))
for _p in (isfinite, isinf, isnan, signbit):
    defjvp_zero(_p.primitive)

# ---- complex parts -----------------------------------------------------------------------------

_real = unary("real", np.real,
              formula=S.ScalarFormula(S.same, lowp="exact"),
              out="real", partials=RS.UNARY_SUM)
_imag = unary("imag", np.imag,
              formula=lambda x,
              *, out, **_: S.lit(0, out), out="real", partials=RS.UNARY_SUM)
_conj = unary("conj", np.conjugate,
              formula=S.ScalarFormula(S.same, lowp="exact"),
              partials=RS.UNARY_SUM)


def real(x, /):
    """Elementwise real part.

    Args:
        x: array of shape ``(*shape)``; any dtype.
    Returns:
        Array of shape ``(*shape)``: complex64 -> float32, complex128 -> float64; non-complex
        input is returned unchanged (NumPy; the Array API only defines complex input).
    """
    x = operand(x, "real")
    if x.dtype.kind != "c":
        return x
    return _real(x)


def imag(x, /):
    """Elementwise imaginary part.

    Args:
        x: array of shape ``(*shape)``; any dtype.
    Returns:
        Array of shape ``(*shape)``: complex64 -> float32, complex128 -> float64; non-complex
        input gives zeros of its own dtype (NumPy).
    """
    return _imag(x)


def conj(x, /):
    """Elementwise complex conjugate.

    Args:
        x: array of shape ``(*shape)``; any dtype.
    Returns:
        Array of shape ``(*shape)`` and the dtype of ``x``; non-complex input is returned
        unchanged. Alias: ``conjugate``.
    """
    x = operand(x, "conj")
    if x.dtype.kind != "c":
        return x
    return _conj(x)


real.primitive, imag.primitive, conj.primitive = _real.primitive, _imag.primitive, _conj.primitive

# Complex parts are linear. Transposes are the plain (non-conjugating) ones, characterised by
# Re<transpose(ct), t> == Re<ct, f(t)> for every tangent t:
#   real: ct * Re(t) == Re((ct + 0j) t)        ->  ct + 0j
#   imag: ct * Im(t) == Re((-1j ct) t)         ->  -1j * ct
#   conj: Re(ct conj(t)) == Re(conj(ct) t)     ->  conj(ct)
# On real operands (imag of a real array is zeros) the cotangent is ct (real) or zero (imag).


def _part_transpose(part):
    def transpose(ct, x):
        aval = x.aval
        if type(ct) is Zero:
            return [Zero(tangent_aval(aval))]
        if aval.dtype.kind != "c":
            return [ct if part == "real" else Zero(tangent_aval(aval))]
        if part == "conj":
            return [_conj.primitive.bind(ct)]
        ct = convert_element_type(ct, aval.dtype, False)
        return [ct if part == "real" else multiply(ct, -1j)]
    return transpose


for _f, _part in ((_real, "real"), (_imag, "imag"), (_conj, "conj")):
    deflinear(_f.primitive, _part_transpose(_part))
conjugate = conj
del _fn, _p, _f, _part
