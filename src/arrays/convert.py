"""Turning user input (Python scalars, lists, NumPy arrays, DLPack objects) into operands.

``operand(x, op)`` is the one entry point every op wrapper uses: Arrays and Tracers pass through,
Python scalars become weak-typed 0-d Arrays, anything array-like is copied into a new Array.
"""
from __future__ import annotations

import numbers

import numpy as np

from ..core import casting, dtypes
from ..core.symbolic import DimExpr
from ..core.trace import Tracer
from .array import Array, wrap

_SCALAR_TYPES = (bool, int, float, complex)


def _python_scalar_buffer(x, op):
    if isinstance(x, bool):
        return np.bool_(x)
    if isinstance(x, int):
        try:
            return np.int64(x)
        except OverflowError:
            raise OverflowError(f"{op}: Python int {x} does not fit in int64") from None
    if isinstance(x, float):
        return np.float32(x) if _fits_float32(x) else np.float64(x)
    return np.complex64(x) if _fits_float32(x.real) and _fits_float32(x.imag) else np.complex128(x)


def _fits_float32(v: float) -> bool:
    # A weak float keeps float64 storage when float32 would overflow, so that
    # `x_f64 + 1e300` is not inf; promotion rules only ever see it as weak float.
    return not (abs(v) > 3.4028234663852886e38 and abs(v) != float("inf"))


def scalar_operand(x, op="asarray"):
    """A weak-typed 0-d Array for a Python scalar."""
    return wrap(_python_scalar_buffer(x, op), not isinstance(x, bool))


def operand(x, op="op"):
    """Arrays and Tracers unchanged; Python scalars weak; other array-likes copied (strong).

    Raises:
        TypeError: naming ``op`` for objects that are not array-like (None, strings, dicts...).
    """
    t = type(x)
    if t is Array or isinstance(x, Tracer):
        return x
    if t in _SCALAR_TYPES:
        return scalar_operand(x, op)
    if isinstance(x, Array):
        return x
    if isinstance(x, DimExpr):  # a symbolic dim used as a value (dynamic shapes)
        from .ops.dim_value import dim_value
        return dim_value(x)
    return from_array_like(x, op)


def _holds_tracer(x):
    return any(isinstance(e, Tracer) or (isinstance(e, (list, tuple)) and _holds_tracer(e))
               for e in x)


def _stack_traced(x, op, dtype):
    """A nested sequence holding traced values as one traced array (element dtypes promoted
    as by ``stack``; shapes must match)."""
    from . import numpy as snp
    parts = [_stack_traced(e, op, None) if isinstance(e, (list, tuple)) else operand(e, op)
             for e in x]
    out = snp.stack(parts)
    return out if dtype is None else out.astype(dtype)


def from_array_like(x, op="asarray", dtype=None):
    """Copies an array-like (NumPy array/scalar, nested lists, DLPack producer) into an Array.

    Nested Python lists of floats become float32 (the default float), of ints int64. With
    ``dtype``, the data are built at their own dtype and converted by Starling's rules
    (``core/casting.py``); Python ints out of range of an integer ``dtype`` raise
    OverflowError, as in NumPy.
    """
    if isinstance(x, (str, bytes)) or x is None or isinstance(x, dict):
        raise TypeError(f"{op}: expected an array, a Python scalar or a nested list of numbers, "
                        f"got {type(x).__name__}")
    if isinstance(x, np.ndarray) or isinstance(x, np.generic):
        buf = np.array(x, copy=True)
    elif isinstance(x, (memoryview, bytearray)):
        buf = np.array(x, copy=True)  # the buffer protocol (Array API asarray)
    elif hasattr(x, "__array__"):
        buf = np.array(np.asarray(x), copy=True)
    elif hasattr(x, "__dlpack__"):
        buf = np.array(np.from_dlpack(x), copy=True)
    elif isinstance(x, (list, tuple)):
        if _holds_tracer(x):   # e.g. f([a, b]) under compile / grad: stack the traced values
            return _stack_traced(x, op, dtype)
        buf = _from_sequence(x, op, dtype)
    elif isinstance(x, numbers.Number):
        buf = np.array(x)
    else:
        raise TypeError(f"{op}: cannot convert {type(x).__name__} to an array")
    if dtype is not None and buf.dtype != dtype:
        buf = _convert_built(buf, np.dtype(dtype), x)
    if buf.dtype == object or buf.dtype.kind in "USMmO":
        raise TypeError(f"{op}: cannot convert {type(x).__name__} with NumPy dtype {buf.dtype} "
                        "to a Starling array (numbers only)")
    dtypes.canonicalize(buf.dtype)
    return wrap(buf, False)


def _convert_built(buf, dtype, x):
    """``buf`` (built from ``x`` at its own dtype) converted to ``dtype``."""
    if (buf.dtype.kind in "iub" and dtype.kind in "iub") or buf.dtype.kind in "OUS":
        # NumPy's own construction: its range checks of Python ints (out of range raises),
        # its errors for non-numbers
        return np.array(x if not isinstance(x, (list, tuple)) else buf.tolist(), dtype=dtype)
    return casting.astype(buf, dtype)


def _from_sequence(x, op, dtype):
    leaves = []
    _flatten_sequence(x, leaves)
    converted = [np.asarray(leaf) if isinstance(leaf, (Array, Tracer)) else leaf for leaf in leaves]
    try:
        buf = np.array(_rebuild_sequence(x, iter(converted)))
    except ValueError as e:
        raise ValueError(f"{op}: nested sequence is ragged or not numeric: {e}") from None
    if dtype is None:
        if buf.dtype == np.float64 and all(_is_python_like(v) for v in leaves):
            buf = buf.astype(dtypes.DEFAULT_FLOAT)
        elif buf.dtype == np.complex128 and all(_is_python_like(v) for v in leaves):
            buf = buf.astype(dtypes.DEFAULT_COMPLEX)
    return buf


def _is_python_like(v):
    return type(v) in _SCALAR_TYPES


def _flatten_sequence(x, out):
    if isinstance(x, (list, tuple)):
        for item in x:
            _flatten_sequence(item, out)
    else:
        out.append(x)


def _rebuild_sequence(x, it):
    if isinstance(x, (list, tuple)):
        return [_rebuild_sequence(item, it) for item in x]
    return next(it)
