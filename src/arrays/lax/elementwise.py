"""``lax`` elementwise names: JAX's arithmetic without implicit promotion, plus ``clamp``,
``select_n`` and ``integer_pow``.

Every function here is a thin wrapper over a ``starling.numpy`` primitive: it checks that the
operands already share one dtype (Python scalars take it; see _util.same_dtype), so the
primitive runs with no conversion, and inherits that primitive's JVP, transpose, batching,
sharding and C++ formula. Where ``lax`` and NumPy disagree the ``lax`` meaning is kept:
``div`` of integers rounds toward zero and ``rem`` takes the sign of the dividend (C / XLA).
"""
from __future__ import annotations

from ...core import dtypes
from ..ops import gather_scatter as GS
from .. import numpy as snp
from ._util import is_python_scalar, same_dtype, static_int

__all__ = ["add", "sub", "mul", "div", "rem", "max", "min", "neg", "abs", "sign", "exp", "exp2",
           "log", "log1p", "expm1", "sqrt", "rsqrt", "cbrt", "square", "pow", "integer_pow",
           "nextafter", "sin", "cos", "tan", "tanh", "sinh", "cosh", "asin", "acos", "atan",
           "asinh", "acosh", "atanh", "logistic", "complex", "clz", "not_", "atan2", "floor",
           "ceil", "round",
           "is_finite", "eq", "ne", "lt", "le", "gt", "ge", "bitwise_and", "bitwise_or",
           "bitwise_xor", "bitwise_not", "shift_left", "shift_right_arithmetic",
           "shift_right_logical", "clamp", "select_n", "real", "imag", "conj",
           "convert_element_type"]


def _binary(name, fn, summary):
    def op(x, y):
        x, y = same_dtype(name, x, y)
        return fn(x, y)
    op.__name__ = op.__qualname__ = name
    op.__doc__ = (f"{summary}\n\n    Args:\n        x, y: arrays of one dtype and broadcastable "
                  "shapes (a Python scalar takes the\n            other operand's dtype).\n"
                  "    Returns:\n        Array of the broadcast shape.\n    Raises:\n        "
                  "TypeError: the operands' dtypes differ (lax does not promote).\n    ")
    return op


def _unary(name, fn, summary):
    def op(x):
        (x,) = same_dtype(name, x)
        return fn(x)
    op.__name__ = op.__qualname__ = name
    op.__doc__ = (f"{summary}\n\n    Args:\n        x: array of shape ``(*shape)``.\n    "
                  "Returns:\n        Array of shape ``(*shape)``; the dtype rules are those of "
                  f"``starling.numpy.{fn.__name__}``.\n    ")
    return op


add = _binary("add", snp.add, "Elementwise ``x + y``.")
sub = _binary("sub", snp.subtract, "Elementwise ``x - y``.")
mul = _binary("mul", snp.multiply, "Elementwise ``x * y``.")
max = _binary("max", snp.maximum, "Elementwise maximum (NaN propagates).")  # noqa: A001
min = _binary("min", snp.minimum, "Elementwise minimum (NaN propagates).")  # noqa: A001
pow = _binary("pow", snp.power, "Elementwise ``x ** y``.")  # noqa: A001
nextafter = _binary("nextafter", snp.nextafter,
                    "The next representable value after ``x`` in the direction of ``y``.")
atan2 = _binary("atan2", snp.arctan2, "Elementwise ``atan(x / y)`` in the right quadrant.")
eq = _binary("eq", snp.equal, "Elementwise ``x == y`` (bool).")
ne = _binary("ne", snp.not_equal, "Elementwise ``x != y`` (bool).")
lt = _binary("lt", snp.less, "Elementwise ``x < y`` (bool).")
le = _binary("le", snp.less_equal, "Elementwise ``x <= y`` (bool).")
gt = _binary("gt", snp.greater, "Elementwise ``x > y`` (bool).")
ge = _binary("ge", snp.greater_equal, "Elementwise ``x >= y`` (bool).")
bitwise_and = _binary("bitwise_and", snp.bitwise_and, "Elementwise bitwise / logical and.")
bitwise_or = _binary("bitwise_or", snp.bitwise_or, "Elementwise bitwise / logical or.")
bitwise_xor = _binary("bitwise_xor", snp.bitwise_xor, "Elementwise bitwise / logical xor.")
shift_left = _binary("shift_left", snp.left_shift, "Elementwise ``x << y`` (0 past the width).")
shift_right_arithmetic = _binary("shift_right_arithmetic", snp.right_shift,
                                 "Elementwise ``x >> y`` for signed integers (sign-extending).")

