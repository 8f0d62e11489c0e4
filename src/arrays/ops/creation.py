"""Array creation: asarray and (being written) zeros, ones, full, arange, linspace, eye, ..."""
from __future__ import annotations

import numpy as np

from ...core import dtypes
from ...core.trace import Tracer
from ..array import Array, wrap
from ..convert import from_array_like, operand
from ..device import check_device
from .convert_element_type import convert_element_type

__all__ = ["asarray"]


def asarray(obj, /, *, dtype=None, device=None, copy=None):
    """Converts ``obj`` to an Array (Array API ``asarray``).

    Args:
        obj: an Array, a Python scalar (weak-typed result), a nested sequence, a NumPy array or any
            DLPack / ``__array__`` producer. Nested lists of Python floats give float32 (the
            default float), of ints int64.
        dtype: the result dtype (a cast, NumPy ``astype`` semantics) or None to infer.
        device: target Device (default: the default device).
        copy: True always copies (buffers are immutable, so Starling never needs to);
            False raises ValueError if a copy is unavoidable (any non-Array input); None copies
            only when needed.
    Returns:
        Array with the shape of ``obj``.
    Raises:
        TypeError: ``obj`` is not array-like or ``dtype`` is not a Starling dtype.
        ValueError: ragged nested sequences; ``copy=False`` when a copy is needed.
    """
    check_device(device, "asarray")
    dt = None if dtype is None else dtypes.canonicalize(dtype)
    if isinstance(obj, (Array, Tracer)):
        if dt is None or obj.dtype == dt:
            return obj
        return convert_element_type(obj, dt, False)
    if copy is False:
        raise ValueError(f"asarray: copy=False but a {type(obj).__name__} must be copied into a "
                         "Starling buffer")
    if type(obj) in (bool, int, float, complex):
        x = operand(obj, "asarray")
        if dt is not None:
            return wrap(np.asarray(obj).astype(dt)[()] if not isinstance(obj, complex) or
                        dtypes.is_complex(dt) else np.real(obj).astype(dt), False)
        return x
    if isinstance(obj, (list, tuple)) and _contains_traced(obj):
        raise TypeError("asarray: nested sequences of traced values are not supported; use "
                        "starling.numpy.stack")
    return from_array_like(obj, "asarray", dtype=dt)


def _contains_traced(seq):
    for item in seq:
        if isinstance(item, Tracer):
            return True
        if isinstance(item, (list, tuple)) and _contains_traced(item):
            return True
    return False
