"""Data types shared by the differentiation rules and interpreters.

``Zero(aval)`` is a symbolic zero tangent/cotangent (no buffer); ``UndefinedPrimal(aval)`` marks
the linear input of a primitive being transposed. Tangents of integer and bool values have the
``float0`` dtype (they carry no information), as in JAX.
"""
from __future__ import annotations

from . import dtypes
from .avals import ShapedArray


class Zero:
    """A symbolic zero of abstract value ``aval`` (used for tangents and cotangents)."""

    __slots__ = ("aval",)

    def __init__(self, aval: ShapedArray):
        self.aval = aval

    @staticmethod
    def like(x) -> "Zero":
        return Zero(tangent_aval(x.aval))

    def __repr__(self):
        return f"Zero({self.aval.str_short()})"


class UndefinedPrimal:
    """Stands for a linear input during transposition: only its ``aval`` is known."""

    __slots__ = ("aval",)

    def __init__(self, aval: ShapedArray):
        self.aval = aval

    def __repr__(self):
        return f"UndefinedPrimal({self.aval.str_short()})"


def is_undefined(x) -> bool:
    """True for the UndefinedPrimal placeholder of a linear input being transposed."""
    return type(x) is UndefinedPrimal


def tangent_dtype(dt):
    """float0 for bool/int values; the dtype itself for inexact values."""
    return dt if dtypes.is_inexact(dt) else dtypes.float0


def tangent_aval(aval: ShapedArray) -> ShapedArray:
    """The aval of tangents of ``aval``: same shape, tangent dtype, never weak."""
    return ShapedArray(aval.shape, tangent_dtype(aval.dtype), False)


def is_differentiable_dtype(dt) -> bool:
    """True for float and complex dtypes (the ones with nonzero tangents)."""
    return dtypes.is_inexact(dt)