neg = _unary("neg", snp.negative, "Elementwise ``-x``.")
abs = _unary("abs", snp.abs, "Elementwise absolute value (complex: the modulus).")  # noqa: A001
sign = _unary("sign", snp.sign, "Elementwise sign: -1, 0 or 1 (NaN stays NaN).")
exp = _unary("exp", snp.exp, "Elementwise ``e ** x``.")
exp2 = _unary("exp2", snp.exp2, "Elementwise ``2 ** x``.")
log = _unary("log", snp.log, "Elementwise natural logarithm.")
log1p = _unary("log1p", snp.log1p, "Elementwise ``log(1 + x)``, accurate near 0.")
expm1 = _unary("expm1", snp.expm1, "Elementwise ``exp(x) - 1``, accurate near 0.")
sqrt = _unary("sqrt", snp.sqrt, "Elementwise square root.")
rsqrt = _unary("rsqrt", snp.rsqrt, "Elementwise ``1 / sqrt(x)``.")
cbrt = _unary("cbrt", snp.cbrt, "Elementwise real cube root (``cbrt(-8) == -2``).")
square = _unary("square", snp.square, "Elementwise ``x * x``.")
sin = _unary("sin", snp.sin, "Elementwise sine.")
cos = _unary("cos", snp.cos, "Elementwise cosine.")
tan = _unary("tan", snp.tan, "Elementwise tangent.")
tanh = _unary("tanh", snp.tanh, "Elementwise hyperbolic tangent.")
sinh = _unary("sinh", snp.sinh, "Elementwise hyperbolic sine.")
cosh = _unary("cosh", snp.cosh, "Elementwise hyperbolic cosine.")
asin = _unary("asin", snp.asin, "Elementwise inverse sine.")
acos = _unary("acos", snp.acos, "Elementwise inverse cosine.")
atan = _unary("atan", snp.atan, "Elementwise inverse tangent.")
asinh = _unary("asinh", snp.asinh, "Elementwise inverse hyperbolic sine.")
acosh = _unary("acosh", snp.acosh, "Elementwise inverse hyperbolic cosine.")
atanh = _unary("atanh", snp.atanh, "Elementwise inverse hyperbolic tangent.")
floor = _unary("floor", snp.floor, "Elementwise round toward -inf.")
ceil = _unary("ceil", snp.ceil, "Elementwise round toward +inf.")
is_finite = _unary("is_finite", snp.isfinite, "Elementwise: not inf and not NaN (bool).")
bitwise_not = _unary("bitwise_not", snp.bitwise_not, "Elementwise bitwise / logical not.")
not_ = _unary("not_", snp.bitwise_not, "Elementwise bitwise / logical not (JAX's ``lax.not_``).")


def logistic(x):
    """Elementwise ``1 / (1 + exp(-x))`` (JAX's ``lax.logistic``), without overflow for large
    ``|x|``; floating ``x`` only (lax does not promote).

    Raises:
        TypeError: a non-floating ``x``.
    """
    (x,) = same_dtype("logistic", x)
    if not dtypes.is_inexact(x.dtype):
        raise TypeError(f"logistic: expected a floating or complex operand, got {x.dtype}")
    if dtypes.is_complex(x.dtype):
        return 1.0 / (1.0 + snp.exp(-x))
    # exp of a non-positive number never overflows: each half sees only its own side (so
    # the other half's derivative is never a NaN); they agree at 0
    pos = x >= 0
    up = snp.exp(-snp.where(pos, x, 0.0))
    down = snp.exp(snp.where(pos, 0.0, x))
    return snp.where(pos, 1.0 / (1.0 + up), down / (1.0 + down))


def complex(x, y):  # noqa: A001  (JAX's name)
    """``x + 1j * y`` from two real arrays of one dtype: float32 -> complex64, float64 ->
    complex128 (JAX's ``lax.complex``).

    Raises:
        TypeError: dtypes that differ or are not float32 / float64.
    """
    x, y = same_dtype("complex", x, y)
    if x.dtype not in (dtypes.float32, dtypes.float64):
        raise TypeError(f"complex: expected float32 or float64 operands, got {x.dtype}")
    return snp.astype(x, dtypes.complex_dtype(x.dtype)) + 1j * y


