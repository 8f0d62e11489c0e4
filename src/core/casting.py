"""Starling's dtype conversions of NumPy buffers: the one definition every path follows.

``astype(x, dtype)`` converts a NumPy array (or scalar) as ``convert_element_type`` does in
eager mode and in staged programs run by ``numpy_ref``; compiled kernels follow the same rules,
written in C++ (``lowering/backends/cpp/formulas.py``: ``st_f2i_sat``, ``st_f32_odd``;
``cpp/lowp.py``). The rules are Starling's, not those of the installed NumPy / ml_dtypes
(which changed them between ml_dtypes 0.6 and 0.7); tests/test_cpp_lowp.py checks eager,
numpy_ref and compiled results against exact rational arithmetic.

Rules (JAX / XLA ``convert_element_type`` semantics, written out):

* anything -> bool: ``x != 0`` (NaN is True; complex: either part nonzero).
* bool -> number: 0 or 1.
* integer -> integer: the low bits (two's complement wrap-around), as NumPy and JAX.
* float -> integer, for every float dtype: truncate toward zero; NaN -> 0; values beyond the
  integer dtype's range, +-inf included, saturate to its min / max (unsigned: negatives -> 0).
  C leaves these undefined and NumPy's results depend on the platform and version.
* -> a floating dtype: the exact source value rounded ONCE to the nearest value of the
  target, ties to even; then the format's overflow rule: float16, bfloat16, float8_e5m2,
  float32, float64 -> +-inf; float8_e4m3fn (no inf) -> NaN; float4_e2m1fn (no inf, no NaN)
  saturates to +-6. float64 and 32 / 64-bit integers reach the low-precision formats through
  float32 rounded to odd (the exact value truncated toward zero, the last bit set when
  inexact): float32 has at least two more bits than every such format, so the final
  round-to-nearest-even is the one rounding of the exact value (S. Boldo, G. Melquiond,
  "Emulation of FMA and correctly rounded sums: proved algorithms using rounding to odd",
  IEEE Trans. Computers 57(4), 2008). A cast between two low-precision formats widens to
  float32 (exact) first.
* complex -> real: the real part, then the rules above.
* NaN bits: float16 keeps the top 10 payload bits, unquieted (a payload that would vanish
  becomes 1), both ways; bfloat16 narrows a NaN to the quiet NaN ``0x7fc0`` with its sign and
  widens by appending zero bits; float8_e4m3fn narrows NaN and inf to ``0x7f`` with the sign;
  float8_e5m2 narrows NaN to ``0x7e`` with the sign; both widen a NaN to the quiet float NaN
  with the sign; float4_e2m1fn narrows NaN to a zero with the opposite sign bit and reads a
  byte above 7 as negative (the low 3 bits: the magnitude).
* float8_e8m0fnu (scales: powers of two 2**-127..2**127, NaN; no sign, no zero), ml_dtypes'
  rule: a positive value rounds to the nearest power of two, a halfway value ``1.5 * 2**e``
  up (there is no even mantissa to break ties toward); values below ``2**-127`` give
  ``2**-127``; zero, negatives, NaN, inf and values from ``1.5 * 2**127`` give NaN (0xff).
  Widening is exact (0xff -> the quiet NaN).

The two steps between float32 and a low-precision format (exact widening; one rounding when
narrowing) are NumPy's float16 and ml_dtypes' casts, which compute exactly that, in one C loop
(a composition of NumPy operations is several times slower); the tests hold them to the rules
above on every stored pattern and around every halfway point.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np

_F32, _F64 = np.dtype(np.float32), np.dtype(np.float64)
FLOAT16 = np.dtype(np.float16)
BFLOAT16 = np.dtype(ml_dtypes.bfloat16)
FLOAT8_E4M3FN = np.dtype(ml_dtypes.float8_e4m3fn)
FLOAT8_E5M2 = np.dtype(ml_dtypes.float8_e5m2)
FLOAT4_E2M1FN = np.dtype(ml_dtypes.float4_e2m1fn)
FLOAT8_E8M0FNU = np.dtype(ml_dtypes.float8_e8m0fnu)
LOW_PRECISION = frozenset((FLOAT16, BFLOAT16, FLOAT8_E4M3FN, FLOAT8_E5M2, FLOAT4_E2M1FN,
                           FLOAT8_E8M0FNU))


def _widen(x, to=_F32):
    """The value of low-precision array ``x`` as float32 (or ``to``), exactly (NaN bits as the
    module docstring says)."""
    return np.asarray(x).astype(to)


def _narrow(x32, dt):
    """float32 array ``x32`` rounded to the low-precision format ``dt``: nearest, ties to even,
    then the format's overflow and NaN rules."""
    return np.asarray(x32, np.float32).astype(dt)


