"""Elementwise arithmetic, comparison, logical and bitwise ops (the operators of Array).

Semantics follow NumPy on the promoted dtype (JAX promotion, weak Python scalars):

* Integer overflow wraps (two's complement): ``int8 127 + 1 == -128``, ``abs(int8 -128) == -128``.
* Integer division by zero gives NumPy's values without a warning: ``floor_divide`` and
  ``remainder`` (and ``fmod``) give 0; ``divide`` works in floats (inf / nan).
* bool: ops that NumPy keeps closed on bool keep NumPy's meaning (``add`` is logical or,
  ``multiply`` logical and, ``abs`` the identity, bitwise ops are logical); ops that NumPy rejects
  or silently turns into int8 (``subtract``, ``negative``, ``positive``, ``sign``, ``square``,
  ``floor_divide``, ``remainder``, ``fmod``, ``pow``) raise TypeError.
* Ordering comparisons of complex numbers raise TypeError (Array API); equality is fine.
"""
from __future__ import annotations

import numpy as np

from ...core import dtypes as _dt, scalar as S
from ..array import Array
from ..convert import operand
from .elementwise_docs import SUBGRADIENTS, binary_doc, unary_doc
from .elementwise_family import DOMAINS, _check_domain, binary, unary
from . import rules_sharding as RS

__all__ = [
    "add", "subtract", "multiply", "divide", "true_divide", "floor_divide", "remainder", "mod",
    "fmod", "pow", "power", "negative", "positive", "abs", "absolute", "sign", "reciprocal",
    "square", "equal", "not_equal", "less", "less_equal", "greater", "greater_equal",
    "logical_and", "logical_or", "logical_xor", "logical_not", "bitwise_and", "bitwise_or",
    "bitwise_xor", "bitwise_invert", "bitwise_not", "invert", "bitwise_left_shift",
    "bitwise_right_shift", "left_shift", "right_shift",
]

# ---- arithmetic --------------------------------------------------------------------------------

add = binary("add", np.add, formula=lambda a, b, **_: a + b, partials=RS.LINEAR_SUM, doc=binary_doc(
    "Elementwise ``x1 + x2``.", "any",
    notes="bool + bool is logical or (NumPy). Integer overflow wraps."))

subtract = binary("subtract", np.subtract,
                  formula=lambda a,
                  b, **_: a - b, domain="numeric", partials=RS.LINEAR_SUM,
                  doc=binary_doc(
    "Elementwise ``x1 - x2``.", "numeric", notes="Integer overflow wraps (uint8 0 - 1 == 255)."))

multiply = binary("multiply", np.multiply, formula=lambda a, b, **_: a * b, doc=binary_doc(
    "Elementwise ``x1 * x2``.", "any",
    notes="bool * bool is logical and (NumPy). Integer overflow wraps."))

divide = binary("divide", np.true_divide,
                formula=lambda a,
                b, **_: a / b, domain="inexact", doc=binary_doc(
    "Elementwise true division ``x1 / x2``.", "inexact",
    notes="Integer (and bool) operands are promoted to float32 first (JAX; NumPy uses float64): "
          "``divide(1, 0)`` is inf, ``divide(0, 0)`` nan. Alias: ``true_divide``."))
true_divide = divide

# ml_dtypes' ufuncs (every low-precision format but NumPy's own float16) give x // 0 as x / 0
# with a positive NaN, and x % 0 as +NaN.
_ML_DTYPES = frozenset(S.LOWP) - {_dt.float16}


def _floor_divide_formula(a, b, *, out, params, fmt):
    q = S.floordiv(a, b)
    if fmt in _ML_DTYPES:
        d = a / b
        return S.select(S.eq(b, 0), S.select(S.isnan(d), S.fabs(d), d), q)
    return q


floor_divide = binary("floor_divide", np.floor_divide,
                      formula=_floor_divide_formula,
                      domain="real_num", doc=binary_doc(
    "Elementwise floor division ``floor(x1 / x2)`` (Python's ``//``).", "real_num",
    notes="Integers: division by zero gives 0 (NumPy), ``int8 -128 // -1`` wraps to -128. "
          "Floats: IEEE results (``1.0 // 0.0`` is inf, ``0.0 // 0.0`` nan)."))

