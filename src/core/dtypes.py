"""Dtypes, the type-promotion lattice and weak types.

Starling's dtypes are NumPy dtype objects; the low-precision floats (bfloat16, float8_e4m3fn,
float8_e5m2, float4_e2m1fn) come from ml_dtypes.

``float8_e8m0fnu`` (ml_dtypes; OCP Microscaling Formats spec v1.0, "E8M0") is a *scale* dtype:
the powers of two ``2**-127 .. 2**127`` and NaN (byte 0xff), no sign, no zero. It holds the
block scales of the MX formats (src/arrays/ops/block_scaled.py) and supports what scales need:
conversion to and from the other dtypes (core/casting.py), bit casts and ops that move or
select values (reshape, indexing, concatenate, where, choose). Reductions (sum, max, sort...)
compute on its values in float32 and round back, like the other low-precision formats.
Elementwise arithmetic, comparisons, math functions and products (matmul, dot_general, and as
``preferred_element_type``) reject it with a TypeError (convert to float32 first), as PyTorch
does; it is not in ``ALL_DTYPES`` and promotes with nothing.

Promotion follows JAX's lattice (see the JAX design note "Design of Type Promotion Semantics").
Python scalars are *weak*: they take the dtype of the array they meet, so ``x_f32 + 1.0`` is
float32 and ``x_i8 + 3`` is int8. Joins on the lattice:

=============  =====================================================================
kind mix       result
=============  =====================================================================
bool + T       T
int + int      the smallest signed/unsigned int holding both (u64 + i64 -> weak float32)
int + float    the float (a weak float scalar with an int array -> default float)
float + float  the wider float; bfloat16 + float16 -> float32
any + complex  the complex wide enough for both parts
float8/float4  only with themselves or weak scalars; mixing raises TypeError (cast first)
=============  =====================================================================

Defaults (PyTorch-style, documented choice): Python floats and float lists become float32,
Python ints become int64, Python complex becomes complex64. NumPy arrays keep their dtype.
"""
from __future__ import annotations

import functools

import ml_dtypes
import numpy as np

bool_ = np.dtype(np.bool_)
int8, int16, int32, int64 = (np.dtype(t) for t in (np.int8, np.int16, np.int32, np.int64))
uint8, uint16, uint32, uint64 = (np.dtype(t) for t in (np.uint8, np.uint16, np.uint32, np.uint64))
float16, float32, float64 = (np.dtype(t) for t in (np.float16, np.float32, np.float64))
bfloat16 = np.dtype(ml_dtypes.bfloat16)
float8_e4m3fn = np.dtype(ml_dtypes.float8_e4m3fn)
float8_e5m2 = np.dtype(ml_dtypes.float8_e5m2)
float4_e2m1fn = np.dtype(ml_dtypes.float4_e2m1fn)
float8_e8m0fnu = np.dtype(ml_dtypes.float8_e8m0fnu)
complex64, complex128 = np.dtype(np.complex64), np.dtype(np.complex128)
# float0: the dtype of tangents/cotangents of integer and bool values (as in JAX).
float0 = np.dtype([("float0", np.void, 0)])

DEFAULT_FLOAT = float32
DEFAULT_INT = int64
DEFAULT_COMPLEX = complex64

SIGNED_INTS = (int8, int16, int32, int64)
UNSIGNED_INTS = (uint8, uint16, uint32, uint64)
LOW_PRECISION_FLOATS = (float8_e4m3fn, float8_e5m2, float4_e2m1fn)
FLOATS = (bfloat16, float16, float32, float64) + LOW_PRECISION_FLOATS
COMPLEXES = (complex64, complex128)
ALL_DTYPES = (bool_,) + SIGNED_INTS + UNSIGNED_INTS + FLOATS + COMPLEXES
SCALE_FLOATS = (float8_e8m0fnu,)

_NAMES = {dt: dt.name for dt in ALL_DTYPES + SCALE_FLOATS}


def canonicalize(dtype) -> np.dtype:
    """Returns the np.dtype for a dtype-like (np.dtype, scalar type, name, Python type).

    Raises:
        TypeError: if ``dtype`` is not one of Starling's dtypes.
    """
    if dtype is float:
        return DEFAULT_FLOAT
    if dtype is int:
        return DEFAULT_INT
    if dtype is complex:
        return DEFAULT_COMPLEX
    if dtype is bool:
        return bool_
    try:
        dt = np.dtype(dtype)
    except TypeError:
        raise TypeError(f"dtype: {dtype!r} is not a dtype; valid dtypes: "
                        f"{', '.join(sorted(_NAMES.values()))}") from None
    if dt not in _NAMES and dt != float0:
        raise TypeError(f"dtype: {dt} is not supported by Starling; valid dtypes: "
                        f"{', '.join(sorted(_NAMES.values()))}")
    return dt


def is_bool(dt) -> bool:
    """True for the bool dtype."""
    return dt == bool_


def is_signed_int(dt) -> bool:
    """True for int8..int64."""
    return dt.kind == "i"


def is_unsigned_int(dt) -> bool:
    """True for uint8..uint64."""
    return dt.kind == "u"


def is_integer(dt) -> bool:
    """True for signed and unsigned integer dtypes (not bool)."""
    return dt.kind in "iu"


def is_floating(dt) -> bool:
    """True for real floating dtypes, including bfloat16 / float8 / float4 (ml_dtypes kind 'V')."""
    return dt.kind == "f" or dt in FLOATS


