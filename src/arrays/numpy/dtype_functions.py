"""Array API data type functions: astype, can_cast, result_type, isdtype, finfo, iinfo,
promote_types, issubdtype, and the inspection namespace ``__array_namespace_info__``.

Promotion is JAX's lattice (src/core/dtypes.py): Python scalars and Python scalar types
(``int``, ``float``, ``complex``) are *weak* and adopt the dtype of the strong operands they meet;
strong dtypes follow the Array API tables where those are defined (same-kind promotion) and the
lattice elsewhere (``int8 + uint8 -> int16``, ``int64 + float16 -> float16``,
``uint64 + int64 -> float32``).
"""
from __future__ import annotations

import builtins

import numpy as np

from ...core import dtypes
from ...core.trace import Tracer
from ..array import Array
from ..convert import operand
from ..device import DEFAULT_DEVICE, check_device, places_result
from ..device import devices as _devices
from ..ops.convert_element_type import convert_element_type

__all__ = ["astype", "can_cast", "result_type", "isdtype", "finfo", "iinfo", "promote_types",
           "issubdtype", "__array_namespace_info__"]

_PY_TYPES = (builtins.bool, builtins.int, builtins.float, builtins.complex)


def _dtype_of(op, x):
    """The dtype of a dtype-like or of an array (Array, Tracer, NumPy array)."""
    if isinstance(x, (Array, Tracer)):
        return x.dtype
    if isinstance(x, np.ndarray):
        return dtypes.canonicalize(x.dtype)
    try:
        return dtypes.canonicalize(x)
    except TypeError:
        raise TypeError(f"{op}: expected a dtype or an array, got {x!r}") from None


@places_result
def astype(x, dtype, /, *, copy=True, device=None):
    """``x`` cast to ``dtype`` (Array API ``astype``), with JAX / XLA's conversion semantics.

    Float -> int truncates toward zero, NaN gives 0 and values out of range (+-inf too)
    saturate to the integer dtype's min / max; a cast to a floating dtype rounds the exact
    value once (nearest, ties to even); complex -> real keeps the real part; anything -> bool
    is ``x != 0``; integers wrap. Eager, staged and compiled results agree whatever NumPy /
    ml_dtypes is installed (details: ``starling.core.casting``). The result is strong
    (not weak-typed). ``copy`` is accepted; buffers are immutable, so it never matters.
    Raises:
        TypeError: ``dtype`` is not a Starling dtype.
    """
    check_device(device, "astype")
    x = operand(x, "astype")
    return convert_element_type(x, dtypes.canonicalize(dtype), False)


def promote_types(type1, type2, /):
    """The promotion of two (strong) dtypes on the lattice.

    Raises:
        TypeError: no implicit promotion (e.g. float8_e4m3fn with float32).
    """
    return dtypes.promote_types(_dtype_of("promote_types", type1),
                                _dtype_of("promote_types", type2))


def result_type(*arrays_and_dtypes):
    """The dtype of an op combining the given arrays, dtypes and Python scalars (JAX rules).

    Arrays contribute their dtype and weak type; dtypes are strong; Python scalars and the types
    ``int``, ``float``, ``complex`` are weak (``result_type(int8, 1) == int8``,
    ``result_type(int8, 1.0) == float32``); if everything is weak, the defaults apply
    (int64 / float32 / complex64).
    Raises:
        ValueError: no arguments. TypeError: no implicit promotion, or an argument that is
        neither an array, a dtype nor a Python scalar.
    """
    if not arrays_and_dtypes:
        raise ValueError("result_type: at least one array or dtype is required")
    infos = []
    for a in arrays_and_dtypes:
        if type(a) in _PY_TYPES:
            infos.append((dtypes.dtype_of_scalar(a), type(a) is not builtins.bool))
        elif a is builtins.int or a is builtins.float or a is builtins.complex:
            infos.append((dtypes.canonicalize(a), True))
        elif isinstance(a, (Array, Tracer)):
            infos.append((a.dtype, a.weak_type))
        else:
            infos.append((_dtype_of("result_type", a), False))
    dt, weak = dtypes.result_type(*infos)
    return dt


