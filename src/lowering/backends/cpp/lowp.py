"""Low-precision floats in the cpp backend's fused kernels.

Formats (``FORMATS``): float16 (NumPy), bfloat16, float8_e4m3fn, float8_e5m2, float4_e2m1fn
and the scale format float8_e8m0fnu (ml_dtypes; only converted and moved, never computed on).
A kernel keeps their values in C++ ``float`` variables (every value of these formats is a
float32) and

* loads: widens the stored bits, ``st_from_<tag>(bits) -> float``;
* computes each primitive in float, as NumPy's float16 loops and ml_dtypes' ufuncs do, and
  rounds its result to the format, ``st_rnd_<tag>(float) -> float`` (the primitives whose
  result is always a value of the format, e.g. ``maximum`` or ``where``, skip the rounding);
* stores: ``st_to_<tag>(float) -> bits`` (round to nearest, ties to even), or for bfloat16
  and float8_e5m2 ``st_put_<tag>``, which also keeps the payload of a NaN that a selection
  (``maximum``, ``where``, ``abs``...) took from an operand, as ml_dtypes does.

Where NumPy's float16 ufuncs and ml_dtypes' differ on special values, ``formulas`` follows
each: ties of maximum / minimum (float16 keeps the first operand, ml_dtypes the second),
``sign(-0.0)``, ``heaviside(NaN, h)``, and ``x // 0`` / ``x % 0`` (ml_dtypes: positive NaN).
Reductions accumulate sums and products in double and round once (numpy_ref: float32, rounded
once; equal unless float32 partial results overflow, underflow or lose digits).

Conversions follow Starling's rules (``core/casting.py``, the same in eager mode): every cast
to a format rounds the exact value once, to nearest, ties to even, then applies the format's
overflow rule; float64 and 32 / 64-bit integers reach the format through float32 rounded to
odd (``st_f32_odd`` in formulas), whose float32 -> format rounding is then exact; a cast to
an integer saturates (``st_f2i_sat``). They are written with integer operations (they
vectorise; no F16C, so that NaN payloads keep the documented bits). The rules of each format:

==============  ====================================================================
format          overflow / inf / NaN when narrowing; NaN when widening
==============  ====================================================================
float16         overflow and inf -> inf; NaN keeps the top 10 payload bits (a payload
                that would vanish becomes 1), from float32 and float64 alike; widening
                keeps the payload unquieted
bfloat16        overflow -> inf; NaN -> quiet NaN 0x7fc0 with the sign; widening
                appends zero bits (the payload stays)
float8_e4m3fn   no inf: overflow (past 464, which rounds to 448), inf and NaN -> NaN 0x7f
                with the sign; widening NaN gives the quiet float NaN with the sign
float8_e5m2     overflow and inf -> inf; NaN -> 0x7e with the sign; widening any NaN
                gives the quiet float NaN with the sign (kernels keep the payload inside
                and quieten it when converting, see st_from_f8e5m2)
float4_e2m1fn   no inf, no NaN: overflow and inf saturate to +-6; NaN -> zero with the
                opposite sign bit; widening reads the low 3 bits as the magnitude and any
                byte above 7 as negative
float8_e8m0fnu  powers of two 2**-127..2**127: the nearest, halfway (1.5 * 2**e) up;
                below 2**-127 -> 2**-127; zero, negatives, NaN, inf and from
                1.5 * 2**127 -> NaN 0xff; widening exact (2**-127 is a float subnormal)
==============  ====================================================================

A cast between two formats widens to float32 first. tests/test_cpp_lowp.py checks every
stored pattern of each format widened to every dtype, and float32 / float64 / integer values
around every halfway point narrowed, against exact rational arithmetic (not against the
installed ml_dtypes, whose float64 / integer casts and float -> integer casts changed in 0.7).
"""
from __future__ import annotations

import ml_dtypes
import numpy as np

