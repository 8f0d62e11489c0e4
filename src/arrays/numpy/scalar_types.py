"""The dtype names of ``starling.numpy``: callable scalar types, NumPy's aliases and abstract types.

``snp.float32`` is a scalar *type* (as ``jnp.float32``): ``snp.float32(3.0)`` is a 0-d float32
Array and ``snp.float32(x)`` casts an array. It is also a dtype-like everywhere a dtype is taken:
it carries ``.dtype`` (the NumPy dtype), so ``np.dtype(snp.float32)``, ``dtype=snp.float32`` (in
Starling and in NumPy), ``x.dtype == snp.float32`` (either side) and ``{snp.float32: ...}[x.dtype]``
all work: equality and hashing are those of the NumPy dtype. Array ``.dtype`` stays a NumPy dtype.

The abstract types (``number``, ``integer``, ``floating``, ``inexact``, ...) are NumPy's own, for
``issubdtype``; ``snp.issubdtype(snp.bfloat16, snp.floating)`` is True.
"""
from __future__ import annotations

import numpy as np

from ...core import dtypes

__all__ = [
    "bool_", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float16", "float32", "float64", "bfloat16", "float8_e4m3fn", "float8_e5m2",
    "float4_e2m1fn", "float8_e8m0fnu", "complex64", "complex128",
    "half", "single", "double", "float_", "int_", "uint", "intp", "uintp", "csingle", "cdouble",
    "complex_",
    "dtype", "generic", "number", "integer", "signedinteger", "unsignedinteger", "inexact",
    "floating", "complexfloating",
]


class _ScalarMeta(type):
    """Metaclass of the scalar types: calling one converts, comparing one compares its dtype."""

    dtype: np.dtype

    def __call__(cls, x=0, /):
        from ..ops.creation import asarray
        return asarray(x, dtype=cls.dtype)

    def __eq__(cls, other):
        if isinstance(other, _ScalarMeta):
            return cls.dtype == other.dtype
        try:
            return cls.dtype == other
        except TypeError:
            return NotImplemented

    def __ne__(cls, other):
        eq = _ScalarMeta.__eq__(cls, other)
        return eq if eq is NotImplemented else not eq

    def __hash__(cls):
        return hash(cls.dtype)

    def __instancecheck__(cls, obj):
        # NumPy scalars of this type (np.float32(1.0)), as isinstance(v, np.float32) would say.
        return isinstance(obj, cls.dtype.type)


def _scalar_type(dt: np.dtype, name: str | None = None):
    name = name or dt.name
    doc = (f"The {dt.name} scalar type and dtype: ``{name}(x)`` is ``asarray(x, dtype={dt.name})`` "
           f"(a 0-d Array for a scalar ``x``); as a dtype it equals ``np.dtype('{dt.name}')``.")
    cls = _ScalarMeta(name, (), {"dtype": dt, "__doc__": doc, "__module__": "starling.numpy"})
    return cls


bool_ = _scalar_type(dtypes.bool_, "bool_")
int8, int16, int32, int64 = (_scalar_type(d) for d in dtypes.SIGNED_INTS)
uint8, uint16, uint32, uint64 = (_scalar_type(d) for d in dtypes.UNSIGNED_INTS)
float16, float32, float64 = (_scalar_type(d) for d in (dtypes.float16, dtypes.float32,
                                                       dtypes.float64))
bfloat16 = _scalar_type(dtypes.bfloat16)
float8_e4m3fn = _scalar_type(dtypes.float8_e4m3fn)
float8_e5m2 = _scalar_type(dtypes.float8_e5m2)
float4_e2m1fn = _scalar_type(dtypes.float4_e2m1fn)
float8_e8m0fnu = _scalar_type(dtypes.float8_e8m0fnu)   # MX block scales (core/dtypes.py)
complex64, complex128 = (_scalar_type(d) for d in dtypes.COMPLEXES)

# NumPy's C-type aliases (fixed here to Starling's 64-bit index type); float_ / complex_ are the
# double-precision types, as in NumPy 1 and JAX.
half, single, double, float_ = float16, float32, float64, float64
int_, intp, uint, uintp = int64, int64, uint64, uint64
csingle, cdouble, complex_ = complex64, complex128, complex128

dtype = np.dtype
generic, number, integer = np.generic, np.number, np.integer
signedinteger, unsignedinteger = np.signedinteger, np.unsignedinteger
inexact, floating, complexfloating = np.inexact, np.floating, np.complexfloating