def _remainder_formula(a, b, *, out, params, fmt):
    r = S.mod(a, b)
    return S.select(S.eq(b, 0), float("nan"), r) if fmt in _ML_DTYPES else r


remainder = binary("remainder", np.remainder,
                   formula=_remainder_formula,
                   domain="real_num", doc=binary_doc(
    "Elementwise remainder ``x1 - floor_divide(x1, x2) * x2``: the sign of ``x2`` (Python's "
    "``%``, NumPy's ``remainder`` / ``mod``).", "real_num",
    notes="Integer division by zero gives 0 (NumPy). Float ``x % 0.0`` is nan. Alias: ``mod``."))
mod = remainder

fmod = binary("fmod", np.fmod,
              formula=lambda a,
              b, **_: S.fmod(a, b), domain="real_num", doc=binary_doc(
    "Elementwise C-style remainder: the sign of ``x1`` (``fmod(-7, 3) == -1``).", "real_num",
    notes="Integer division by zero gives 0 (NumPy)."))


def _pow_impl(x1, x2):
    if x2.dtype.kind == "i":
        neg = x2 < 0
        if neg.any():
            return _int_pow_negative(x1, x2, neg)
    return np.power(x1, x2)


def _int_pow_negative(x1, x2, neg):
    # The truncated exact value of x1 ** x2 for x2 < 0 (see pow's docstring): NumPy raises here,
    # which a traced program cannot do, so Starling defines the result instead.
    out = np.power(x1, np.where(neg, 0, x2).astype(x2.dtype))
    odd = (x2 & 1).astype(bool)
    at_neg = np.where(x1 == 1, 1, np.where(x1 == -1, np.where(odd, -1, 1), 0))
    return np.where(neg, at_neg, out).astype(x1.dtype)


def _pow_formula(a, b, *, out, params, fmt):
    return S.pow(a, b) if a.dtype.kind in "iuf" else None


_power = binary("pow", _pow_impl, formula=_pow_formula, domain="numeric", doc="")


def pow(x1, x2, /):  # noqa: A001  (the Array API name)
    """Elementwise power ``x1 ** x2``."""
    # The static check below is the only extra work; array exponents go straight to the
    # family wrapper.
    if type(x2) is int and x2 < 0:
        _check_negative_int_exponent(x1, x2)
    return _power(x1, x2)


def _check_negative_int_exponent(x1, x2):
    if type(x1) in (int, bool):
        kind = "i"
    else:
        kind = operand(x1, "pow").dtype.kind
    if kind in "biu":
        name = type(x1).__name__ if type(x1) in (int, bool) else operand(x1, "pow").dtype
        raise ValueError(f"pow: integers to negative integer powers are not allowed (base of "
                         f"dtype {name}, exponent {x2}); cast the base to a float dtype or use "
                         f"float_power")


# Each wrapper's docstring is its summary; binary_doc / unary_doc add the shared sections.
pow.__doc__ = binary_doc(
    pow.__doc__, "numeric",
    notes="""\
Integer powers wrap on overflow. Integer bases with a negative integer exponent:

* a negative Python int exponent raises ValueError (as NumPy does), since it is known
  statically (``x_int ** -1``);
* an exponent array holding negative values cannot raise (values are unknown when traced);
  the result is the exact power truncated toward zero: 1 for base 1, ``(-1) ** x2`` for base
  -1 and 0 for every other base, base 0 included (NumPy would raise ValueError).

``0.0 ** negative`` is inf; a negative float base to a non-integer power is nan; complex
powers use the principal branch. Alias: ``power``.

Derivatives: ``d/dx1 = x2 * x1 ** (x2 - 1)``, defined as 0 where ``x1 == x2 == 0``;
``d/dx2 = log(x1) * x1 ** x2``, defined as 0 where ``x1 == 0`` (the limit from ``x2 > 0``), so
a zero base gives no NaN in first or higher derivatives (``grad(lambda x: x ** 2)(0.0) == 0``).""")
pow.primitive = _power.primitive
power = pow