def can_cast(from_, to, /, casting="same_kind"):
    """Whether ``from_`` (a dtype or an array) promotes to ``to`` on the lattice, i.e.
    ``promote_types(from_, to) == to`` (Array API semantics; ``casting`` is accepted for NumPy
    compatibility and only "same_kind" / "safe" are meaningful: both use the lattice; "unsafe"
    is always True, "no" / "equiv" need equal dtypes)."""
    a = _dtype_of("can_cast", from_)
    b = _dtype_of("can_cast", to)
    if casting == "unsafe":
        return True
    if casting in ("no", "equiv"):
        return a == b
    if casting not in ("same_kind", "safe"):
        raise ValueError(f"can_cast: casting must be one of 'no', 'equiv', 'safe', 'same_kind', "
                         f"'unsafe', got {casting!r}")
    try:
        return dtypes.promote_types(a, b) == b
    except TypeError:
        return False


_KINDS = {
    "bool": dtypes.is_bool,
    "signed integer": dtypes.is_signed_int,
    "unsigned integer": dtypes.is_unsigned_int,
    "integral": dtypes.is_integer,
    "real floating": dtypes.is_floating,
    "complex floating": dtypes.is_complex,
    "numeric": lambda dt: not dtypes.is_bool(dt) and dt != dtypes.float0,
}


def isdtype(dtype, kind):
    """Whether ``dtype`` is of ``kind`` (Array API ``isdtype``).

    Args:
        dtype: a dtype (not an array).
        kind: a dtype (equality), one of "bool", "signed integer", "unsigned integer",
            "integral", "real floating" (includes bfloat16 / float8 / float4),
            "complex floating", "numeric", or a tuple of those (any matches).
    Raises:
        TypeError: ``dtype`` is an array or not a dtype. ValueError: an unknown kind name.
    """
    if isinstance(dtype, (Array, Tracer, np.ndarray)):
        raise TypeError("isdtype: expected a dtype, got an array (use x.dtype)")
    dt = _dtype_of("isdtype", dtype)
    if isinstance(kind, tuple):
        return builtins.any(isdtype(dt, k) for k in kind)
    if isinstance(kind, str):
        fn = _KINDS.get(kind)
        if fn is None:
            raise ValueError(f"isdtype: unknown kind {kind!r}; valid kinds: "
                             f"{', '.join(repr(k) for k in _KINDS)} or a dtype")
        return fn(dt)
    return dt == _dtype_of("isdtype", kind)


_ABSTRACT = {
    np.bool_: dtypes.is_bool,
    np.number: lambda dt: not dtypes.is_bool(dt),
    np.integer: dtypes.is_integer,
    np.signedinteger: dtypes.is_signed_int,
    np.unsignedinteger: dtypes.is_unsigned_int,
    np.inexact: dtypes.is_inexact,
    np.floating: dtypes.is_floating,
    np.complexfloating: dtypes.is_complex,
    np.generic: lambda dt: True,
}


def issubdtype(arg1, arg2, /):
    """NumPy ``issubdtype`` that also knows bfloat16 / float8 / float4 are floating:
    ``issubdtype(bfloat16, np.floating)`` is True."""
    dt = _dtype_of("issubdtype", arg1)
    if isinstance(arg2, type) and arg2 in _ABSTRACT:
        return _ABSTRACT[arg2](dt)
    return dt == _dtype_of("issubdtype", arg2)


class FInfo:
    """Machine limits of a floating dtype, as the Array API asks: ``bits`` (int), ``eps``,
    ``max``, ``min``, ``smallest_normal`` (Python floats) and ``dtype`` (the real dtype), plus
    NumPy's ``tiny`` (= smallest_normal), ``resolution``, ``precision``, ``nmant``, ``nexp``,
    ``minexp``, ``maxexp``, ``smallest_subnormal`` and ``epsneg``."""

    __slots__ = ("bits", "eps", "max", "min", "smallest_normal", "dtype", "tiny", "resolution",
                 "precision", "nmant", "nexp", "minexp", "maxexp", "smallest_subnormal",
                 "epsneg")

    _INTS = ("bits", "precision", "nmant", "nexp", "minexp", "maxexp")

    def __init__(self, fi):
        for name in self.__slots__:
            v = getattr(fi, name)
            if name == "dtype":
                v = dtypes.canonicalize(v)
            else:
                v = builtins.int(v) if name in self._INTS else builtins.float(v)
            setattr(self, name, v)

    def __repr__(self):
        return (f"finfo(dtype={self.dtype}, bits={self.bits}, eps={self.eps!r}, "
                f"max={self.max!r}, min={self.min!r}, smallest_normal={self.smallest_normal!r})")


