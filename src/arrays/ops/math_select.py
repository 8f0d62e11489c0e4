"""Elementwise selection: maximum / minimum (NaN-propagating), fmax / fmin (NaN-ignoring), clip
(alias clamp) and its one-sided forms, three-operand ``where`` and ``nan_to_num``.

The derivative conventions of these ops (ties, NaN, static vs array clip bounds) are stated
once, in ``elementwise_docs.SUBGRADIENTS``, and repeated in each docstring.

Primitives: ``maximum``, ``minimum``, ``fmax``, ``fmin``; ``clip`` (one operand, static bounds
``lo`` / ``hi`` as params, either may be None); ``clamp`` (three operands ``x, lo, hi``);
``where`` (bool condition, two value operands); ``nan_to_num`` (static replacement values).
"""
from __future__ import annotations

import inspect

import ml_dtypes
import numpy as np

from ...core import casting, dtypes
from ...core.avals import ShapedArray
from ...core.primitive import Primitive
from ...core.trace import EVAL_TRACE, current_trace
from ...core import scalar as S
from ..array import Array, wrap
from ..convert import operand
from .arithmetic import not_equal
from .elementwise_docs import SUBGRADIENTS, binary_doc
from .elementwise_family import (
    DOMAINS, _check_domain, _scalar_same_dtype, binary, broadcast_shapes, nary, promote_operands,
)
from . import rules_sharding as RS
from .math_basic import param_unary_primitive

__all__ = ["maximum", "minimum", "fmax", "fmin", "clip", "clamp", "clamp_min", "clamp_max",
           "where", "nan_to_num"]

_ZERO_NOTE = ("The sign of a zero result when comparing -0.0 with 0.0 is implementation-defined "
              "(as in the Array API and NumPy).")

def _extremum(op, fmt):
    """The formula of maximum / minimum / fmax / fmin on operands of ``fmt``'s family: NumPy's
    float16 loops keep the first operand on ties (+-0), every other format the second (as the
    ``max`` / ``min`` ops)."""
    def ext(a, b):
        if a.dtype == S.BOOL:
            return a | b if op in ("max", "fmax") else a & b
        if fmt != np.float16:
            return S.call(op, a, b)
        keep = S.ge(a, b) if op in ("max", "fmax") else S.le(a, b)
        nan = a if op in ("max", "min") else b
        return S.select(keep | S.ne(nan, nan), a, b)
    return ext


def _extremum_formula(op):
    return S.ScalarFormula(lambda a, b, *, fmt, **_: _extremum(op, fmt)(a, b), lowp="exact",
                           name=op)


maximum = binary("maximum", np.maximum,
                 formula=_extremum_formula("max"),
                 domain="real", partials=RS.MAX_MAX, doc=binary_doc(
    "Elementwise maximum; NaN-propagating (a NaN operand gives NaN).", "real",
    notes=_ZERO_NOTE + " bool: logical or. Complex raises TypeError (no order).\n\n"
    + SUBGRADIENTS))
minimum = binary("minimum", np.minimum,
                 formula=_extremum_formula("min"),
                 domain="real", partials=RS.MIN_MIN, doc=binary_doc(
    "Elementwise minimum; NaN-propagating (a NaN operand gives NaN).", "real",
    notes=_ZERO_NOTE + " bool: logical and. Complex raises TypeError (no order).\n\n"
    + SUBGRADIENTS))
fmax = binary("fmax", np.fmax,
              formula=_extremum_formula("fmax"),
              domain="real", partials=RS.MAX_MAX, doc=binary_doc(
    "Elementwise maximum ignoring NaN: the other operand where one is NaN, NaN only where "
    "both are.", "real", notes=_ZERO_NOTE + "\n\n" + SUBGRADIENTS))
fmin = binary("fmin", np.fmin,
              formula=_extremum_formula("fmin"),
              domain="real", partials=RS.MIN_MIN, doc=binary_doc(
    "Elementwise minimum ignoring NaN: the other operand where one is NaN, NaN only where "
    "both are.", "real", notes=_ZERO_NOTE + "\n\n" + SUBGRADIENTS))