negative = unary("negative", np.negative,
                 formula=S.ScalarFormula(lambda x, **_: -x, lowp="exact"),
                 domain="numeric", partials=RS.UNARY_SUM,
                 doc=unary_doc(
    "Elementwise ``-x``.", "numeric", notes="Integer overflow wraps: ``-int8(-128) == -128``; "
    "unsigned integers wrap modulo 2**bits."))


def positive(x, /):
    """Elementwise ``+x``: returns ``x`` itself (arrays are immutable, so no copy is made).

    Args:
        x: array of shape ``(*shape)``; any numeric dtype (bool raises TypeError, as in NumPy).
    Returns:
        ``x`` (shape ``(*shape)``, same dtype and weak type).
    Raises:
        TypeError: ``x`` is bool.
    """
    x = operand(x, "positive")
    _check_domain("positive", x.dtype, "numeric")
    return x


def _abs_formula(x, *, out, params, fmt):
    if x.dtype.kind == "f":
        return S.fabs(x)
    return S.select(S.lt(x, 0), 0 - x, x) if x.dtype.kind == "i" else x


abs = unary("abs", np.absolute,
            formula=S.ScalarFormula(_abs_formula, lowp="exact"),
            out="real", doc=unary_doc(  # noqa: A001
    "Elementwise absolute value ``|x|`` (the modulus for complex input).", "any", "real",
    notes="Integer overflow wraps: ``abs(int8(-128)) == -128`` (NumPy). bool is the identity. "
          "Alias: ``absolute``. Derivative: ``sign(x)`` for real ``x``; ``Re(conj(x) dx) / |x|`` "
          "for complex ``x`` (so ``grad(lambda z: abs(z) ** 2)(z) == 2 * conj(z)``).\n\n"
          + SUBGRADIENTS))
absolute = abs

def _sign_formula(x, *, out, params, fmt):
    if x.dtype.kind == "u":
        return S.cast(S.gt(x, 0), x.dtype)
    if fmt in _ML_DTYPES:   # ml_dtypes: the sign of +-0 is that zero
        return S.select(S.eq(x, 0), x, S.sign(x))
    return S.sign(x)


sign = unary("sign", np.sign,
             formula=S.ScalarFormula(_sign_formula, lowp="exact"),
             domain="numeric", doc=unary_doc(
    "Elementwise sign: -1, 0 or 1 (0 for +-0.0; nan for nan). Complex: ``x / |x|`` (0 at 0), "
    "the Array API 2023.12 definition.", "numeric"))

reciprocal = unary("reciprocal", np.reciprocal,
                   formula=lambda x,
                   **_: 1 / x, domain="inexact", doc=unary_doc(
    "Elementwise ``1 / x``.", "inexact",
    notes="Integers are promoted to float32 first (as in JAX; NumPy's integer reciprocal "
          "truncates)."))

square = unary("square", np.square, formula=lambda x, **_: x * x, domain="numeric", doc=unary_doc(
    "Elementwise ``x * x``.", "numeric", notes="Integer overflow wraps."))

# ---- comparisons -------------------------------------------------------------------------------

equal = binary("equal", np.equal, formula=lambda a, b, **_: S.eq(a, b), out="bool", doc=binary_doc(
    "Elementwise ``x1 == x2``.", "any", "bool",
    notes="NaN compares unequal to everything; -0.0 == 0.0."))
not_equal = binary("not_equal", np.not_equal,
                   formula=lambda a,
                   b, **_: S.ne(a, b), out="bool", doc=binary_doc(
    "Elementwise ``x1 != x2``.", "any", "bool", notes="NaN != anything is True."))
less = binary("less", np.less,
              formula=lambda a,
              b, **_: S.lt(a, b), domain="real", out="bool", doc=binary_doc(
    "Elementwise ``x1 < x2``.", "real", "bool",
    notes="Complex operands raise TypeError: they have no order (Array API)."))
less_equal = binary("less_equal", np.less_equal,
                    formula=lambda a,
                    b, **_: S.le(a, b), domain="real", out="bool", doc=binary_doc(
    "Elementwise ``x1 <= x2``.", "real", "bool",
    notes="Complex operands raise TypeError: they have no order (Array API)."))
