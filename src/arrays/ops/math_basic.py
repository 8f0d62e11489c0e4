"""Elementwise math with one primitive per function: exponentials and logarithms, powers and
roots, trigonometric and hyperbolic functions, rounding, floating-point predicates, complex parts.

Functions that need floats promote bool and integer input to float32 (the default float, as in
JAX: ``sin(int64) -> float32``; NumPy would give float64). Special values follow IEEE 754 and
NumPy, silently (no warnings): ``log(0) == -inf``, ``log(-1)`` and ``sqrt(-1)`` are nan for real
input, ``arctanh(+-1) == +-inf``. Complex input uses NumPy's principal branches.
"""
from __future__ import annotations

import operator

import numpy as np

from ...core.primitive import Primitive
from ..convert import operand
from .elementwise_docs import binary_doc, unary_doc
from .elementwise_family import _LOW, _check_domain, binary, unary

__all__ = [
    "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt", "cbrt", "sin", "cos", "tan",
    "arcsin", "asin", "arccos", "acos", "arctan", "atan", "arctan2", "atan2", "sinh", "cosh",
    "tanh", "arcsinh", "asinh", "arccosh", "acosh", "arctanh", "atanh", "logaddexp",
    "logaddexp2", "hypot", "copysign", "nextafter", "heaviside", "spacing", "floor", "ceil",
    "trunc", "fix", "rint", "round", "isfinite", "isinf", "isnan", "signbit", "real", "imag",
    "conj", "conjugate",
]


def _inexact(name, impl, summary, notes="", domain="inexact"):
    return unary(name, impl, domain=domain, doc=unary_doc(summary, domain, notes=notes))


# ---- exponentials, logarithms, powers ----------------------------------------------------------

exp = _inexact("exp", np.exp, "Elementwise ``e ** x``.", "Overflow gives inf.")
exp2 = _inexact("exp2", np.exp2, "Elementwise ``2 ** x``.")
expm1 = _inexact("expm1", np.expm1, "Elementwise ``exp(x) - 1``, accurate for small ``|x|``.")
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

# ---- trigonometric and hyperbolic --------------------------------------------------------------

sin = _inexact("sin", np.sin, "Elementwise sine (radians).")
cos = _inexact("cos", np.cos, "Elementwise cosine (radians).")
tan = _inexact("tan", np.tan, "Elementwise tangent (radians).")
arcsin = _inexact("arcsin", np.arcsin, "Elementwise inverse sine, in ``[-pi/2, pi/2]``.",
                  "``|x| > 1`` gives nan for real input. Alias: ``asin``.")
arccos = _inexact("arccos", np.arccos, "Elementwise inverse cosine, in ``[0, pi]``.",
                  "``|x| > 1`` gives nan for real input. Alias: ``acos``.")
arctan = _inexact("arctan", np.arctan, "Elementwise inverse tangent, in ``[-pi/2, pi/2]``.",
                  "Alias: ``atan``.")
sinh = _inexact("sinh", np.sinh, "Elementwise hyperbolic sine.")
cosh = _inexact("cosh", np.cosh, "Elementwise hyperbolic cosine.")
tanh = _inexact("tanh", np.tanh, "Elementwise hyperbolic tangent.")
arcsinh = _inexact("arcsinh", np.arcsinh, "Elementwise inverse hyperbolic sine.",
                   "Alias: ``asinh``.")
arccosh = _inexact("arccosh", np.arccosh, "Elementwise inverse hyperbolic cosine.",
                   "``x < 1`` gives nan for real input. Alias: ``acosh``.")
arctanh = _inexact("arctanh", np.arctanh, "Elementwise inverse hyperbolic tangent.",
                   "``arctanh(+-1) == +-inf``; ``|x| > 1`` gives nan for real input. "
                   "Alias: ``atanh``.")
asin, acos, atan = arcsin, arccos, arctan
asinh, acosh, atanh = arcsinh, arccosh, arctanh

arctan2 = binary("arctan2", np.arctan2, domain="real_inexact", doc=binary_doc(
    "Elementwise angle of the point ``(x2, x1)``: ``arctan(x1 / x2)`` in the right quadrant, "
    "in ``[-pi, pi]``.", "real_inexact",
    notes="Signed zeros select the quadrant as in IEEE 754 / C ``atan2`` "
          "(``arctan2(0.0, -0.0) == pi``). Alias: ``atan2``."))
atan2 = arctan2

# ---- other binary float functions --------------------------------------------------------------

logaddexp = binary("logaddexp", np.logaddexp, domain="real_inexact", doc=binary_doc(
    "Elementwise ``log(exp(x1) + exp(x2))`` without overflow.", "real_inexact",
    notes="``logaddexp(-inf, -inf) == -inf``; ``logaddexp(inf, inf) == inf``."))