# ---- clip --------------------------------------------------------------------------------------


def _clip_impl(x, *, lo, hi):
    if lo is not None:
        x = np.maximum(x, casting.scalar(lo, x.dtype))
    if hi is not None:
        x = np.minimum(x, casting.scalar(hi, x.dtype))
    return x


def _clip_formula(x, *, out, params, fmt):
    # the bounds are rounded to the operand's format first, as the NumPy implementation does
    def bound(v):
        return S.cast(S.lit(v, fmt), S.F32, exact=True) if fmt is not None else S.lit(v, x.dtype)
    if params.get("lo") is not None:
        x = _extremum("max", fmt)(x, bound(params["lo"]))
    if params.get("hi") is not None:
        x = _extremum("min", fmt)(x, bound(params["hi"]))
    return x


clip_p = param_unary_primitive("clip", _clip_impl)
clip_p.scalar_formula = S.ScalarFormula(_clip_formula, lowp="exact")
_clamp = nary("clamp", lambda x, lo, hi: np.minimum(np.maximum(x, lo), hi), 3, domain="real",
              formula=S.ScalarFormula(lambda x, lo, hi, *, fmt, **_: _extremum("min", fmt)(
                  _extremum("max", fmt)(x, lo), hi), lowp="exact"))
clamp_p = _clamp.primitive
_PY_SCALARS = (int, float, bool)


_REAL = DOMAINS["real"]
_FAST_BOUNDS = (int, float, type(None))


def clip(x, /, min=None, max=None):  # noqa: A002  (Array API parameter names)
    """Elementwise ``minimum(maximum(x, min), max)`` (Array API / NumPy ``clip``).

    Args:
        x: array of shape ``(*shape)``; bool, integer or real floating dtype.
        min: lower bound: None (no bound), a Python scalar (a *static* bound) or an array whose
            shape broadcasts with ``x``.
        max: upper bound, like ``min``.
    Returns:
        Array of the broadcast shape and the promoted dtype of ``x`` and the bounds (JAX promotion,
        Python scalars weak, so ``clip(x_f16, 0, 1)`` is float16). With both bounds None, ``x``.
        ``min > max`` gives ``max`` everywhere; a NaN in ``x`` or a bound gives NaN.
    Raises:
        TypeError: complex operands, or dtypes with no implicit promotion.
        ValueError: shapes do not broadcast.
        OverflowError: a Python int bound does not fit an integer ``x`` (``clip(x_u8, 0, 300)``).

    Bounds are static when every given bound is a Python scalar; otherwise all given bounds are
    operands (a Python scalar among them becomes a weak 0-d array). This choice selects the
    derivative convention below. Alias: ``clamp``.
    """
    if (type(x) is Array and type(min) in _FAST_BOUNDS and type(max) in _FAST_BOUNDS
            and current_trace() is EVAL_TRACE and x._buf.dtype in _REAL):
        # Eager fast path: static bounds that keep x's dtype run the impl directly.
        buf, weak = x._buf, x._weak
        lo = None if min is None else _scalar_same_dtype(buf.dtype, weak, min)
        hi = None if max is None else _scalar_same_dtype(buf.dtype, weak, max)
        if (lo is not None or min is None) and (hi is not None or max is None) and (
                lo is not None or hi is not None):
            return wrap(_clip_impl(buf, lo=lo, hi=hi), weak)
    if min is None and max is None:
        x = operand(x, "clip")
        _check_domain("clip", x.dtype, "real")
        return x
    given = [b for b in (min, max) if b is not None]
    ops = promote_operands("clip", (x, *given), "real")
    if all(type(b) in _PY_SCALARS for b in given):
        # Static bounds: stored as params, rounded to the result dtype already.
        vals = [o._buf.item() for o in ops[1:]]
        lo = vals.pop(0) if min is not None else None
        hi = vals.pop(0) if max is not None else None
        return clip_p.bind(ops[0], lo=lo, hi=hi)
    broadcast_shapes("clip", *[o.shape for o in ops])
    if min is None:
        return minimum.primitive.bind(*ops)
    if max is None:
        return maximum.primitive.bind(*ops)
    return clamp_p.bind(*ops)