greater = binary("greater", np.greater,
                 formula=lambda a,
                 b, **_: S.gt(a, b), domain="real", out="bool", doc=binary_doc(
    "Elementwise ``x1 > x2``.", "real", "bool",
    notes="Complex operands raise TypeError: they have no order (Array API)."))
greater_equal = binary("greater_equal", np.greater_equal,
                       formula=lambda a,
                       b, **_: S.ge(a, b), domain="real", out="bool",
                       doc=binary_doc("Elementwise ``x1 >= x2``.", "real", "bool",
                                      notes="Complex operands raise TypeError: they have no "
                                            "order (Array API)."))

# ---- logical -----------------------------------------------------------------------------------
# The primitives take bool operands only; the public functions first turn each non-bool operand
# into its truth value (x != 0) separately, as NumPy does, so no cross-dtype promotion happens.

_BOOL = DOMAINS["bool"]


def _truth(x, op):
    if type(x) is bool:
        return x
    x = operand(x, op)
    if x.dtype in _BOOL:
        return x
    return not_equal(x, 0)


_LOGICAL_NOTE = ("Non-bool operands count as their truth value ``x != 0`` (each on its own, "
                 "before any promotion; NaN is true), as in NumPy.")

_logical_and = binary("logical_and", np.logical_and,
                      formula=lambda a,
                      b, **_: S.and_(a, b), domain="bool", out="bool")
_logical_or = binary("logical_or", np.logical_or,
                     formula=lambda a,
                     b, **_: S.or_(a, b), domain="bool", out="bool")
_logical_xor = binary("logical_xor", np.logical_xor,
                      formula=lambda a,
                      b, **_: S.xor_(a, b), domain="bool", out="bool")
_logical_not = unary("logical_not", np.logical_not,
                     formula=lambda x,
                     **_: S.not_(x), domain="bool", out="bool")


def _both_bool(x1, x2):
    return x1._buf.dtype in _BOOL and x2._buf.dtype in _BOOL


def logical_and(x1, x2, /):
    """Elementwise logical and of the truth values."""
    if type(x1) is Array and type(x2) is Array and _both_bool(x1, x2):
        return _logical_and(x1, x2)
    return _logical_and(_truth(x1, "logical_and"), _truth(x2, "logical_and"))


def logical_or(x1, x2, /):
    """Elementwise logical or of the truth values."""
    if type(x1) is Array and type(x2) is Array and _both_bool(x1, x2):
        return _logical_or(x1, x2)
    return _logical_or(_truth(x1, "logical_or"), _truth(x2, "logical_or"))


def logical_xor(x1, x2, /):
    """Elementwise logical exclusive or of the truth values."""
    if type(x1) is Array and type(x2) is Array and _both_bool(x1, x2):
        return _logical_xor(x1, x2)
    return _logical_xor(_truth(x1, "logical_xor"), _truth(x2, "logical_xor"))


def logical_not(x, /):
    """Elementwise logical not of the truth value."""
    return _logical_not(_truth(x, "logical_not"))


# Each wrapper's docstring is its summary; binary_doc / unary_doc add the shared sections.
for _fn in (logical_and, logical_or, logical_xor):
    _fn.__doc__ = binary_doc(_fn.__doc__, "any", "bool", notes=_LOGICAL_NOTE, promote=False)
    _fn.primitive = globals()["_" + _fn.__name__].primitive
logical_not.__doc__ = unary_doc(logical_not.__doc__, "any", "bool", notes=_LOGICAL_NOTE)
logical_not.primitive = _logical_not.primitive
del _fn

# ---- bitwise -----------------------------------------------------------------------------------

bitwise_and = binary("bitwise_and", np.bitwise_and,
                     formula=lambda a,
                     b, **_: a & b, domain="integer", doc=binary_doc(
    "Elementwise bitwise and ``x1 & x2`` (logical and for bool).", "integer"))
bitwise_or = binary("bitwise_or", np.bitwise_or,
                    formula=lambda a,
                    b, **_: a | b, domain="integer", doc=binary_doc(
    "Elementwise bitwise or ``x1 | x2`` (logical or for bool).", "integer"))