def clz(x):
    """Count of leading zero bits of each integer (JAX's ``lax.clz``): ``bits`` for 0, 0 for a
    negative signed integer; the dtype is kept.

    Raises:
        TypeError: a non-integer ``x``.
    """
    from .bits import population_count
    (x,) = same_dtype("clz", x)
    if not dtypes.is_integer(x.dtype):
        raise TypeError(f"clz: expected an integer operand, got {x.dtype}")
    # smear the highest set bit into every lower position; the zeros left above it are the
    # leading zeros: bits - popcount(smeared)
    bits = x.dtype.itemsize * 8
    u = snp.astype(x, {8: snp.uint8, 16: snp.uint16, 32: snp.uint32, 64: snp.uint64}[bits])
    shift = 1
    while shift < bits:
        u = u | snp.right_shift(u, snp.asarray(shift, dtype=u.dtype))
        shift *= 2
    return snp.astype(bits - snp.astype(population_count(u), snp.int64), x.dtype)
real = _unary("real", snp.real, "Real part.")
imag = _unary("imag", snp.imag, "Imaginary part.")
conj = _unary("conj", snp.conj, "Complex conjugate.")


def round(x, rounding_method=0):  # noqa: A001  (JAX's name)
    """Elementwise rounding to an integral value.

    Args:
        x: floating array.
        rounding_method: 0 (``AWAY_FROM_ZERO``, the default, as XLA) or 1 (``TO_NEAREST_EVEN``).
    Returns:
        Array of the shape and dtype of ``x``.
    Raises:
        ValueError: another rounding method.
    """
    (x,) = same_dtype("round", x)
    method = int(rounding_method)
    if method == 1:
        return snp.round(x)
    if method != 0:
        raise ValueError(f"lax.round: rounding_method must be 0 (away from zero) or 1 (to "
                         f"nearest even), got {rounding_method!r}")
    # Half-way cases move away from zero: trunc(x + copysign(0.5, x)) is wrong just below .5
    # (0.49999997 + 0.5 rounds up to 1 in float32), so compare the remainder instead.
    t = snp.trunc(x)
    frac = snp.abs(snp.subtract(x, t))
    return snp.where(snp.greater_equal(frac, 0.5), snp.add(t, snp.sign(x)), t)


def div(x, y):
    """Elementwise division; integers round the quotient toward zero (C / XLA semantics, not
    NumPy's floor division).

    Args:
        x, y: arrays of one dtype, broadcastable shapes.
    Returns:
        Array of the broadcast shape and that dtype. Integer division by zero gives 0 here (XLA
        leaves it unspecified).
    Raises:
        TypeError: the operands' dtypes differ.
    """
    x, y = same_dtype("div", x, y)
    if not dtypes.is_integer(x.dtype):
        return snp.divide(x, y)
    q = snp.floor_divide(x, y)
    r = snp.fmod(x, y)
    # floor and truncation differ when the remainder is nonzero and its sign differs from y's.
    fix = snp.logical_and(snp.not_equal(r, 0), snp.not_equal(snp.less(r, 0), snp.less(y, 0)))
    return snp.where(fix, snp.add(q, 1), q)


def rem(x, y):
    """Elementwise remainder of truncating division: the sign of ``x`` (C ``fmod``).

    Args:
        x, y: arrays of one dtype, broadcastable shapes.
    Returns:
        Array of the broadcast shape and that dtype.
    Raises:
        TypeError: the operands' dtypes differ.
    """
    x, y = same_dtype("rem", x, y)
    return snp.fmod(x, y)


def shift_right_logical(x, y):
    """Elementwise ``x >> y`` filling with zeros (the bits of a signed ``x`` read unsigned).

    Args:
        x, y: integer arrays of one dtype, broadcastable shapes.
    Returns:
        Array of the broadcast shape and that dtype; shifts past the width give 0.
    """
    x, y = same_dtype("shift_right_logical", x, y)
    if not dtypes.is_signed_int(x.dtype):
        return snp.right_shift(x, y)
    from .bits import bitcast_convert_type
    u = dtypes.canonicalize(f"uint{x.dtype.itemsize * 8}")
    out = snp.right_shift(bitcast_convert_type(x, u), bitcast_convert_type(y, u))
    return bitcast_convert_type(out, x.dtype)


def convert_element_type(operand, new_dtype):
    """Casts ``operand`` to ``new_dtype`` (Starling's cast rules: float -> int truncates and
    saturates, NaN -> 0; see ``starling.numpy.astype``). The result is not weakly typed."""
    from ..ops.convert_element_type import convert_element_type as cast
    (x,) = same_dtype("convert_element_type", operand)
    return cast(x, dtypes.canonicalize(new_dtype), False)