logaddexp2 = binary("logaddexp2", np.logaddexp2, domain="real_inexact", doc=binary_doc(
    "Elementwise ``log2(2 ** x1 + 2 ** x2)`` without overflow.", "real_inexact"))
hypot = binary("hypot", np.hypot, domain="real_inexact", doc=binary_doc(
    "Elementwise ``sqrt(x1 ** 2 + x2 ** 2)`` without intermediate overflow.", "real_inexact",
    notes="``hypot(inf, nan) == inf`` (IEEE 754)."))
copysign = binary("copysign", np.copysign, domain="real_inexact", doc=binary_doc(
    "Elementwise ``|x1|`` with the sign bit of ``x2`` (``copysign(1, -0.0) == -1``).",
    "real_inexact"))
nextafter = binary("nextafter", np.nextafter, domain="real_inexact", doc=binary_doc(
    "Elementwise next representable value after ``x1`` in the direction of ``x2``.",
    "real_inexact", notes="Works in the promoted dtype (so steps are float16 / bfloat16 "
                          "steps for those dtypes)."))
heaviside = binary("heaviside", np.heaviside, domain="real_inexact", doc=binary_doc(
    "Elementwise Heaviside step: 0 for ``x1 < 0``, ``x2`` for ``x1 == 0``, 1 for ``x1 > 0``.",
    "real_inexact", notes="nan in ``x1`` gives nan."))
spacing = _inexact("spacing", np.spacing,
                   "Elementwise distance from ``x`` to the next larger-magnitude representable "
                   "value (signed like ``x``).", domain="real_inexact")

# ---- rounding ----------------------------------------------------------------------------------
# floor / ceil / trunc of integers and bool are the input itself (Array API: same dtype), with
# no primitive in a staged program.

_floor = unary("floor", np.floor, domain="real")
_ceil = unary("ceil", np.ceil, domain="real")
_trunc = unary("trunc", np.trunc, domain="real")


def floor(x, /):
    x = operand(x, "floor")
    if x.dtype.kind in "biu":
        return x
    return _floor(x)


def ceil(x, /):
    x = operand(x, "ceil")
    if x.dtype.kind in "biu":
        return x
    return _ceil(x)


def trunc(x, /):
    x = operand(x, "trunc")
    if x.dtype.kind in "biu":
        return x
    return _trunc(x)


_ROUNDING_NOTE = ("Integer and bool input is returned unchanged (Array API); complex raises "
                  "TypeError. -0.0 and nan are kept.")
for _fn, _what in ((floor, "largest integer <= x"), (ceil, "smallest integer >= x"),
                   (trunc, "integer part of x, rounding toward zero")):
    _fn.__doc__ = unary_doc(f"Elementwise {_what}.", "real", notes=_ROUNDING_NOTE + (
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
    return prim


def _round_impl(x, *, decimals):
    if x.dtype in _LOW:
        return np.round(np.asarray(x, np.float32), decimals).astype(x.dtype)
    return np.round(x, decimals)


round_p = param_unary_primitive("round", _round_impl)


def round(x, /, decimals=0):  # noqa: A001  (the Array API name)
    """Elementwise round to ``decimals`` decimal places, ties to even (IEEE 754 / Array API).

    Args:
        x: array of shape ``(*shape)``; any numeric dtype (bool raises TypeError).
        decimals: static int: decimal places; negative rounds to tens, hundreds, ...
    Returns:
        Array of shape ``(*shape)`` and the dtype of ``x``. Integer input with
        ``decimals >= 0`` is returned unchanged; complex input rounds both parts.
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

# ---- floating-point predicates -----------------------------------------------------------------

isfinite = unary("isfinite", np.isfinite, out="bool", doc=unary_doc(
    "Elementwise test for finite values (not inf, not nan).", "any", "bool",
    notes="Integer and bool input is always finite; complex is finite when both parts are."))
isinf = unary("isinf", np.isinf, out="bool", doc=unary_doc(
    "Elementwise test for +-inf.", "any", "bool",
    notes="Complex is infinite when either part is."))
isnan = unary("isnan", np.isnan, out="bool", doc=unary_doc(
    "Elementwise test for nan.", "any", "bool", notes="Complex is nan when either part is."))
signbit = unary("signbit", np.signbit, domain="real", out="bool", doc=unary_doc(
    "Elementwise test of the sign bit (True for -0.0 and negative numbers, and for nan with the "
    "sign bit set).", "real", "bool"))

# ---- complex parts -----------------------------------------------------------------------------

_real = unary("real", np.real, out="real")
_imag = unary("imag", np.imag, out="real")
_conj = unary("conj", np.conjugate)


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
conjugate = conj
del _fn, _what