class IInfo:
    """Machine limits of an integer dtype: ``bits``, ``max``, ``min`` (Python ints), ``dtype``."""

    __slots__ = ("bits", "max", "min", "dtype", "kind")

    def __init__(self, ii):
        self.bits, self.max, self.min = builtins.int(ii.bits), builtins.int(ii.max), \
            builtins.int(ii.min)
        self.dtype = dtypes.canonicalize(ii.dtype)
        self.kind = self.dtype.kind

    def __repr__(self):
        return f"iinfo(dtype={self.dtype}, bits={self.bits}, min={self.min}, max={self.max})"


def finfo(type, /):  # noqa: A002  (Array API name)
    """Machine limits of a floating dtype (or of an array's dtype); complex dtypes describe
    their real part. bfloat16 / float8 / float4 are covered (through ml_dtypes).

    Returns:
        FInfo whose fields are Python floats / ints (Array API), see ``FInfo``.
    Raises:
        TypeError: not a floating or complex dtype.
    """
    return FInfo(dtypes.finfo(_dtype_of("finfo", type)))


def iinfo(type, /):  # noqa: A002
    """Machine limits of an integer dtype (or of an array's dtype).

    Returns:
        IInfo with ``bits``, ``max``, ``min`` (Python ints) and ``dtype``.
    Raises:
        TypeError: not an integer dtype.
    """
    return IInfo(dtypes.iinfo(_dtype_of("iinfo", type)))


# ---- inspection namespace -------------------------------------------------------------------

class _NamespaceInfo:
    """What ``__array_namespace_info__()`` returns (Array API 2024.12 inspection utilities)."""

    __slots__ = ()

    def capabilities(self):
        """Optional features: boolean indexing and data-dependent shapes are supported
        (eagerly; under tracing they need static sizes); "max dimensions" is 64 (NumPy's limit,
        which the reference backend inherits)."""
        return {"boolean indexing": True, "data-dependent shapes": True,
                "max dimensions": 64}

    def default_device(self):
        """The default device (the first CPU device)."""
        return DEFAULT_DEVICE

    def devices(self):
        """The devices of this process."""
        return _devices()

    def default_dtypes(self, *, device=None):
        """Default dtypes: float32, complex64, int64 (integral and indices)."""
        check_device(device, "default_dtypes")
        return {"real floating": dtypes.DEFAULT_FLOAT, "complex floating": dtypes.DEFAULT_COMPLEX,
                "integral": dtypes.DEFAULT_INT, "indexing": dtypes.DEFAULT_INT}

    def dtypes(self, *, device=None, kind=None):
        """The Array API dtypes as ``{name: dtype}``, optionally only those of ``kind`` (as in
        ``isdtype``: a kind name, a dtype, or a tuple). The extra low-precision floats
        (float16, bfloat16, float8_*, float4_*) are supported too but, as the standard asks,
        not listed here."""
        check_device(device, "dtypes")
        out = {}
        for dt in _STANDARD_DTYPES:
            if kind is None or isdtype(dt, kind):
                out[dt.name] = dt
        return out

    def __repr__(self):
        return "starling.numpy.__array_namespace_info__()"


_STANDARD_DTYPES = tuple(dt for dt in dtypes.ALL_DTYPES
                         if dt not in dtypes.LOW_PRECISION_FLOATS + (dtypes.bfloat16, dtypes.float16))
_INFO = _NamespaceInfo()


def __array_namespace_info__():
    """The Array API inspection namespace: ``capabilities()``, ``default_device()``,
    ``default_dtypes()``, ``dtypes()``, ``devices()``."""
    return _INFO