# dtype -> (C++ name tag, storage C++ type, has NaN, has inf)
FORMATS = {
    np.dtype(np.float16): ("f16", "uint16_t", True, True),
    np.dtype(ml_dtypes.bfloat16): ("bf16", "uint16_t", True, True),
    np.dtype(ml_dtypes.float8_e4m3fn): ("f8e4m3fn", "uint8_t", True, False),
    np.dtype(ml_dtypes.float8_e5m2): ("f8e5m2", "uint8_t", True, True),
    np.dtype(ml_dtypes.float4_e2m1fn): ("f4e2m1fn", "uint8_t", False, False),
    np.dtype(ml_dtypes.float8_e8m0fnu): ("f8e8m0fnu", "uint8_t", True, False),
}
FLOAT16 = np.dtype(np.float16)
BFLOAT16 = np.dtype(ml_dtypes.bfloat16)
E4M3FN = np.dtype(ml_dtypes.float8_e4m3fn)
E5M2 = np.dtype(ml_dtypes.float8_e5m2)
FLOAT32 = np.dtype(np.float32)
FLOAT64 = np.dtype(np.float64)


def is_lowp(dt) -> bool:
    """True for the formats kernels hold in float and store narrowed."""
    return dt in FORMATS


def tag(dt) -> str:
    """The short name (``f16``, ``bf16``, ``f8e4m3fn``, ``f8e5m2``, ``f4e2m1fn``) of a low-precision
    format in the C++ helper functions' names. Raises KeyError for other dtypes."""
    return FORMATS[np.dtype(dt)][0]


def storage_ctype(dt) -> str:
    """The C++ type that stores the bits of a low-precision format (``uint16_t`` or ``uint8_t``).
    Raises KeyError for other dtypes."""
    return FORMATS[np.dtype(dt)][1]


def has_nan(dt) -> bool:
    """True when the low-precision format ``dt`` has NaN (all but float4_e2m1fn). Raises KeyError
    for other dtypes."""
    return FORMATS[np.dtype(dt)][2]


def has_inf(dt) -> bool:
    """True when the low-precision format ``dt`` has infinities (float16, bfloat16, float8_e5m2).
    Raises KeyError for other dtypes."""
    return FORMATS[np.dtype(dt)][3]


def load(dt, elem) -> str:
    """C++ float expression of the stored element ``elem``."""
    return f"st_from_{tag(dt)}({elem})"


def store(dt, value) -> str:
    """C++ storage-type expression of the float ``value`` (rounded to the format; the image of
    a stored NaN keeps its bits)."""
    put = "put" if tag(dt) in ("bf16", "f8e5m2") else "to"
    return f"st_{put}_{tag(dt)}({value})"


def rounded(dt, expr) -> str:
    """C++ float expression: the float ``expr`` rounded to the format ``dt``."""
    return f"st_rnd_{tag(dt)}({expr})"


def lowest(dt):
    """Identity of a max reduction: -inf, or the most negative finite value without inf."""
    return -np.inf if has_inf(dt) else float(ml_dtypes.finfo(dt).min)


def highest(dt):
    """Identity of a min reduction: inf, or the largest finite value without inf."""
    return np.inf if has_inf(dt) else float(ml_dtypes.finfo(dt).max)