bitwise_xor = binary("bitwise_xor", np.bitwise_xor,
                     formula=lambda a,
                     b, **_: a ^ b, domain="integer", doc=binary_doc(
    "Elementwise bitwise exclusive or ``x1 ^ x2`` (logical xor for bool).", "integer"))
bitwise_invert = unary("bitwise_invert", np.invert,
                       formula=lambda x,
                       **_: ~x, domain="integer", doc=unary_doc(
    "Elementwise bitwise not ``~x`` (two's complement; logical not for bool).", "integer",
    notes="Aliases: ``bitwise_not``, ``invert``."))
bitwise_not = invert = bitwise_invert

_SHIFT_NOTE = ("Shift counts that are negative or at least the bit width give 0 for a left "
               "shift and the sign fill (0 or -1) for a right shift, as in NumPy.")
bitwise_left_shift = binary("bitwise_left_shift", np.left_shift,
                            formula=lambda a,
                            b, **_: S.shl(a, b), domain="int_only",
                            doc=binary_doc("Elementwise ``x1 << x2``.", "int_only",
                                           notes=_SHIFT_NOTE + " Alias: ``left_shift``."))
bitwise_right_shift = binary("bitwise_right_shift", np.right_shift,
                             formula=lambda a,
                             b, **_: S.shr(a, b), domain="int_only",
                             doc=binary_doc("Elementwise arithmetic right shift ``x1 >> x2`` "
                                            "(logical for unsigned).", "int_only",
                                            notes=_SHIFT_NOTE + " Alias: ``right_shift``."))
left_shift = bitwise_left_shift
right_shift = bitwise_right_shift

# ---- transformation rules ----------------------------------------------------------------------
# Every rule is written with the ops above (and a few public ones from other families, imported
# lazily through rules.snp()), so rules are traceable: grad of grad, vmap of grad. Tangents of a
# broadcast operand are broadcast to the output shape; transposes sum them back (unbroadcast).
# Integer / bool values always have symbolic Zero tangents, so the float formulas below are only
# ever evaluated on floating / complex operands. Batch rules: the family's broadcasting default.

from .rules import (  # noqa: E402  (rules follow the declarations they belong to)
    Zero, broadcast_to_shape, defjvp, defjvp_zero, is_undefined, snp, unbroadcast,
)

_add_p, _sub_p, _mul_p = add.primitive, subtract.primitive, multiply.primitive
_div_p, _neg_p = divide.primitive, negative.primitive


def _add_jvp(primals, tangents):
    ans = _add_p.bind(*primals)
    tx, ty = tangents
    if type(tx) is Zero:
        return ans, broadcast_to_shape(ty, ans.shape)
    if type(ty) is Zero:
        return ans, broadcast_to_shape(tx, ans.shape)
    return ans, add(tx, ty)


def _add_transpose(ct, x, y):
    return [unbroadcast(ct, x.aval) if is_undefined(x) else None,
            unbroadcast(ct, y.aval) if is_undefined(y) else None]


def _sub_jvp(primals, tangents):
    ans = _sub_p.bind(*primals)
    tx, ty = tangents
    if type(tx) is Zero:
        return ans, broadcast_to_shape(negative(ty), ans.shape)
    if type(ty) is Zero:
        return ans, broadcast_to_shape(tx, ans.shape)
    return ans, subtract(tx, ty)


def _sub_transpose(ct, x, y):
    neg = ct if type(ct) is Zero else negative(ct)
    return [unbroadcast(ct, x.aval) if is_undefined(x) else None,
            unbroadcast(neg, y.aval) if is_undefined(y) else None]


def _mul_transpose(ct, x, y):
    # Bilinear: exactly one operand is the linear (undefined) one.
    if is_undefined(x) and is_undefined(y):
        raise ValueError("multiply: transpose with both operands linear (a nonlinear use)")
    if is_undefined(x):
        return [unbroadcast(ct if type(ct) is Zero else multiply(ct, y), x.aval), None]
    return [None, unbroadcast(ct if type(ct) is Zero else multiply(x, ct), y.aval)]


