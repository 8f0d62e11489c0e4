"""An independent oracle of Starling's conversion rules (src/core/casting.py), in exact integer
arithmetic: formats are decoded from their bit layouts (not by ml_dtypes or NumPy casts), a value
is ``(sign, m, e)`` meaning ``(-1)**sign * m * 2**e`` with Python ints, and rounding to a format is
integer division with round half to even.

``convert_bits(x, target)`` gives the expected result of ``x.astype(target)`` for a NumPy array
``x``: integer / bool arrays as NumPy arrays, floating targets as their stored bits (uint8 /
uint16 / uint32 / uint64 arrays), NaN bits included (the rules of the casting module docstring).
"""
from __future__ import annotations

import math

import ml_dtypes
import numpy as np


class Spec:
    """A binary float format: ``mant`` stored mantissa bits, ``bias``, total ``bits`` (float4:
    4, stored one per byte), ``kind``: "ieee" (all-ones exponent: inf / NaN), "fn" (no inf;
    only the all-ones pattern is NaN: float8_e4m3fn), "none" (no inf, no NaN: float4)."""

    def __init__(self, bits, mant, bias, kind):
        self.bits, self.mant, self.bias, self.kind = bits, mant, bias, kind
        self.exp_bits = bits - 1 - mant
        self.emin = 1 - bias                       # exponent of the smallest normal value
        top = (1 << self.exp_bits) - 1
        if kind == "ieee":
            self.max_code = ((top - 1) << mant) | ((1 << mant) - 1)
        elif kind == "fn":
            self.max_code = (top << mant) | ((1 << mant) - 2)
        else:
            self.max_code = (top << mant) | ((1 << mant) - 1)
        self.sign_bit = 1 << (bits - 1)


SPECS = {
    np.dtype(np.float16): Spec(16, 10, 15, "ieee"),
    np.dtype(ml_dtypes.bfloat16): Spec(16, 7, 127, "ieee"),
    np.dtype(ml_dtypes.float8_e4m3fn): Spec(8, 3, 7, "fn"),
    np.dtype(ml_dtypes.float8_e5m2): Spec(8, 2, 15, "ieee"),
    np.dtype(ml_dtypes.float4_e2m1fn): Spec(4, 1, 1, "none"),
    np.dtype(np.float32): Spec(32, 23, 127, "ieee"),
    np.dtype(np.float64): Spec(64, 52, 1023, "ieee"),
}
F16, BF16 = np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16)
E4M3, E5M2 = np.dtype(ml_dtypes.float8_e4m3fn), np.dtype(ml_dtypes.float8_e5m2)
F4, F32, F64 = np.dtype(ml_dtypes.float4_e2m1fn), np.dtype(np.float32), np.dtype(np.float64)
E8M0 = np.dtype(ml_dtypes.float8_e8m0fnu)   # scales: byte b is 2**(b - 127), 0xff NaN
STORAGE = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def bits_of(a):
    a = np.asarray(a)
    return a.view(STORAGE[a.dtype.itemsize])


# ---- decoding: a value is ("num", sign, m, e), ("inf", sign) or ("nan", sign, payload, src) ----

def decode(dt, b):
    """The value of stored pattern ``b`` (int) of float dtype ``dt``."""
    s = SPECS[dt]
    if dt == F4:
        sign, code = int(b > 7), b & 7             # bytes above 7 read as negative
    else:
        sign, code = b >> (s.bits - 1), b & (s.sign_bit - 1)
    exp, man = code >> s.mant, code & ((1 << s.mant) - 1)
    top = (1 << s.exp_bits) - 1
    if s.kind == "ieee" and exp == top:
        return ("inf", sign) if man == 0 else ("nan", sign, man, dt)
    if s.kind == "fn" and code == (1 << (s.bits - 1)) - 1:
        return ("nan", sign, man, dt)
    if exp == 0:
        return ("num", sign, man, s.emin - s.mant)
    return ("num", sign, (1 << s.mant) | man, exp - s.bias - s.mant)