# The subgradient table is shared with the other ops that follow it (elementwise_docs).
clip.__doc__ = inspect.cleandoc(clip.__doc__) + "\n\n" + SUBGRADIENTS
clip.primitive = clip_p
clamp = clip


def clamp_min(x, /, min):  # noqa: A002
    """``clip(x, min, None)``: elementwise ``maximum(x, min)`` with clip's static-bound
    convention when ``min`` is a Python scalar (see ``clip``)."""
    return clip(x, min, None)


def clamp_max(x, /, max):  # noqa: A002
    """``clip(x, None, max)``: elementwise ``minimum(x, max)`` with clip's static-bound
    convention when ``max`` is a Python scalar (see ``clip``)."""
    return clip(x, None, max)


# ---- where -------------------------------------------------------------------------------------

where_p = Primitive("where", family="elementwise")
_BOOL = dtypes.bool_
_FAST_SCALARS = (int, float)


def _where_impl(c, x, y):
    try:
        return np.where(c, x, y)
    except ValueError:
        broadcast_shapes("where", np.shape(c), np.shape(x), np.shape(y))
        raise


def _where_abstract_eval(c, x, y):
    shape = broadcast_shapes("where", c.shape, x.shape, y.shape)
    return ShapedArray(shape, x.dtype, x.weak_type and y.weak_type)


where_p.impl = _where_impl
where_p.abstract_eval = _where_abstract_eval
where_p.weak_type = lambda wc, wx, wy: wx and wy
where_p.meta.update(nin=3, domain="any", out="same", numpy_impl=_where_impl)
where_p.scalar_formula = S.ScalarFormula(lambda c, x, y, **_: S.select(c, x, y), lowp="exact",
                                         name="where")


def where(condition, x=None, y=None, /, *, size=None, fill_value=None):
    """Elementwise selection: ``x`` where ``condition`` is true, else ``y``.

    Args:
        condition: array of shape broadcasting to ``(*shape)``; bool, or any dtype whose
            truth value ``condition != 0`` is used (NumPy).
        x, y: arrays or Python scalars broadcasting to ``(*shape)``; their dtypes promote
            (JAX rules, Python scalars weak).
    Returns:
        Array of shape ``(*shape)`` (the broadcast of all three) and the promoted dtype of
        ``x`` and ``y``.
    Raises:
        ValueError: the shapes do not broadcast, or only one of ``x`` / ``y`` is given, or
            ``size`` / ``fill_value`` with ``x`` and ``y``.
        TypeError: ``x`` and ``y`` have no implicit promotion.

    ``where(condition)`` with one argument is ``nonzero(condition)`` (the indexing family);
    only that form takes ``size`` / ``fill_value`` (a static result length and the index that
    pads it, as in ``nonzero``; needed under tracing).
    The derivative flows to ``x`` where the condition holds and to ``y`` elsewhere; note that
    an unselected branch that is inf / nan still poisons gradients through its own ops (use
    the "double where" pattern).
    """
    if (type(condition) is Array and type(x) is Array and type(y) is Array
            and current_trace() is EVAL_TRACE):
        c, bx, by = condition._buf, x._buf, y._buf
        if c.dtype is _BOOL and bx.dtype is by.dtype and x._weak is y._weak:
            return wrap(_where_impl(c, bx, by), x._weak)
    elif (type(condition) is Array and current_trace() is EVAL_TRACE
          and condition._buf.dtype is _BOOL):
        # Eager fast path for one Array and one Python scalar that keeps the Array's dtype.
        if type(x) is Array and type(y) in _FAST_SCALARS:
            s = _scalar_same_dtype(x._buf.dtype, x._weak, y)
            if s is not None:
                return wrap(_where_impl(condition._buf, x._buf, s), x._weak)
        elif type(y) is Array and type(x) in _FAST_SCALARS:
            s = _scalar_same_dtype(y._buf.dtype, y._weak, x)
            if s is not None:
                return wrap(_where_impl(condition._buf, s, y._buf), y._weak)
    if x is None or y is None:
        if x is None and y is None:
            return _nonzero(condition, size, fill_value)
        raise ValueError("where: either both or neither of x and y must be given")
    if size is not None or fill_value is not None:
        raise ValueError("where: size= and fill_value= apply only to the one-argument form "
                         "where(condition) (= nonzero); the three-argument form has the "
                         "broadcast shape")
    c = operand(condition, "where")
    if c.dtype != _BOOL:
        c = not_equal(c, 0)
    x, y = promote_operands("where", (x, y), "data")
    return where_p.bind(c, x, y)