def is_complex(dt) -> bool:
    """True for complex64 and complex128."""
    return dt.kind == "c"


def is_inexact(dt) -> bool:
    """True for floating and complex dtypes."""
    return is_floating(dt) or is_complex(dt)


def finfo(dtype):
    """Machine limits of a floating dtype (ml_dtypes.finfo covers the low-precision floats and
    float8_e8m0fnu)."""
    dt = canonicalize(dtype)
    if is_complex(dt):
        dt = real_dtype(dt)
    if not is_floating(dt) and dt not in SCALE_FLOATS:
        raise TypeError(f"finfo: {dt} is not a floating dtype")
    return ml_dtypes.finfo(dt)


def iinfo(dtype):
    """Machine limits of an integer dtype."""
    dt = canonicalize(dtype)
    if not is_integer(dt):
        raise TypeError(f"iinfo: {dt} is not an integer dtype")
    return np.iinfo(dt)


def real_dtype(dt) -> np.dtype:
    """complex64 -> float32, complex128 -> float64, otherwise ``dt``."""
    if dt == complex64:
        return float32
    if dt == complex128:
        return float64
    return dt


def complex_dtype(dt) -> np.dtype:
    """The complex dtype whose parts hold ``dt``: float64 -> complex128, else complex64."""
    return complex128 if dt in (float64, complex128) else complex64


# ---- the lattice ------------------------------------------------------------------------------
# Nodes are dtypes plus the weak kinds "i*", "f*", "c*" (Python int / float / complex).
_WEAK_INT, _WEAK_FLOAT, _WEAK_COMPLEX = "i*", "f*", "c*"
_EDGES = {
    bool_: [_WEAK_INT],
    _WEAK_INT: [uint8, int8],
    uint8: [int16, uint16], uint16: [int32, uint32], uint32: [int64, uint64],
    uint64: [_WEAK_FLOAT],
    int8: [int16], int16: [int32], int32: [int64], int64: [_WEAK_FLOAT],
    _WEAK_FLOAT: [bfloat16, float16, *LOW_PRECISION_FLOATS, _WEAK_COMPLEX],
    bfloat16: [float32], float16: [float32], float32: [float64, complex64], float64: [complex128],
    _WEAK_COMPLEX: [complex64], complex64: [complex128], complex128: [],
    **{dt: [] for dt in LOW_PRECISION_FLOATS + SCALE_FLOATS},
}


def _upper_bounds(node):
    seen, stack = set(), [node]
    while stack:
        n = stack.pop()
        if n in seen:
            continue
        seen.add(n)
        stack.extend(_EDGES[n])
    return seen


_UPPER = {n: _upper_bounds(n) for n in _EDGES}


def _join(a, b):
    common = _UPPER[a] & _UPPER[b]
    # The least upper bound is the common bound that every other common bound lies above.
    for c in common:
        if common <= _UPPER[c]:
            return c
    return None


_WEAK_DEFAULT = {_WEAK_INT: DEFAULT_INT, _WEAK_FLOAT: DEFAULT_FLOAT, _WEAK_COMPLEX: DEFAULT_COMPLEX}


def _node(dt, weak):
    if weak and not is_bool(dt):
        if is_integer(dt):
            return _WEAK_INT
        if is_floating(dt):
            return _WEAK_FLOAT
        if is_complex(dt):
            return _WEAK_COMPLEX
    return dt


@functools.lru_cache(maxsize=4096)
def _promote_pair(a, wa, b, wb):
    na, nb = _node(a, wa), _node(b, wb)
    j = _join(na, nb)
    if j is None and (a in SCALE_FLOATS or b in SCALE_FLOATS):
        raise TypeError(f"type promotion: {a} and {b}: float8_e8m0fnu holds scales and takes "
                        f"part in no arithmetic; convert it first (.astype(float32))")
    if j is None:
        raise TypeError(f"type promotion: no implicit promotion between {a} and {b}; "
                        f"low-precision floats (float8/float4) mix only with themselves or "
                        f"Python scalars: cast explicitly with .astype(...)")
    if isinstance(j, str):
        # The join is a weak node (i*, f*, c*): the result is weak and takes the default dtype of
        # its kind, which keeps promotion associative (JAX's rule).
        return _WEAK_DEFAULT[j], True
    return j, False


def result_type(*args) -> tuple[np.dtype, bool]:
    """Promotes (dtype, weak_type) pairs; returns (dtype, weak_type) of the result.

    Raises:
        TypeError: for pairs with no implicit promotion (e.g. float8 with float32).
    """
    dt, weak = args[0]
    for other_dt, other_weak in args[1:]:
        dt, weak = _promote_pair(dt, weak, other_dt, other_weak)
    return dt, weak


def promote_types(a, b) -> np.dtype:
    """Array API ``result_type`` for two strong dtypes."""
    return _promote_pair(canonicalize(a), False, canonicalize(b), False)[0]


def dtype_of_scalar(x) -> np.dtype:
    """Dtype a Python scalar takes on its own (weak): bool, int64, float32, complex64."""
    if isinstance(x, (bool, np.bool_)):
        return bool_
    if isinstance(x, int):
        return DEFAULT_INT
    if isinstance(x, float):
        return DEFAULT_FLOAT
    if isinstance(x, complex):
        return DEFAULT_COMPLEX
    raise TypeError(f"{type(x).__name__} is not a Python scalar")


def name(dt) -> str:
    """The canonical name of a dtype (e.g. "bfloat16")."""
    return str(dt)