def from_float(v):
    """The exact value of a Python float (float32 values included)."""
    if math.isnan(v):
        raise ValueError("decode NaN from bits")
    if math.isinf(v):
        return ("inf", int(v < 0))
    sign = int(math.copysign(1.0, v) < 0)
    m, e = math.frexp(abs(v))
    return ("num", sign, int(m * (1 << 53)), e - 53)


def from_int(v):
    return ("num", int(v < 0), abs(int(v)), 0)


# ---- encoding ------------------------------------------------------------------------------

def _nan_bits(dt, value):
    """Bits of the NaN that a NaN ``value`` converts to in float dtype ``dt``."""
    _, sign, pay, src = value
    s = SPECS[dt]
    if dt == F4:
        return 0 if sign else 8                    # a zero with the opposite sign bit
    if dt == BF16:
        return (sign << 15) | 0x7fc0
    if dt == E4M3:
        return (sign << 7) | 0x7f
    if dt == E5M2:
        return (sign << 7) | 0x7e
    # float16 / float32 / float64: the payload left-aligned in the target, as the source
    # passes it on: float16 and float64 keep theirs unquieted; bfloat16 widens to float32 by
    # appending zeros; float8 widens to the quiet NaN; float32 <-> float64 (hardware) quieten
    if src == E8M0:
        return _nan_bits(dt, ("nan", 0, 0, E4M3))   # the quiet float NaN, as from float8
    src_mant = SPECS[src].mant
    if src in (E4M3, E5M2):
        pay, src_mant = 1 << 22, 23
    elif src == BF16:
        pay, src_mant = pay << 16, 23
    if (src in (F32, BF16) and dt == F64) or (src == F64 and dt == F32):
        pay |= 1 << (src_mant - 1)
    sh = src_mant - s.mant
    pay = pay >> sh if sh >= 0 else pay << -sh
    if pay == 0:
        pay = 1
    return (sign << (s.bits - 1)) | (((1 << s.exp_bits) - 1) << s.mant) | pay


def encode_e8m0(value):
    """Bits of ``value`` converted to float8_e8m0fnu: the nearest power of two, a halfway value
    ``1.5 * 2**k`` up; below ``2**-127``: ``2**-127``; zero, negatives, NaN, inf and values from
    ``1.5 * 2**127``: NaN (0xff)."""
    if value[0] != "num" or value[1] or value[2] == 0:
        return 0xff
    _, _, m, e = value
    k = e + m.bit_length() - 1                     # 2**k <= value < 2**(k + 1)
    if m.bit_length() >= 2 and m >= 3 << (m.bit_length() - 2):
        k += 1                                     # at or past the halfway point 1.5 * 2**k
    if k < -127:
        return 0
    return 0xff if k > 127 else k + 127


def encoder(dt):
    """A function: value -> stored bits of the value converted to float dtype ``dt`` (rounded
    once, to nearest, ties to even; then the format's overflow rule)."""
    if dt == E8M0:
        return encode_e8m0
    s = SPECS[dt]
    mant, emin, bias, max_code = s.mant, s.emin, s.bias, s.max_code
    sign_bit = 8 if dt == F4 else s.sign_bit
    one, two = 1 << mant, 2 << mant
    if s.kind == "ieee":
        over = ((1 << s.exp_bits) - 1) << mant     # inf
    else:                                          # fn: the NaN pattern; none: saturate
        over = (1 << (s.bits - 1)) - 1 if s.kind == "fn" else max_code

    def encode(value):
        if value[0] == "nan":
            return _nan_bits(dt, value)
        sbit = sign_bit if value[1] else 0
        if value[0] == "inf":
            return sbit | over
        _, _, m, e = value
        if m == 0:
            return sbit
        k = max(e + m.bit_length() - 1, emin) - mant   # exponent of the last kept bit
        if k <= e:
            q = m << (e - k)
        else:
            sh = k - e
            q, r = m >> sh, m & ((1 << sh) - 1)
            half = 1 << (sh - 1)
            if r > half or (r == half and q & 1):
                q += 1
        if q >= two:                               # the carry reached the next binade
            q, k = q >> 1, k + 1
        if q < one:                                # subnormal (k is the smallest exponent)
            return sbit | q
        code = ((k + mant + bias) << mant) | (q - one)
        return sbit | (code if code <= max_code else over)
    return encode