where.primitive = where_p


def _nonzero(condition, size, fill_value):
    from . import indexing  # the one-argument form belongs to the indexing family
    return indexing.nonzero(condition, size=size, fill_value=fill_value)


# ---- nan_to_num --------------------------------------------------------------------------------

def _replace_real(x, nan, posinf, neginf):
    fi = dtypes.finfo(x.dtype)
    hi = fi.max if posinf is None else casting.scalar(posinf, x.dtype)
    lo = fi.min if neginf is None else casting.scalar(neginf, x.dtype)
    inf = np.isinf(x)
    neg = np.signbit(x)
    out = np.where(np.isnan(x), casting.scalar(nan, x.dtype), x)
    out = np.where(inf & ~neg, hi, out)
    return np.where(inf & neg, lo, out).astype(x.dtype)


def _nan_to_num_impl(x, *, nan, posinf, neginf):
    if x.dtype.kind == "c":
        out = np.empty(np.shape(x), x.dtype)
        out.real = _replace_real(np.real(x), nan, posinf, neginf)
        out.imag = _replace_real(np.imag(x), nan, posinf, neginf)
        return out
    return _replace_real(x, nan, posinf, neginf)


def _nan_to_num_formula(x, *, out, params, fmt):
    if x.dtype.kind != "f":
        return None
    fi = ml_dtypes.finfo(fmt or x.dtype)

    def value(v, default):
        v = default if v is None else v
        return S.cast(S.lit(v, fmt), S.F32, exact=True) if fmt is not None else S.lit(v, x.dtype)
    inf = S.select(S.gt(x, 0), value(params.get("posinf"), fi.max),
                   value(params.get("neginf"), fi.min))
    return S.select(S.isnan(x), value(params.get("nan"), 0.0),
                    S.select(S.isinf(x), inf, x))


nan_to_num_p = param_unary_primitive("nan_to_num", _nan_to_num_impl)
nan_to_num_p.scalar_formula = S.ScalarFormula(_nan_to_num_formula, lowp="exact")


def _static_float(v, what):
    if v is None and what != "nan":
        return None
    try:
        return float(v)
    except (TypeError, ValueError):
        raise TypeError(f"nan_to_num: {what} must be a Python number"
                        f"{'' if what == 'nan' else ' or None'}, got {type(v).__name__}") from None


def nan_to_num(x, /, copy=True, nan=0.0, posinf=None, neginf=None):
    """Replaces nan, +inf and -inf elementwise with finite numbers.

    Args:
        x: array of shape ``(*shape)``; any dtype (bool / integer input is returned unchanged).
        copy: accepted for NumPy compatibility; ignored (arrays are immutable).
        nan: static value for nan (default 0.0).
        posinf: static value for +inf; None gives the largest finite value of the dtype.
        neginf: static value for -inf; None gives the most negative finite value.
    Returns:
        Array of shape ``(*shape)`` and the dtype of ``x``; complex input is treated part by
        part. Replacement values are rounded to the dtype (``posinf=1e10`` in float16 is inf).
    Raises:
        TypeError: a replacement value is not a number.
    """
    x = operand(x, "nan_to_num")
    if not dtypes.is_inexact(x.dtype):
        return x
    return nan_to_num_p.bind(x, nan=_static_float(nan, "nan"),
                             posinf=_static_float(posinf, "posinf"),
                             neginf=_static_float(neginf, "neginf"))