# ---- float64 and wide integers -> float32 rounded to odd ----------------------------------------

def _float32_odd(s, e=None):
    """float32 of ``s + e`` (float64 arrays, ``|e| <= ulp(s) / 2``, ``e`` None for 0) rounded
    to odd: truncated toward zero, the last bit set when inexact. NaN stays NaN, its sign
    kept."""
    f = s.astype(np.float32)                      # nearest; inf past the largest float32
    back = f.astype(np.float64)
    away = np.abs(back) > np.abs(s)
    inexact = back != s
    if e is not None:
        nz = e != 0
        away |= nz & (back == s) & (np.signbit(e) != np.signbit(s))
        inexact |= nz
    u = f.view(np.uint32)
    u = (u - away.astype(np.uint32)) | inexact.astype(np.uint32)
    return u.view(np.float32)


def _int_float32_odd(x):
    """float32 of integer array ``x`` rounded to odd (exact below 2**24)."""
    if x.dtype.itemsize <= 2:
        return x.astype(np.float32)
    if x.dtype.itemsize == 4:
        return _float32_odd(x.astype(np.float64))
    # split into halves that float64 holds exactly; TwoSum gives the rounding error of their
    # sum (D. E. Knuth, TAOCP vol. 2, 4.2.2)
    hi = (x >> 32).astype(np.float64) * 4294967296.0
    lo = (x & 0xffffffff).astype(np.float64)
    s = hi + lo
    bb = s - hi
    e = (hi - (s - bb)) + (lo - bb)
    return _float32_odd(s, e)


def _float16_from_float64(x):
    """float64 -> float16: through float32 rounded to odd; a NaN keeps its top 10 payload bits
    (a payload that would vanish becomes 1), unquieted."""
    out = _narrow(_float32_odd(x), FLOAT16)
    nan = np.isnan(x)
    if nan.any():
        u = x.view(np.uint64)[nan]
        pay = ((u >> 42) & 0x3ff).astype(np.uint16)
        out.view(np.uint16)[nan] = (((u >> 48) & 0x8000).astype(np.uint16) | 0x7c00
                                    | np.where(pay == 0, 1, pay).astype(np.uint16))
    return out


# ---- float -> integer ---------------------------------------------------------------------------

def float_to_int(x, dt):
    """Real float array ``x`` (float32 / float64) -> integer dtype ``dt``: truncation toward
    zero, NaN -> 0, out of range (+-inf too) -> the dtype's min / max.

    Fast path: one min / max pass decides that every value is in range (NaN fails it), and the
    C cast, which is then defined, truncates."""
    dt = np.dtype(dt)
    bits = 8 * dt.itemsize
    lo, hi = (-2.0 ** (bits - 1), 2.0 ** (bits - 1)) if dt.kind == "i" else (0.0, 2.0 ** bits)
    if x.size:
        mn, mx = np.minimum.reduce(x, axis=None), np.maximum.reduce(x, axis=None)
        if mn >= lo and mx < hi:
            return x.astype(dt)
    inside = (x >= lo) & (x < hi)
    out = np.where(inside, x, 0).astype(dt)
    info = np.iinfo(dt)
    out[x >= hi] = info.max
    out[x < lo] = info.min
    return out


# ---- the conversion -------------------------------------------------------------------------------