def _div_transpose(ct, x, y):
    # Linear in the numerator only.
    if is_undefined(y):
        raise ValueError("divide: transpose with respect to the denominator (a nonlinear use)")
    return [unbroadcast(ct if type(ct) is Zero else divide(ct, y), x.aval), None]


def _neg_transpose(ct, x):
    return [ct if type(ct) is Zero else negative(ct)]


def _neg_jvp(primals, tangents):
    (t,) = tangents
    return _neg_p.bind(*primals), negative(t)


def _ones_jvp(g, ans, *primals):
    return broadcast_to_shape(g, ans.shape)


def _remainder_dy(g, ans, x, y):
    # remainder = x - floor_divide(x, y) * y with a locally constant quotient.
    return multiply(g, negative(floor_divide(x, y)))


def _fmod_dy(g, ans, x, y):
    # fmod = x - trunc(x / y) * y; trunc(x / y) = sign(x) sign(y) floor(|x| / |y|), all of
    # which have zero derivative, so second derivatives are exact too.
    q = multiply(multiply(sign(x), sign(y)), floor_divide(abs(x), abs(y)))
    return multiply(g, negative(q))


def _pow_dx(g, ans, x, y):
    # y * x ** (y - 1), defined as 0 where x == y == 0 (0 * 0 ** -1 would be nan). The base is
    # replaced by 1 there *before* the power ("double where"), so no inf/nan reaches
    # higher derivatives either.
    where = snp().where
    both0 = logical_and(equal(x, 0), equal(y, 0))
    xs = where(both0, 1, x)
    return multiply(g, where(both0, 0, multiply(y, _power(xs, subtract(y, 1)))))


def _pow_dy(g, ans, x, y):
    # log(x) * x ** y, defined as 0 at x == 0 (the one-sided limit for y > 0; JAX's choice
    # elsewhere). Base 0 is replaced by 1 before log and pow for the same reason as above.
    where = snp().where
    x0 = equal(x, 0)
    xs = where(x0, 1, x)
    return multiply(g, where(x0, 0, multiply(snp().log(xs), _power(xs, y))))


def _abs_jvp_rule(g, ans, x):
    if x.dtype.kind == "c":
        # d|z| = Re(conj(z) dz) / |z|, and 0 at z == 0 (numerator is 0, denominator made 1).
        s = snp()
        den = s.where(equal(ans, 0), 1, ans)
        return divide(s.real(multiply(s.conj(x), g)), den)
    return multiply(g, sign(x))  # sign(0) == 0: the min-norm subgradient at the kink


defjvp_zero_prims = [
    floor_divide, sign, equal, not_equal, less, less_equal, greater, greater_equal,
    _logical_and, _logical_or, _logical_xor, _logical_not, bitwise_and, bitwise_or,
    bitwise_xor, bitwise_invert, bitwise_left_shift, bitwise_right_shift,
]
for _op in defjvp_zero_prims:
    defjvp_zero(_op.primitive)
del _op, defjvp_zero_prims

_add_p.jvp, _add_p.transpose, _add_p.is_linear = _add_jvp, _add_transpose, True
_sub_p.jvp, _sub_p.transpose, _sub_p.is_linear = _sub_jvp, _sub_transpose, True
_neg_p.jvp, _neg_p.transpose, _neg_p.is_linear = _neg_jvp, _neg_transpose, True
defjvp(_mul_p, lambda g, ans, x, y: multiply(g, y), lambda g, ans, x, y: multiply(x, g))
_mul_p.transpose, _mul_p.is_linear = _mul_transpose, True
defjvp(_div_p, lambda g, ans, x, y: divide(g, y),
       lambda g, ans, x, y: multiply(g, negative(divide(ans, y))))
_div_p.transpose, _div_p.is_linear = _div_transpose, True
defjvp(remainder.primitive, _ones_jvp, _remainder_dy)
defjvp(fmod.primitive, _ones_jvp, _fmod_dy)
defjvp(_power.primitive, _pow_dx, _pow_dy)
defjvp(abs.primitive, _abs_jvp_rule)
defjvp(reciprocal.primitive, lambda g, ans, x: multiply(g, negative(square(ans))))
defjvp(square.primitive, lambda g, ans, x: multiply(g, multiply(x, 2)))