nan_to_num.primitive = nan_to_num_p


# ---- transformation rules ----------------------------------------------------------------------
# The subgradient table (elementwise_docs.SUBGRADIENTS) is implemented ONCE here, as JVP rules:
# each operand i gets a weight w_i computed from the primals only (comparisons, so piecewise
# constant with zero derivative), and the output tangent is sum_i w_i * t_i, which is linear in
# the tangents. Reverse mode transposes exactly that, so both modes (and vmap, and higher
# derivatives) agree by construction.

from .arithmetic import (  # noqa: E402
    add, divide, equal, greater, less, logical_and, logical_not, logical_or, multiply, subtract,
)
from .convert_element_type import convert_element_type  # noqa: E402
from .rules import (  # noqa: E402
    Zero, add_tangents, batch_elementwise, batch_unary_same_axis, is_undefined, snp, tangent_aval,
    unbroadcast,
)


def _f(mask, dt):
    """A bool mask as 0 / 1 values of the float dtype ``dt`` (a constant for the derivative)."""
    return convert_element_type(mask, dt, False)


def _isnan(x):
    return not_equal(x, x)


def _weighted(ans, pairs):
    """sum of w * t over (weight, tangent) pairs, skipping Zero tangents."""
    out = Zero(tangent_aval(ans.aval))
    for w, t in pairs:
        if type(t) is not Zero:
            out = add_tangents(out, multiply(w, t))
    return out


def _minmax_weight(x, y, wins, ignore_nan):
    """Weight of ``x`` in max/min-like ops (``wins(x, y)`` is true where x is selected)."""
    nx, ny = _isnan(x), _isnan(y)
    # NaN-propagating ops pick the NaN operand, NaN-ignoring ones (fmax / fmin) the other one.
    lone = logical_and(ny, logical_not(nx)) if ignore_nan else logical_and(nx, logical_not(ny))
    full = logical_or(wins(x, y), lone)
    half = logical_or(equal(x, y), logical_and(nx, ny))
    dt = x.dtype
    return add(_f(full, dt), multiply(_f(half, dt), 0.5))


def _minmax_jvp_rule(prim, wins, ignore_nan):
    def rule(primals, tangents):
        x, y = primals
        ans = prim.bind(x, y)
        wx = _minmax_weight(x, y, wins, ignore_nan)
        return ans, _weighted(ans, [(wx, tangents[0]), (subtract(1, wx), tangents[1])])
    return rule


maximum.primitive.jvp = _minmax_jvp_rule(maximum.primitive, greater, False)
minimum.primitive.jvp = _minmax_jvp_rule(minimum.primitive, less, False)
fmax.primitive.jvp = _minmax_jvp_rule(fmax.primitive, greater, True)
fmin.primitive.jvp = _minmax_jvp_rule(fmin.primitive, less, True)


def _clip_jvp(primals, tangents, *, lo, hi):
    # Static bounds: 1 strictly inside, 0 on and beyond the bounds; a NaN x produced the NaN
    # output, so its derivative is 1.
    (x,), (t,) = primals, tangents
    ans = clip_p.bind(x, lo=lo, hi=hi)
    inside = [greater(x, lo)] if lo is not None else []
    if hi is not None:
        inside.append(less(x, hi))
    mask = inside[0] if len(inside) == 1 else logical_and(*inside)
    return ans, where(logical_or(mask, _isnan(x)), t, 0)


clip_p.jvp = _clip_jvp
batch_unary_same_axis(clip_p)


