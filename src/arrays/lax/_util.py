"""Argument handling shared by the ``starling.lax`` wrappers (not public).

JAX's ``lax`` functions do not promote dtypes: operands must already agree, and a Python scalar
takes the dtype of the array operands it is combined with (it is weakly typed). ``same_dtype``
implements that rule with errors naming the op; the other helpers validate static arguments
(ints, tuples of ints, dimension lists) with messages that say what is valid.
"""
from __future__ import annotations

import operator

import numpy as np

from ...core import casting, dtypes
from ...core.trace import Tracer
from ..array import Array, wrap
from ..convert import operand

_PY_SCALARS = (bool, int, float, complex)


def is_python_scalar(x):
    return type(x) in _PY_SCALARS


def scalar_like(op, value, dtype, weak=True):
    """A 0-d Array holding Python scalar ``value`` at ``dtype`` (an int that does not fit an
    integer dtype raises OverflowError naming ``op``)."""
    dtype = np.dtype(dtype)
    if dtypes.is_integer(dtype) and isinstance(value, int) and not isinstance(value, bool):
        info = np.iinfo(dtype)
        if not info.min <= value <= info.max:
            raise OverflowError(f"{op}: Python int {value} is out of range for {dtype}")
    if (dtypes.is_integer(dtype) or dtypes.is_bool(dtype)) and isinstance(value, (float, complex)):
        raise TypeError(f"{op}: cannot combine Python {type(value).__name__} {value} with an "
                        f"operand of dtype {dtype}")
    return wrap(casting.scalar(value, dtype), weak)


def same_dtype(op, *args):
    """The operands of ``op`` as Arrays / Tracers of ONE dtype, without promotion.

    Python scalars take the dtype of the array operands; array operands of different dtypes
    raise TypeError (use ``convert_element_type`` first), as in JAX's ``lax``.
    """
    arrays = [operand(a, op) for a in args if not is_python_scalar(a)]
    if not arrays:
        arrays = [operand(a, op) for a in args]
        return arrays
    dt = arrays[0].dtype
    for a in arrays[1:]:
        if a.dtype != dt:
            got = ", ".join(str(b.dtype) for b in arrays)
            raise TypeError(f"lax.{op}: operands must have the same dtype, got {got} (lax does "
                            "not promote; cast with lax.convert_element_type)")
    out, it = [], iter(arrays)
    for a in args:
        out.append(scalar_like(op, a, dt) if is_python_scalar(a) else next(it))
    return out


def static_int(op, name, v):
    """``v`` as a Python int (ints, NumPy integers, objects with ``__index__``); TypeError else."""
    if isinstance(v, (bool, np.bool_)):
        raise TypeError(f"lax.{op}: {name} must be an int, got {v!r}")
    try:
        return operator.index(v)
    except TypeError:
        raise TypeError(f"lax.{op}: {name} must be a static int, got {type(v).__name__} "
                        f"{v!r}") from None


def static_ints(op, name, v, n=None):
    """A tuple of Python ints (length ``n`` when given)."""
    if isinstance(v, (int, np.integer)):
        raise TypeError(f"lax.{op}: {name} must be a sequence of ints, got the int {v!r}")
    try:
        t = tuple(static_int(op, name, a) for a in v)
    except TypeError as e:
        if "must be" in str(e):
            raise
        raise TypeError(f"lax.{op}: {name} must be a sequence of ints, got {v!r}") from None
    if n is not None and len(t) != n:
        raise ValueError(f"lax.{op}: {name} must have {n} entries (one per dimension), got "
                         f"{len(t)}: {t}")
    return t


def dims_list(op, name, dims, ndim, allow_negative=False):
    """A tuple of distinct dimension numbers in ``0..ndim-1`` (negatives counted from the end
    when ``allow_negative``)."""
    dims = static_ints(op, name, dims)
    out = []
    for d in dims:
        if allow_negative and -ndim <= d < 0:
            d += ndim
        if not 0 <= d < ndim:
            raise ValueError(f"lax.{op}: {name} {dims} has {d}, out of range for rank {ndim} "
                             f"(valid: 0..{ndim - 1})")
        out.append(d)
    if len(set(out)) != len(out):
        raise ValueError(f"lax.{op}: {name} {dims} repeats a dimension")
    return tuple(out)


def axis(op, a, ndim):
    """One axis, negative counted from the end, in ``0..ndim-1``."""
    return dims_list(op, "axis", (a,), ndim, allow_negative=True)[0]


def concrete_value(x):
    """A NumPy value of ``x`` when it is known now (Python / NumPy values, eager Arrays), else
    None (a tracer: its value depends on the transformation's inputs)."""
    if isinstance(x, Tracer):
        return None
    if type(x) is Array:
        return np.asarray(x._buf)
    if isinstance(x, Array):
        return None
    if isinstance(x, (list, tuple)):
        vals = [concrete_value(v) for v in x]
        return None if any(v is None for v in vals) else np.asarray(vals)
    try:
        return np.asarray(x)
    except Exception:   # noqa: BLE001  (anything else is not a concrete value)
        return None


def shape_str(shape):
    return "(" + ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"
