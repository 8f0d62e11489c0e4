"""Operators and array methods, installed on both Array and Tracer.

Every method is a thin call into ``starling.numpy`` so that eager and traced code share one path.
"""
from __future__ import annotations

import numbers

import numpy as np

from ..core.symbolic import DimExpr
from ..core.trace import Tracer
from .array import Array

# name of the dunder -> name of the starling.numpy function (called as f(self, other))
_BINARY = {
    "add": "add", "sub": "subtract", "mul": "multiply", "truediv": "divide",
    "floordiv": "floor_divide", "mod": "remainder", "pow": "pow", "matmul": "matmul",
    "and": "bitwise_and", "or": "bitwise_or", "xor": "bitwise_xor",
    "lshift": "bitwise_left_shift", "rshift": "bitwise_right_shift",
}
_COMPARE = {"eq": "equal", "ne": "not_equal", "lt": "less", "le": "less_equal",
            "gt": "greater", "ge": "greater_equal"}
_UNARY = {"neg": "negative", "pos": "positive", "abs": "abs", "invert": "bitwise_invert"}
# plain methods: method name -> starling.numpy function (self passed first)
_METHODS = {
    "reshape": None, "transpose": None, "astype": "astype", "sum": "sum", "prod": "prod",
    "mean": "mean", "var": "var", "std": "std", "max": "max", "min": "min", "argmax": "argmax",
    "argmin": "argmin", "any": "any", "all": "all", "cumsum": "cumsum", "cumprod": "cumprod",
    "ravel": "ravel", "flatten": "ravel", "squeeze": "squeeze", "swapaxes": "swapaxes",
    "clip": "clip", "round": "round", "conj": "conj", "conjugate": "conj", "dot": "dot",
    "take": "take", "sort": "sort", "argsort": "argsort", "repeat": "repeat", "trace": "trace",
    "diagonal": "diagonal", "nonzero": "nonzero", "searchsorted": "searchsorted",
    "copy": "copy", "ptp": "ptp",
}
_PROPERTIES = {"real": "real", "imag": "imag", "T": "_T", "mT": "_mT", "flat": None}

# DimExpr: a symbolic dim on the left (``x.shape[0] * x``) stages dim_value like ``x * n``.
_ARRAY_LIKE = (Array, Tracer, numbers.Number, np.ndarray, np.generic, list, tuple, DimExpr)


def _binary(fn):
    # The forward operator is the op itself (one call frame less on the hot path); its wrapper
    # raises TypeError for non-array operands.
    op = fn

    def rop(self, other):
        if not isinstance(other, _ARRAY_LIKE):
            return NotImplemented
        return fn(other, self)
    return op, rop


def _compare(fn):
    def op(self, other):
        if not isinstance(other, _ARRAY_LIKE):
            return NotImplemented
        return fn(self, other)
    return op


def install(snp) -> None:
    """Installs the operators/methods that ``snp`` (the starling.numpy module) defines."""
    for cls in (Array, Tracer):
        for dunder, fname in _BINARY.items():
            fn = getattr(snp, fname, None)
            if fn is None:
                continue
            op, rop = _binary(fn)
            setattr(cls, f"__{dunder}__", op)
            setattr(cls, f"__r{dunder}__", rop)
        for dunder, fname in _COMPARE.items():
            fn = getattr(snp, fname, None)
            if fn is not None:
                setattr(cls, f"__{dunder}__", _compare(fn))
        for dunder, fname in _UNARY.items():
            fn = getattr(snp, fname, None)
            if fn is not None:
                setattr(cls, f"__{dunder}__", fn)
        if hasattr(snp, "floor_divide") and hasattr(snp, "remainder"):
            cls.__divmod__ = lambda self, other: (snp.floor_divide(self, other),
                                                  snp.remainder(self, other))
            cls.__rdivmod__ = lambda self, other: (snp.floor_divide(other, self),
                                                   snp.remainder(other, self))
        for name, fname in _METHODS.items():
            fn = getattr(snp, fname or name, None)
            if fn is not None:
                setattr(cls, name, _method(fn, name))
        if hasattr(snp, "reshape"):
            cls.reshape = _reshape_method(snp)
        if hasattr(snp, "permute_dims"):
            cls.transpose = _transpose_method(snp)
            cls.T = property(snp._T) if hasattr(snp, "_T") else property(
                lambda self: snp.permute_dims(self, tuple(range(self.ndim))[::-1]))
            cls.mT = property(snp._mT) if hasattr(snp, "_mT") else property(snp.matrix_transpose)
        if hasattr(snp, "round"):
            cls.__round__ = lambda self, ndigits=None: (
                snp.round(self) if ndigits is None else snp.round(self, decimals=ndigits))
        for prop in ("real", "imag"):
            fn = getattr(snp, prop, None)
            if fn is not None:
                setattr(cls, prop, property(fn))
        if hasattr(snp, "_getitem"):
            cls.__getitem__ = snp._getitem
            cls.__iter__ = _iter
        if hasattr(snp, "_IndexUpdateHelper"):
            cls.at = property(snp._IndexUpdateHelper)


def _method(fn, name):
    def method(self, *args, **kwargs):
        return fn(self, *args, **kwargs)
    method.__name__ = name
    method.__doc__ = f"Same as ``starling.numpy.{fn.__name__}(self, ...)``."
    return method


def _reshape_method(snp):
    def reshape(self, *shape, order="C"):
        """``x.reshape(2, 3)`` or ``x.reshape((2, 3))``; see starling.numpy.reshape."""
        if len(shape) == 1 and not isinstance(shape[0], (int, np.integer)):
            shape = shape[0]
        return snp.reshape(self, shape, order=order)
    return reshape


def _transpose_method(snp):
    def transpose(self, *axes):
        """``x.transpose()`` reverses dims; ``x.transpose(1, 0, 2)`` permutes them."""
        if not axes or (len(axes) == 1 and axes[0] is None):
            axes = tuple(range(self.ndim))[::-1]
        elif len(axes) == 1 and not isinstance(axes[0], (int, np.integer)):
            axes = tuple(axes[0])
        return snp.permute_dims(self, axes)
    return transpose


def _iter(self):
    if self.ndim == 0:
        raise TypeError("iteration over a 0-d array")
    return (self[i] for i in range(self.shape[0]))