def _clamp_weights(x, lo, hi):
    """Weights (w_x, w_lo, w_hi) of clip(x, lo, hi) = minimum(maximum(x, lo), hi), array bounds.

    NaN anywhere: split evenly among the NaN operands. Otherwise, lo < hi: the operand that
    produced the output; a tie with a bound splits 0.5 / 0.5. lo >= hi: hi, except that
    x == lo == hi gives x everything.
    """
    dt = x.dtype
    nx, nlo, nhi = _f(_isnan(x), dt), _f(_isnan(lo), dt), _f(_isnan(hi), dt)
    count = add(add(nx, nlo), nhi)
    anynan = greater(count, 0)
    count = where(anynan, count, 1)
    ordered = less(lo, hi)
    at_lo, at_hi = equal(x, lo), equal(x, hi)
    all_x = logical_and(equal(lo, hi), at_lo)
    half_lo, half_hi = multiply(_f(at_lo, dt), 0.5), multiply(_f(at_hi, dt), 0.5)
    inside = _f(logical_and(greater(x, lo), less(x, hi)), dt)
    wx = where(ordered, add(inside, add(half_lo, half_hi)), _f(all_x, dt))
    wlo = where(ordered, add(_f(less(x, lo), dt), half_lo), 0)
    whi = where(ordered, add(_f(greater(x, hi), dt), half_hi), _f(logical_not(all_x), dt))
    return [where(anynan, divide(n, count), w) for n, w in ((nx, wx), (nlo, wlo), (nhi, whi))]


def _clamp_jvp(primals, tangents):
    ans = clamp_p.bind(*primals)
    return ans, _weighted(ans, list(zip(_clamp_weights(*primals), tangents)))


clamp_p.jvp = _clamp_jvp


# where: linear in x and y (the condition is a bool, never differentiated).

def _where_jvp(primals, tangents):
    c, x, y = primals
    _, tx, ty = tangents
    ans = where_p.bind(c, x, y)
    if type(tx) is Zero and type(ty) is Zero:
        return ans, Zero(tangent_aval(ans.aval))
    tx = 0 if type(tx) is Zero else tx
    ty = 0 if type(ty) is Zero else ty
    return ans, where(c, tx, ty)


def _where_transpose(ct, c, x, y):
    if is_undefined(c):
        raise ValueError("where: the condition is not differentiable (transpose w.r.t. it)")
    if type(ct) is Zero:
        return [None, unbroadcast(ct, x.aval) if is_undefined(x) else None,
                unbroadcast(ct, y.aval) if is_undefined(y) else None]
    return [None, unbroadcast(where(c, ct, 0), x.aval) if is_undefined(x) else None,
            unbroadcast(where(c, 0, ct), y.aval) if is_undefined(y) else None]


where_p.jvp = _where_jvp
where_p.transpose = _where_transpose
where_p.is_linear = True
batch_elementwise(where_p)
where_p.sharding = RS.elementwise(selectors=1)


def _nan_to_num_jvp(primals, tangents, *, nan, posinf, neginf):
    # Replaced entries are constants (derivative 0); finite ones pass t through. Complex input
    # is treated part by part: keep Re(t) where Re(x) is finite and Im(t) where Im(x) is, i.e.
    # a*(t + conj t)/2 + b*(t - conj t)/2 with the 0/1 masks a, b.
    (x,), (t,) = primals, tangents
    ans = nan_to_num_p.bind(x, nan=nan, posinf=posinf, neginf=neginf)
    s = snp()
    if x.dtype.kind != "c":
        return ans, where(s.isfinite(x), t, 0)
    a, b = _f(s.isfinite(s.real(x)), x.dtype), _f(s.isfinite(s.imag(x)), x.dtype)
    return ans, add(multiply(multiply(add(a, b), 0.5), t),
                    multiply(multiply(subtract(a, b), 0.5), s.conj(t)))


nan_to_num_p.jvp = _nan_to_num_jvp
batch_unary_same_axis(nan_to_num_p)
