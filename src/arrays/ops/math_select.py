"""Elementwise selection: maximum / minimum (NaN-propagating), fmax / fmin (NaN-ignoring), clip
(alias clamp) and its one-sided forms, three-operand ``where`` and ``nan_to_num``.

The derivative conventions of these ops (ties, NaN, static vs array clip bounds) are stated
once, in ``elementwise_docs.SUBGRADIENTS``, and repeated in each docstring.

Primitives: ``maximum``, ``minimum``, ``fmax``, ``fmin``; ``clip`` (one operand, static bounds
``lo`` / ``hi`` as params, either may be None); ``clamp`` (three operands ``x, lo, hi``);
``where`` (bool condition, two value operands); ``nan_to_num`` (static replacement values).
"""
from __future__ import annotations

import numpy as np

from ...core import dtypes
from ...core.avals import ShapedArray
from ...core.primitive import Primitive
from ...core.trace import EVAL_TRACE, current_trace
from ..array import Array, wrap
from ..convert import operand
from .arithmetic import not_equal
from .elementwise_docs import SUBGRADIENTS, binary_doc
from .elementwise_family import (
    DOMAINS, _check_domain, _scalar_same_dtype, binary, broadcast_shapes, nary, promote_operands,
)
from .math_basic import param_unary_primitive

__all__ = ["maximum", "minimum", "fmax", "fmin", "clip", "clamp", "clamp_min", "clamp_max",
           "where", "nan_to_num"]

_ZERO_NOTE = ("The sign of a zero result when comparing -0.0 with 0.0 is implementation-defined "
              "(as in the Array API and NumPy).")

maximum = binary("maximum", np.maximum, domain="real", doc=binary_doc(
    "Elementwise maximum; NaN-propagating (a NaN operand gives NaN).", "real",
    notes=_ZERO_NOTE + " bool: logical or. Complex raises TypeError (no order).\n\n"
    + SUBGRADIENTS))
minimum = binary("minimum", np.minimum, domain="real", doc=binary_doc(
    "Elementwise minimum; NaN-propagating (a NaN operand gives NaN).", "real",
    notes=_ZERO_NOTE + " bool: logical and. Complex raises TypeError (no order).\n\n"
    + SUBGRADIENTS))
fmax = binary("fmax", np.fmax, domain="real", doc=binary_doc(
    "Elementwise maximum ignoring NaN: the other operand where one is NaN, NaN only where "
    "both are.", "real", notes=_ZERO_NOTE + "\n\n" + SUBGRADIENTS))
fmin = binary("fmin", np.fmin, domain="real", doc=binary_doc(
    "Elementwise minimum ignoring NaN: the other operand where one is NaN, NaN only where "
    "both are.", "real", notes=_ZERO_NOTE + "\n\n" + SUBGRADIENTS))

# ---- clip --------------------------------------------------------------------------------------


def _clip_impl(x, *, lo, hi):
    t = x.dtype.type
    if lo is not None:
        x = np.maximum(x, t(lo))
    if hi is not None:
        x = np.minimum(x, t(hi))
    return x


clip_p = param_unary_primitive("clip", _clip_impl)
_clamp = nary("clamp", lambda x, lo, hi: np.minimum(np.maximum(x, lo), hi), 3, domain="real")
clamp_p = _clamp.primitive
_PY_SCALARS = (int, float, bool)


_REAL = DOMAINS["real"]
_FAST_BOUNDS = (int, float, type(None))


def clip(x, /, min=None, max=None):  # noqa: A002  (Array API parameter names)
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


clip.__doc__ = f"""Elementwise ``minimum(maximum(x, min), max)`` (Array API / NumPy ``clip``).

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

{SUBGRADIENTS}"""
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


def where(condition, x=None, y=None, /):
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
        ValueError: the shapes do not broadcast, or only one of ``x`` / ``y`` is given.
        TypeError: ``x`` and ``y`` have no implicit promotion.

    ``where(condition)`` with one argument is ``nonzero(condition)`` (the indexing family).
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
            return _nonzero(condition)
        raise ValueError("where: either both or neither of x and y must be given")
    c = operand(condition, "where")
    if c.dtype != _BOOL:
        c = not_equal(c, 0)
    x, y = promote_operands("where", (x, y))
    return where_p.bind(c, x, y)


where.primitive = where_p


def _nonzero(condition):
    from . import indexing  # the one-argument form belongs to the indexing family
    fn = getattr(indexing, "nonzero", None)
    if fn is None:
        raise NotImplementedError("where: the one-argument form needs nonzero, which is not "
                                  "available yet")
    return fn(condition)


# ---- nan_to_num --------------------------------------------------------------------------------

def _replace_real(x, nan, posinf, neginf):
    fi = dtypes.finfo(x.dtype)
    t = x.dtype.type
    hi = fi.max if posinf is None else t(posinf)
    lo = fi.min if neginf is None else t(neginf)
    inf = np.isinf(x)
    neg = np.signbit(x)
    out = np.where(np.isnan(x), t(nan), x)
    out = np.where(inf & ~neg, hi, out)
    return np.where(inf & neg, lo, out).astype(x.dtype)


def _nan_to_num_impl(x, *, nan, posinf, neginf):
    if x.dtype.kind == "c":
        out = np.empty(np.shape(x), x.dtype)
        out.real = _replace_real(np.real(x), nan, posinf, neginf)
        out.imag = _replace_real(np.imag(x), nan, posinf, neginf)
        return out
    return _replace_real(x, nan, posinf, neginf)


nan_to_num_p = param_unary_primitive("nan_to_num", _nan_to_num_impl)


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
