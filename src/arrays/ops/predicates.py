"""Type and shape predicates: iscomplex, isreal, iscomplexobj, isrealobj, isscalar, and shape /
ndim / size as functions (NumPy names).

``iscomplex`` / ``isreal`` are elementwise (arrays); the others answer from the static type or
shape only, so they return Python values even for traced arrays.
"""
from __future__ import annotations

import math
import numbers

import numpy as np

from ...core import dtypes
from ...core.trace import Tracer
from ..array import Array
from ..convert import operand
from .axes import normalize_axis
from .reductions import _ns

__all__ = ["iscomplex", "isreal", "iscomplexobj", "isrealobj", "isscalar", "shape", "ndim",
           "size"]


def iscomplex(x, /):
    """Elementwise: True where the element has a nonzero imaginary part (NumPy ``iscomplex``).

    Args:
        x: array of shape ``(*shape)``, any dtype (a real dtype gives all False).
    Returns:
        bool array of shape ``(*shape)``.
    """
    snp = _ns()
    x = operand(x, "iscomplex")
    if not dtypes.is_complex(x.dtype):
        return snp.zeros(x.shape, dtype=snp.bool_)
    return snp.not_equal(snp.imag(x), 0)


def isreal(x, /):
    """Elementwise: True where the imaginary part is zero (NumPy ``isreal``; a real dtype gives
    all True).

    Returns:
        bool array of ``x``'s shape.
    """
    snp = _ns()
    x = operand(x, "isreal")
    if not dtypes.is_complex(x.dtype):
        return snp.ones(x.shape, dtype=snp.bool_)
    return snp.equal(snp.imag(x), 0)


def _dtype(op, x):
    if isinstance(x, (Array, Tracer, np.ndarray, np.generic)):
        return np.dtype(x.dtype)
    return operand(x, op).dtype


def iscomplexobj(x, /):
    """Whether ``x`` (an array, scalar or sequence) has a complex dtype: a static Python bool
    (NumPy ``iscomplexobj``), whatever the values."""
    return dtypes.is_complex(_dtype("iscomplexobj", x))


def isrealobj(x, /):
    """``not iscomplexobj(x)``: a static Python bool (NumPy ``isrealobj``)."""
    return not iscomplexobj(x)


def isscalar(element, /):
    """Whether ``element`` is a scalar: a Python / NumPy number or bool, or a 0-d Starling array
    (traced too). Following JAX, 0-d arrays count as scalars (NumPy says False for them);
    strings and other non-numbers are not scalars here.

    Returns:
        A Python bool.
    """
    if isinstance(element, (Array, Tracer)):
        return element.ndim == 0
    if isinstance(element, (bool, np.bool_, numbers.Number)):
        return True
    if isinstance(element, np.ndarray):
        return False
    return isinstance(element, np.generic) and element.dtype.kind in "biufc"


def _shape(op, a):
    if isinstance(a, (Array, Tracer, np.ndarray, np.generic)):
        return tuple(a.shape)
    return tuple(operand(a, op).shape)


def shape(a, /):
    """The shape of ``a`` (an array, scalar or nested sequence) as a tuple of ints (NumPy
    ``shape``); static, also for traced arrays."""
    return _shape("shape", a)


def ndim(a, /):
    """The number of dims of ``a`` (an array, scalar or nested sequence), a Python int."""
    return len(_shape("ndim", a))


def size(a, /, axis=None):
    """The number of elements of ``a``, or the length of dim ``axis`` (NumPy ``size``).

    Raises:
        AxisError: axis out of range.
    """
    s = _shape("size", a)
    if axis is None:
        return math.prod(s)
    return s[normalize_axis("size", axis, len(s))]