def integer_pow(x, y):
    """Elementwise ``x ** y`` for a static Python int ``y``, by repeated squaring
    (``ceil(log2 |y|)`` squarings and at most as many extra multiplies).

    Args:
        x: array of shape ``(*shape)``, numeric dtype.
        y: static int; negative powers give ``1 / x ** -y`` (floating and complex ``x`` only).
    Returns:
        Array of the shape and dtype of ``x``; ``y == 0`` gives ones (also for ``x`` = 0, NaN).
    Raises:
        TypeError: ``y`` is not an int, or a negative ``y`` with an integer ``x``.
    """
    (x,) = same_dtype("integer_pow", x)
    y = static_int("integer_pow", "y", y)
    if dtypes.is_bool(x.dtype):
        raise TypeError("lax.integer_pow: bool operands are not supported (use an integer or "
                        "floating dtype)")
    if y < 0 and dtypes.is_integer(x.dtype):
        raise TypeError(f"lax.integer_pow: integers cannot be raised to the negative power {y} "
                        f"(x has dtype {x.dtype})")
    n = -y if y < 0 else y
    if n == 0:
        return snp.ones_like(x)
    acc, base = None, x
    while True:
        if n & 1:
            acc = base if acc is None else snp.multiply(acc, base)
        n >>= 1
        if not n:
            break
        base = snp.multiply(base, base)
    return snp.reciprocal(acc) if y < 0 else acc


def clamp(min, x, max):  # noqa: A002  (JAX's argument names)
    """Elementwise ``minimum(maximum(x, min), max)`` (note JAX's argument order).

    Args:
        min: 0-d or of the shape of ``x``; the dtype of ``x``.
        x: array of shape ``(*shape)``, real dtype.
        max: like ``min``.
    Returns:
        Array of the shape and dtype of ``x``. ``min > max`` gives ``max``. Derivative: ``x``
        inside ``(min, max)`` gets the tangent of ``x``; ties with a bound share it equally
        (``starling.numpy.clip``'s convention).
    Raises:
        TypeError: the dtypes differ. ValueError: a bound is neither 0-d nor of ``x``'s shape.
    """
    lo, x, hi = same_dtype("clamp", min, x, max)
    for name, b in (("min", lo), ("max", hi)):
        if b.shape != () and tuple(b.shape) != tuple(x.shape):
            raise ValueError(f"lax.clamp: {name} must be 0-d or have the shape of x "
                             f"{tuple(x.shape)}, got shape {tuple(b.shape)}")
    return snp.clip(x, lo, hi)


def select_n(which, *cases):
    """Elementwise selection: ``out[i] = cases[which[i]][i]``.

    Args:
        which: bool or integer array, 0-d or of the cases' shape. A bool ``which`` picks
            ``cases[1]`` where True (so ``select_n(p, a, b)`` is ``where(p, b, a)``) and needs
            at most 2 cases. Out-of-range integer values are clamped (JAX leaves them
            unspecified).
        *cases: one or more arrays of one shape and dtype.
    Returns:
        Array of the cases' shape and dtype. Differentiable in the cases (linear in them);
        ``which`` gets no gradient.
    Raises:
        ValueError: no case, mismatched shapes, a bool ``which`` with more than 2 cases.
        TypeError: ``which`` not bool / integer, or the cases' dtypes differ.
    """
    if not cases:
        raise ValueError("lax.select_n: needs at least one case")
    cases = same_dtype("select_n", *cases)
    (which,) = same_dtype("select_n", which) if not is_python_scalar(which) else (
        snp.asarray(which),)
    if not (dtypes.is_bool(which.dtype) or dtypes.is_integer(which.dtype)):
        raise TypeError(f"lax.select_n: which must be bool or integer, got {which.dtype}")
    shape = tuple(cases[0].shape)
    for c in cases[1:]:
        if tuple(c.shape) != shape:
            raise ValueError("lax.select_n: cases must have one shape, got "
                             f"{', '.join(str(tuple(c.shape)) for c in cases)}")
    if which.shape != () and tuple(which.shape) != shape:
        raise ValueError(f"lax.select_n: which must be 0-d or have the cases' shape {shape}, "
                         f"got shape {tuple(which.shape)}")
    if dtypes.is_bool(which.dtype) and len(cases) > 2:
        raise ValueError(f"lax.select_n: a bool which selects among at most 2 cases, got "
                         f"{len(cases)}")
    if len(cases) == 1:
        return cases[0]
    out = GS.choose_p.bind(which, *cases, mode="clip")
    if tuple(out.shape) != shape:   # a 0-d which with 0-d cases stays 0-d; nothing else differs
        out = snp.broadcast_to(out, shape)
    return out
