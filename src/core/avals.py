"""Abstract values: what a transformation knows about an array without its data.

A ``ShapedArray`` is (shape, dtype, weak_type). A dim is a non-negative int or a sympy
expression over named shape variables (symbolic dims, used by dynamic shapes).
"""
from __future__ import annotations

import math

import numpy as np
import sympy

from . import dtypes
from .symbolic import DimExpr, as_dim

_SHORT = {
    "bool": "bool", "int8": "i8", "int16": "i16", "int32": "i32", "int64": "i64",
    "uint8": "u8", "uint16": "u16", "uint32": "u32", "uint64": "u64",
    "float16": "f16", "bfloat16": "bf16", "float32": "f32", "float64": "f64",
    "complex64": "c64", "complex128": "c128", "float8_e4m3fn": "f8e4m3fn",
    "float8_e5m2": "f8e5m2", "float4_e2m1fn": "f4e2m1fn",
    "float8_e8m0fnu": "f8e8m0fnu",
}


def short_dtype_name(dt) -> str:
    """Compact dtype name used by the IR printer: f32, i64, bf16, c64, ..."""
    return _SHORT.get(dt.name, "float0" if dt == dtypes.float0 else dt.name)


def is_symbolic(d) -> bool:
    """True for a symbolic dim (a DimExpr, see core/symbolic.py, or a bare sympy expression)."""
    return isinstance(d, (DimExpr, sympy.Basic))


def is_constant_shape(shape) -> bool:
    """True when every dim is a Python int (no symbolic dims)."""
    return all(type(d) is int for d in shape)


def shape_size(shape):
    """Number of elements (an int, or a sympy expression for symbolic shapes)."""
    if is_constant_shape(shape):
        return math.prod(shape)
    return math.prod(as_dim(d) if isinstance(d, sympy.Basic) else d for d in shape)


def canonicalize_shape(shape, op="shape") -> tuple:
    """Turns an int / sequence of ints (or symbolic dims) into a tuple of dims.

    Raises:
        TypeError: for a non-integer dim; ValueError: for a negative dim.
    """
    if isinstance(shape, (int, np.integer)) or is_symbolic(shape):
        shape = (shape,)
    try:
        dims = tuple(shape)
    except TypeError:
        raise TypeError(f"{op}: shape must be an int or a sequence of ints, got {shape!r}") from None
    out = []
    for d in dims:
        if type(d) is not int and is_symbolic(d):
            out.append(as_dim(d) if isinstance(d, sympy.Basic) else d)
            continue
        if isinstance(d, (bool, np.bool_)) or not isinstance(d, (int, np.integer)):
            if hasattr(d, "__index__") and not isinstance(d, (bool, np.bool_)):
                d = d.__index__()
            else:
                raise TypeError(f"{op}: shape entries must be integers, got {shape!r}")
        d = int(d)
        if d < 0:
            raise ValueError(f"{op}: shape entries must be non-negative, got {tuple(dims)}")
        out.append(d)
    return tuple(out)


class ShapedArray:
    """Abstract value of an array: ``shape`` (tuple of dims), ``dtype`` (np.dtype), ``weak_type``.

    Immutable and hashable; two avals are equal when all three fields are.
    """

    __slots__ = ("shape", "dtype", "weak_type")

    def __init__(self, shape, dtype, weak_type=False):
        object.__setattr__(self, "shape", tuple(shape))
        object.__setattr__(self, "dtype", dtype)
        object.__setattr__(self, "weak_type", bool(weak_type))

    def __setattr__(self, name, value):
        raise AttributeError("ShapedArray is immutable")

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self):
        return shape_size(self.shape)

    def update(self, shape=None, dtype=None, weak_type=None) -> "ShapedArray":
        return ShapedArray(self.shape if shape is None else shape,
                           self.dtype if dtype is None else dtype,
                           self.weak_type if weak_type is None else weak_type)

    def strip_weak_type(self) -> "ShapedArray":
        return self.update(weak_type=False) if self.weak_type else self

    def __eq__(self, other):
        return (isinstance(other, ShapedArray) and self.shape == other.shape
                and self.dtype == other.dtype and self.weak_type == other.weak_type)

    def __hash__(self):
        return hash((self.shape, self.dtype, self.weak_type))

    def str_short(self) -> str:
        dims = ",".join(str(d) for d in self.shape)
        return f"{short_dtype_name(self.dtype)}[{dims}]" + ("{weak}" if self.weak_type else "")

    def __repr__(self):
        return f"ShapedArray({self.str_short()})"


class ShapeDtypeStruct:
    """A shape and a dtype standing for an array not computed (JAX's ``ShapeDtypeStruct``):
    what ``pure_callback`` / ``io_callback`` declare as results, what ``eval_shape`` and
    ``compile(...).lower`` accept in place of arrays.

    Args:
        shape: tuple of ints.
        dtype: anything ``numpy.dtype`` accepts (Starling's dtypes included).
        sharding: optional sharding the array would have (kept, not checked here).
    Raises:
        TypeError: a shape that is not a tuple of non-negative ints, or an unknown dtype.
    """

    __slots__ = ("shape", "dtype", "sharding")

    def __init__(self, shape, dtype, sharding=None):
        shape = tuple(shape)
        if not all(isinstance(d, (int, np.integer)) and d >= 0 for d in shape):
            raise TypeError(f"ShapeDtypeStruct: shape must be a tuple of non-negative ints, got "
                            f"{shape}")
        self.shape = tuple(int(d) for d in shape)
        self.dtype = np.dtype(dtype)
        self.sharding = sharding

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __eq__(self, other):
        return (isinstance(other, ShapeDtypeStruct) and self.shape == other.shape
                and self.dtype == other.dtype and self.sharding == other.sharding)

    def __hash__(self):
        return hash((self.shape, self.dtype))

    def __repr__(self):
        return f"ShapeDtypeStruct(shape={self.shape}, dtype={self.dtype.name})"