def to_int(value, dt):
    """Integer dtype ``dt``: truncation toward zero, NaN -> 0, saturation."""
    info = np.iinfo(dt)
    if value[0] == "nan":
        return 0
    if value[0] == "inf":
        return info.min if value[1] else info.max
    _, sign, m, e = value
    t = m << e if e >= 0 else m >> -e
    t = -t if sign else t
    return min(max(t, info.min), info.max)


def is_nonzero(value):
    return value[0] != "num" or value[2] != 0


# ---- arrays --------------------------------------------------------------------------------

def _decode_array(x):
    """``decode`` of every element of float array ``x``, the bit fields taken apart with NumPy
    integer operations; a number's ``m`` is made odd (canonical: equal values, equal tuples)."""
    dt = x.dtype
    s = SPECS[dt]
    b = bits_of(x).ravel().astype(np.uint64)
    if dt == F4:
        sign, code = (b > 7).astype(np.uint64), b & np.uint64(7)
    else:
        sign, code = b >> np.uint64(s.bits - 1), b & np.uint64(s.sign_bit - 1)
    exp = (code >> np.uint64(s.mant)).astype(np.int64)
    man = code & np.uint64((1 << s.mant) - 1)
    m = np.where(exp == 0, man, man | np.uint64(1 << s.mant))
    e = np.maximum(exp, 1) - s.bias - s.mant
    low = m & (~m + np.uint64(1))                  # lowest set bit
    tz = np.where(m == 0, 0, np.log2(np.maximum(low, 1).astype(np.float64))).astype(np.int64)
    m, e = m >> tz.astype(np.uint64), np.where(m == 0, 0, e + tz)
    top = (1 << s.exp_bits) - 1
    special = (exp == top) if s.kind == "ieee" else (
        code == (1 << (s.bits - 1)) - 1 if s.kind == "fn" else np.zeros(b.shape, bool))
    out = list(zip(["num"] * b.size, sign.tolist(), m.tolist(), e.tolist()))
    for i in np.nonzero(special)[0].tolist():
        out[i] = decode(dt, int(bits_of(x).ravel()[i]))
    return out


def values(x):
    """The exact values of the elements of NumPy array ``x`` (any real dtype)."""
    x = np.asarray(x)
    if x.dtype.kind in "iub":
        return [from_int(v) for v in x.ravel().tolist()]
    if x.dtype == E8M0:
        return [("nan", 0, 0, E8M0) if b == 0xff else ("num", 0, 1, b - 127)
                for b in bits_of(x).ravel().tolist()]
    return _decode_array(x)


_ENCODED: dict = {}


def convert_bits(x, target):
    """The expected ``x.astype(target)``: values for integer / bool targets, stored bits (an
    unsigned array) for floating ones."""
    target = np.dtype(target)
    vals = values(x)
    shape = np.shape(x)
    if target.kind == "b":
        return np.array([is_nonzero(v) for v in vals], bool).reshape(shape)
    if target.kind in "iu":
        return np.array([to_int(v, target) for v in vals], target).reshape(shape)
    cache = _ENCODED.setdefault(target, {})
    encode = encoder(target)
    out = []
    for v in vals:
        b = cache.get(v)
        if b is None:
            b = cache[v] = encode(v)
        out.append(b)
    return np.array(out, STORAGE[target.itemsize]).reshape(shape)


def convert(x, target):
    """The expected ``x.astype(target)`` as an array of dtype ``target``."""
    target = np.dtype(target)
    out = convert_bits(x, target)
    return out if target.kind in "biu" else out.view(target)
