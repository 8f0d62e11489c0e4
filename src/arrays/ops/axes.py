"""Axis arguments: validation and normalisation shared by every op family that takes ``axis``.

``normalize_axis(op, axis, ndim)`` turns one axis (negative allowed) into an int in
``0..ndim-1``; ``normalize_axes(op, axis, ndim)`` turns None / an int / a sequence of ints into a
tuple of such ints. Both raise errors that name the op, the offending axis, the array's ndim and
the valid range, e.g. ``sum: axis 3 is out of bounds for array of ndim 2 (valid: -2..1)``.

An out-of-range axis raises ``AxisError``, which subclasses both ValueError and IndexError (as
NumPy's does), so callers catching either keep working.

Ops whose axis names a position *between* dims (``expand_dims``, ``stack``, ``moveaxis``
destinations, ``insert``) pass the ndim of the result (``ndim + 1`` for one new dim).
"""
from __future__ import annotations

import operator

import numpy as np

__all__ = []  # helpers for op families; nothing for the user namespace

_INT_TYPES = (int, np.integer)


class AxisError(ValueError, IndexError):
    """An axis argument is out of range for the array it applies to.

    Subclasses ValueError and IndexError, like NumPy's ``numpy.exceptions.AxisError``.

    Attributes:
        axis: the axis as given. ndim: the number of dims of the array. op: the op's name.
    """

    def __init__(self, message, *, axis=None, ndim=None, op=None):
        super().__init__(message)
        self.axis = axis
        self.ndim = ndim
        self.op = op


def _valid_range(ndim: int) -> str:
    if ndim == 0:
        return "none: a 0-d array has no axes"
    return f"valid: {-ndim}..{ndim - 1}"


def _out_of_bounds(op, axis, ndim, name):
    return AxisError(f"{op}: {name} {axis} is out of bounds for array of ndim {ndim} "
                     f"({_valid_range(ndim)})", axis=axis, ndim=ndim, op=op)


def _as_int(op, axis, name, given):
    # bool is an int subclass, but `axis=True` is always a mistake; floats are rejected as NumPy
    # does. Objects with __index__ (NumPy integers, 0-d integer arrays) are accepted.
    if type(axis) is int:
        return axis
    if isinstance(axis, (bool, np.bool_)):
        raise TypeError(f"{op}: {name} must be an int, a tuple of ints or None, got {given!r} "
                        "(bool)")
    if isinstance(axis, _INT_TYPES):
        return int(axis)
    try:
        return operator.index(axis)
    except TypeError:
        raise TypeError(f"{op}: {name} must be an int, a tuple of ints or None, got {given!r} "
                        f"({type(axis).__name__})") from None


def normalize_axis(op: str, axis, ndim: int, *, name: str = "axis") -> int:
    """Returns ``axis`` as an int in ``0..ndim-1`` (negative axes count from the end).

    Args:
        op: name of the calling op (for error messages).
        axis: an int (or an object with ``__index__``), possibly negative.
        ndim: number of dims of the array the axis refers to.
        name: what the argument is called in the op's signature ("axis", "source", ...).
    Returns:
        The non-negative axis.
    Raises:
        TypeError: ``axis`` is not an integer (bool and float are rejected).
        AxisError: (a ValueError and IndexError) ``axis`` is outside ``-ndim..ndim-1``.
    """
    if type(axis) is not int:
        axis = _as_int(op, axis, name, axis)
    if -ndim <= axis < ndim:
        return axis + ndim if axis < 0 else axis
    raise _out_of_bounds(op, axis, ndim, name)


def normalize_axes(op: str, axis, ndim: int, *, name: str = "axis", sort: bool = False,
                   allow_duplicates: bool = False) -> tuple:
    """Returns ``axis`` (None, an int or a sequence of ints) as a tuple of non-negative ints.

    Args:
        op: name of the calling op (for error messages).
        axis: None (all axes, in order), an int, or a tuple / list of ints (negative allowed).
        ndim: number of dims of the array.
        name: what the argument is called in the op's signature.
        sort: return the axes in increasing order (reductions) instead of the given order.
        allow_duplicates: accept repeated axes (otherwise ValueError).
    Returns:
        A tuple of ints in ``0..ndim-1``; ``()`` for an empty tuple.
    Raises:
        TypeError: an entry is not an integer, or ``axis`` is neither None, int nor a sequence.
        AxisError: (a ValueError and IndexError) an entry is outside ``-ndim..ndim-1``.
        ValueError: the same axis appears twice (after normalising negative axes).
    """
    if axis is None:
        return tuple(range(ndim))
    if type(axis) is int:
        if -ndim <= axis < ndim:
            return (axis + ndim if axis < 0 else axis,)
        raise _out_of_bounds(op, axis, ndim, name)
    if isinstance(axis, (tuple, list)):
        out = tuple(normalize_axis(op, _as_int(op, a, name, axis), ndim, name=name) for a in axis)
        if not allow_duplicates and len(set(out)) != len(out):
            dup = next(a for i, a in enumerate(out) if a in out[:i])
            raise ValueError(f"{op}: duplicate {name} {dup} in {tuple(axis)} (after normalising "
                             f"negative axes for ndim {ndim}); each axis may appear once")
        return tuple(sorted(out)) if sort else out
    return (normalize_axis(op, axis, ndim, name=name),)