HELPERS = r"""
// ---- low-precision floats (src/lowering/backends/lowp.py) --------------------------------
ST_INLINE uint32_t st_fbits(float x) { uint32_t u; __builtin_memcpy(&u, &x, 4); return u; }
ST_INLINE float st_bitsf(uint32_t u) { float x; __builtin_memcpy(&x, &u, 4); return x; }
ST_INLINE uint64_t st_dbits(double x) { uint64_t u; __builtin_memcpy(&u, &x, 8); return u; }
ST_INLINE double st_bitsd(uint64_t u) { double x; __builtin_memcpy(&x, &u, 8); return x; }

// |x| (float bits a: finite, below the format's overflow threshold) rounded to nearest, ties
// to even, onto the grid of a format with M mantissa bits and smallest normal exponent EMIN:
// adding and subtracting c, the power of two 23 - M binades above the binade of |x| (or of
// 2**EMIN, below which the subnormals' fixed spacing applies), makes the float adder round at
// the format's last bit. The operand is |x|'s bits, so no multiply-add contraction can reach it.
template <int M, int EMIN> ST_INLINE float st_grid(uint32_t a) {
  const uint32_t e = a & 0x7f800000u, lo = (uint32_t)(EMIN + 127) << 23;
  const float c = st_bitsf((e > lo ? e : lo) + ((uint32_t)(23 - M) << 23));
  return (st_bitsf(a) + c) - c;
}
// Magnitude code (biased exponent << M | mantissa) of a finite value of a format with M
// mantissa bits and bias B (float bits a): shift and re-bias, or scale a subnormal to an int.
template <int M, int B> ST_INLINE uint32_t st_pack(uint32_t a) {
  const uint32_t tiny = (uint32_t)(128 - B) << 23;   // the smallest normal value's bits
  const float scale = st_bitsf((uint32_t)(127 + B - 1 + M) << 23);
  const uint32_t sub = (uint32_t)(int32_t)(st_bitsf(a < tiny ? a : 0u) * scale);
  const uint32_t nrm = (a >> (23 - M)) - ((uint32_t)(127 - B) << M);
  return a >= tiny ? nrm : sub;
}
// Value of a finite magnitude code c (M mantissa bits, bias B) as a float: shift and re-bias;
// a subnormal c is read as 2**(1-B) * (1 + mantissa) and 2**(1-B) subtracted (exact).
template <int M, int B> ST_INLINE float st_wide(uint32_t c) {
  const uint32_t o = c << (23 - M);
  const float nrm = st_bitsf(o + ((uint32_t)(127 - B) << 23));
  const float tiny = st_bitsf((uint32_t)(128 - B) << 23);
  const float sub = st_bitsf(o + ((uint32_t)(128 - B) << 23)) - tiny;
  return c < (1u << M) ? sub : nrm;
}
ST_INLINE float st_signed(float f, uint32_t sign) { return st_bitsf(st_fbits(f) | sign); }
// NaN -> the quiet NaN with x's sign (ml_dtypes' bfloat16 -> float16 cast drops payloads).
ST_INLINE float st_qnan(float x) {
  return x != x ? st_bitsf((st_fbits(x) & 0x80000000u) | 0x7fc00000u) : x;
}
ST_INLINE float st_pnan(float x) { return x != x ? st_bitsf(0x7fc00000u) : x; }

// float16 (NumPy's rules: NaN payloads survive both ways, unquieted). Overflow from 65520.
ST_INLINE float st_rnd_f16(float x) {
  const uint32_t u = st_fbits(x), a = u & 0x7fffffffu;
  const uint32_t p = a & 0x7fe000u;
  const uint32_t nan = 0x7f800000u | (p ? p : 0x2000u);
  const uint32_t r = a > 0x7f800000u ? nan : (a >= 0x477ff000u ? 0x7f800000u
                                                                : st_fbits(st_grid<10, -14>(a)));
  return st_bitsf((u & 0x80000000u) | r);
}
ST_INLINE uint16_t st_to_f16(float x) {
  const uint32_t u = st_fbits(st_rnd_f16(x)), a = u & 0x7fffffffu;
  const uint32_t c = a >= 0x7f800000u ? 0x7c00u | ((a >> 13) & 0x3ffu) : st_pack<10, 15>(a);
  return (uint16_t)(((u >> 16) & 0x8000u) | c);
}
// float64 -> float16 (held in a float): through float32 rounded to odd (st_f32_odd, one
// rounding in all); a NaN keeps its top 10 payload bits, unquieted (a vanishing payload: 1).
ST_INLINE float st_f16_of_d(double x) {
  const uint64_t u = st_dbits(x);
  const uint32_t p = (uint32_t)(u >> 29) & 0x7fe000u;
  const float nan = st_bitsf(((uint32_t)(u >> 32) & 0x80000000u) | 0x7f800000u | (p ? p : 0x2000u));
  return x != x ? nan : st_rnd_f16(st_f32_odd(x, 0.0));
}
ST_INLINE float st_from_f16(uint16_t h) {
  const uint32_t c = h & 0x7fffu;
  const float f = c >= 0x7c00u ? st_bitsf(0x7f800000u | ((c & 0x3ffu) << 13))
                               : st_wide<10, 15>(c);
  return st_signed(f, (uint32_t)(h & 0x8000u) << 16);
}
// NumPy's float16 maximum / minimum / fmax / fmin return the first operand on ties (+-0).
ST_INLINE float st_hmax(float a, float b) { return (a >= b || a != a) ? a : b; }
ST_INLINE float st_hmin(float a, float b) { return (a <= b || a != a) ? a : b; }
ST_INLINE float st_hfmax(float a, float b) { return (a >= b || b != b) ? a : b; }
ST_INLINE float st_hfmin(float a, float b) { return (a <= b || b != b) ? a : b; }
// float16 value (held in a float) -> float64 keeping a NaN's payload unquieted, as NumPy.
ST_INLINE double st_f16_to_f64(float x) {
  const uint32_t u = st_fbits(x);
  return x != x ? st_bitsd(((uint64_t)(u & 0x80000000u) << 32) | 0x7ff0000000000000ULL |
                           ((uint64_t)(u & 0x7fffffu) << 29))
                : (double)x;
}

// bfloat16: the top half of a float; NaN -> 0x7fc0 with the sign.
ST_INLINE uint16_t st_to_bf16(float x) {
  const uint32_t u = st_fbits(x);
  const uint32_t r = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  return (uint16_t)((u & 0x7fffffffu) > 0x7f800000u ? (((u >> 16) & 0x8000u) | 0x7fc0u) : r);
}
ST_INLINE float st_from_bf16(uint16_t h) { return st_bitsf((uint32_t)h << 16); }
// Store: a NaN that is the image of a stored NaN keeps its payload (ml_dtypes' maximum, where,
// abs... select or flip stored bits); other values narrow as st_to_bf16.
ST_INLINE uint16_t st_put_bf16(float x) {
  const uint32_t u = st_fbits(x);
  return ((u & 0x7fffffffu) > 0x7f800000u && (u & 0xffffu) == 0u) ? (uint16_t)(u >> 16)
                                                                  : st_to_bf16(x);
}
ST_INLINE float st_rnd_bf16(float x) {
  const uint32_t u = st_fbits(x);
  const uint32_t r = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
  return st_bitsf((u & 0x7fffffffu) > 0x7f800000u ? ((u & 0x80000000u) | 0x7fc00000u) : r);
}

// float8_e4m3fn: no inf; 0x7f / 0xff are NaN; overflow (past 464, which rounds to 448), inf
// and NaN give NaN.
ST_INLINE float st_rnd_f8e4m3fn(float x) {
  const uint32_t u = st_fbits(x), a = u & 0x7fffffffu;
  const uint32_t r = a > 0x43e80000u ? 0x7fc00000u : st_fbits(st_grid<3, -6>(a));
  return st_bitsf((u & 0x80000000u) | r);
}
ST_INLINE uint8_t st_to_f8e4m3fn(float x) {
  const uint32_t u = st_fbits(st_rnd_f8e4m3fn(x)), a = u & 0x7fffffffu;
  return (uint8_t)(((u >> 24) & 0x80u) | (a > 0x7f800000u ? 0x7fu : st_pack<3, 7>(a)));
}
ST_INLINE float st_from_f8e4m3fn(uint8_t b) {
  const uint32_t c = b & 0x7fu;
  const float f = c == 0x7fu ? st_bitsf(0x7fc00000u) : st_wide<3, 7>(c);
  return st_signed(f, (uint32_t)(b & 0x80u) << 24);
}

// float8_e5m2: IEEE-like; overflow from 61440; NaN narrows to 0x7e and widens to the quiet
// float NaN. In kernels a NaN keeps its 2 payload bits (float bits 22:21) so that selections
// store the pattern they picked; conversions quieten it first (st_qnan), as ml_dtypes.
ST_INLINE float st_rnd_f8e5m2(float x) {
  const uint32_t u = st_fbits(x), a = u & 0x7fffffffu;
  const uint32_t r = a > 0x7f800000u ? 0x7fc00000u
                                     : (a >= 0x47700000u ? 0x7f800000u
                                                         : st_fbits(st_grid<2, -14>(a)));
  return st_bitsf((u & 0x80000000u) | r);
}
ST_INLINE uint8_t st_to_f8e5m2(float x) {
  const uint32_t u = st_fbits(st_rnd_f8e5m2(x)), a = u & 0x7fffffffu;
  const uint32_t c = a > 0x7f800000u ? 0x7eu : (a == 0x7f800000u ? 0x7cu : st_pack<2, 15>(a));
  return (uint8_t)(((u >> 24) & 0x80u) | c);
}
ST_INLINE float st_from_f8e5m2(uint8_t b) {
  const uint32_t c = b & 0x7fu;
  const float f = c >= 0x7cu ? st_bitsf(0x7f800000u | ((c & 3u) << 21)) : st_wide<2, 15>(c);
  return st_signed(f, (uint32_t)(b & 0x80u) << 24);
}
ST_INLINE uint8_t st_put_f8e5m2(float x) {
  const uint32_t u = st_fbits(x);
  return ((u & 0x7fffffffu) > 0x7f800000u && (u & 0x1fffffu) == 0u)
      ? (uint8_t)(((u >> 24) & 0x80u) | 0x7cu | ((u >> 21) & 3u)) : st_to_f8e5m2(x);
}

// float4_e2m1fn (one per byte): no inf or NaN; overflow (from 6: 7 rounds to 8) saturates to
// +-6; NaN -> zero with the opposite sign bit (ml_dtypes); bytes above 7 read as negative.
ST_INLINE float st_rnd_f4e2m1fn(float x) {
  const uint32_t u = st_fbits(x), a = u & 0x7fffffffu;
  const uint32_t r = a >= 0x40c00000u ? 0x40c00000u : st_fbits(st_grid<1, 0>(a));
  return st_bitsf(a > 0x7f800000u ? (~u & 0x80000000u) : ((u & 0x80000000u) | r));
}
ST_INLINE uint8_t st_to_f4e2m1fn(float x) {
  const uint32_t u = st_fbits(st_rnd_f4e2m1fn(x));
  return (uint8_t)(((u >> 28) & 8u) | st_pack<1, 1>(u & 0x7fffffffu));
}
ST_INLINE float st_from_f4e2m1fn(uint8_t b) {
  return st_signed(st_wide<1, 1>(b & 7u), b > 7u ? 0x80000000u : 0u);
}

// float8_e8m0fnu (scales, 2**(b - 127); 0xff is NaN): decided on the bits, so that the
// float subnormal 2**-127 (0x00400000) is never flushed by arithmetic. Rounding adds half a
// binade's mantissa (halfway cases up, as ml_dtypes); below 1.5 * 2**-127 the result is 2**-127.
ST_INLINE float st_rnd_f8e8m0fnu(float x) {
  const uint32_t u = st_fbits(x);
  const uint32_t r = (u == 0u || u >= 0x7f400000u) ? 0x7fc00000u   // zero, negative, NaN, big
                     : (u < 0x00600000u ? 0x00400000u : ((u + 0x00400000u) & 0x7f800000u));
  return st_bitsf(r);
}
ST_INLINE uint8_t st_to_f8e8m0fnu(float x) {
  const uint32_t r = st_fbits(st_rnd_f8e8m0fnu(x));
  return (uint8_t)(r == 0x7fc00000u ? 0xffu : (r == 0x00400000u ? 0u : r >> 23));
}
ST_INLINE float st_from_f8e8m0fnu(uint8_t b) {
  return st_bitsf(b == 0xffu ? 0x7fc00000u : (b == 0u ? 0x00400000u : (uint32_t)b << 23));
}
"""