def astype(x, dtype):
    """``x`` (NumPy array or scalar) converted to ``dtype`` by Starling's rules (module
    docstring). Returns a NumPy array (0-d for a scalar); ``x`` itself when already of
    ``dtype``."""
    x = np.asarray(x)
    dt = np.dtype(dtype)
    src = x.dtype
    if src == dt:
        return x
    if x.ndim == 0:   # the helpers work on 1-d views (0-d arithmetic gives NumPy scalars)
        return astype(x.reshape(1), dt).reshape(())
    if dt.kind == "b":
        return np.not_equal(_widen(x) if src in LOW_PRECISION else x, 0)
    if src.kind == "c" and dt.kind != "c":
        x = np.real(x)
        src = x.dtype
    if src in LOW_PRECISION:
        if dt == _F64 or dt == np.complex128:
            return _widen(x, _F64).astype(dt, copy=False)
        x, src = _widen(x), _F32
        if dt == _F32:
            return x
    if dt in LOW_PRECISION:
        if src == _F32:
            return _narrow(x, dt)
        if src == _F64:
            return _float16_from_float64(x) if dt == FLOAT16 else _narrow(_float32_odd(x), dt)
        if src.kind in "iu":
            return _narrow(_int_float32_odd(x), dt)
        return _narrow(x.astype(np.float32), dt)            # bool: 0 and 1 are exact
    if src.kind == "f" and dt.kind in "iu":
        return float_to_int(x, dt)
    # NumPy's cast is Starling's here: integers wrap, int -> float and float64 -> float32 round
    # once in hardware, widening is exact
    return x.astype(dt)


def scalar(value, dtype):
    """A NumPy scalar of ``dtype`` from a Python (or NumPy) scalar, by ``astype``'s rules.

    Python floats and ints up to ``2**53`` (exact doubles) take scalar shortcuts: NumPy's
    scalar types for float32 / float64 / complex (one rounding), float32 rounded to odd for the
    low-precision formats; everything else goes through ``astype``. A Python int beyond 64
    bits is taken exactly (rounded to odd at 53 bits for a floating target).

    Raises:
        OverflowError: a Python int out of range of an integer ``dtype`` (a literal that does
            not fit is an error, as in NumPy 2 and JAX; arrays wrap).
    """
    dt = np.dtype(dtype)
    t = type(value)
    if t is int:
        if dt.kind in "iu":
            info = np.iinfo(dt)
            if not info.min <= value <= info.max:
                raise OverflowError(f"Python int {value} is out of range for {dt} "
                                    f"[{info.min}, {info.max}]")
            return dt.type(value)
        if -2 ** 53 <= value <= 2 ** 53:
            if dt not in LOW_PRECISION:
                return dt.type(value)
            return _narrow(_scalar_float32_odd(float(value)), dt)[()]
        if not -2 ** 63 <= value < 2 ** 64:
            value = _big_int_float(value, dt)
    elif t is float:
        if dt in LOW_PRECISION:
            if dt != FLOAT16 or value == value:   # (float16 takes a float64 NaN's payload)
                return _narrow(_scalar_float32_odd(value), dt)[()]
        elif dt.kind in "fc":
            return dt.type(value)
    x = np.asarray(value)
    if x.dtype == object:
        raise TypeError(f"cannot convert {t.__name__} {value!r} to {dt}")
    return astype(x, dt)[()]


def _scalar_float32_odd(v):
    """``_float32_odd`` of one Python float, with scalar operations (a weak Python float in a
    low-precision operation takes this path: ~20 NumPy calls on a 1-element array cost ~10x)."""
    f = np.float32(v)
    back = float(f)
    if back == v or v != v:
        return f
    u = int(f.view(np.uint32))
    if abs(back) > abs(v):
        u -= 1
    return np.uint32(u | 1).view(np.float32)


def _big_int_float(v, dt):
    """A float standing in for the Python int ``v`` (beyond 64 bits) that converts to ``dt``
    as ``v`` would: ``float(v)`` (one rounding) for float64 / complex128; otherwise ``v``
    rounded to odd at 53 bits, whose one further rounding to float32 or below is exact (53 is
    at least the target's precision plus 2)."""
    inf = float("inf") if v > 0 else float("-inf")
    if dt.kind == "b":
        return 1.0
    if dt in (_F64, np.dtype(np.complex128)):
        try:
            return float(v)
        except OverflowError:
            return inf
    a = abs(v)
    if a.bit_length() > 1000:
        return inf
    sh = a.bit_length() - 53
    t = (a >> sh) | (1 if a & ((1 << sh) - 1) else 0)
    return float(t) * 2.0 ** sh * (1 if v > 0 else -1)
