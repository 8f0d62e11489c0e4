"""The C++ renderer of the scalar formula language (core/scalar.py), for the ``cpp`` backend's
fused kernels, and the C++ text every generated module starts with.

``render(prim, args, in_dtypes, out_dtype, params)`` instantiates the primitive's
``scalar_formula`` for the dtypes and renders it as a C++ expression of one element from the C++
expressions ``args`` (operands already of the C++ types of ``in_dtypes``), or returns None when
there is no formula for that primitive / dtype combination (the backend then runs the
primitive's NumPy implementation). Each language op is rendered to honour its contract: integer
wrap-around (kernels are built with ``-fwrapv``; int8 / int16 results are cast back because C
promotes them), integer division by zero, shifts past the bit width, NaN / inf / -0.0 (the
NumPy-contract ops are the ``st_*`` helper templates of ``_HELPERS``).

float16, bfloat16, float8_e4m3fn, float8_e5m2 and float4_e2m1fn values are held in ``float``
(``ctype``) and stored as their bits (``ptr_ctype``, ``load_expr`` / ``store_expr``): widening
one to float32 is free, and a ``cast`` to one rounds (``_convert_lowp``; the C++ conversions and
their rules are in lowp.py). Conversions follow Starling's rules (core/casting.py: float -> int
saturates, every cast to a float rounds once).

``prelude()`` is the C++ text every generated module starts with: includes, the SIMD
declarations of the vector math library (glibc's libmvec, when present: vectorised
exp/log/sin/tanh...) and the small helper functions the formulas call.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import functools
import math

import numpy as np

from ....core import casting, scalar as S
from . import hypot
from . import lowp as LP

CTYPES = {
    np.dtype(np.bool_): "bool", np.dtype(np.int8): "int8_t", np.dtype(np.int16): "int16_t",
    np.dtype(np.int32): "int32_t", np.dtype(np.int64): "int64_t", np.dtype(np.uint8): "uint8_t",
    np.dtype(np.uint16): "uint16_t", np.dtype(np.uint32): "uint32_t",
    np.dtype(np.uint64): "uint64_t", np.dtype(np.float32): "float", np.dtype(np.float64): "double",
}
FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


def ctype(dt) -> str:
    """The C++ type of a value of ``dt`` in a kernel (low-precision floats are held in float)."""
    dt = np.dtype(dt)
    return "float" if dt in LP.FORMATS else CTYPES[dt]


def ptr_ctype(dt) -> str:
    """The C++ element type of a buffer: bool buffers are read and written as uint8_t (GCC
    does not vectorise loops that load or store C++ bool); low-precision floats as their bits."""
    dt = np.dtype(dt)
    if dt in LP.FORMATS:
        return LP.storage_ctype(dt)
    return "uint8_t" if dt.kind == "b" else CTYPES[dt]


def supported_dtype(dt) -> bool:
    """True when the C++ kernels handle dtype ``dt``: a C type exists for it, or it is one of the
    low-precision float formats (lowp.FORMATS)."""
    dt = np.dtype(dt)
    return dt in CTYPES or dt in LP.FORMATS


def is_lowp(dt) -> bool:
    """True for float16 / bfloat16 / float8 / float4 (held in float, rounded per operation)."""
    return np.dtype(dt) in LP.FORMATS


def has_nan(dt) -> bool:
    """True when dtype ``dt`` can hold NaN: the real floats, except low-precision formats without
    NaN (float4_e2m1fn); False for every other dtype (bool, integers, complex)."""
    dt = np.dtype(dt)
    return LP.has_nan(dt) if dt in LP.FORMATS else dt.kind == "f"


def lowest(dt):
    """Identity of a max reduction over floats of ``dt``: -inf, or the most negative value."""
    return LP.lowest(dt) if is_lowp(dt) else -np.inf


def highest(dt):
    """Identity of a min reduction over floats of ``dt``: inf, or the largest finite value for
    formats without inf (float8_e4m3fn, float4_e2m1fn)."""
    return LP.highest(dt) if is_lowp(dt) else np.inf


def load_expr(dt, elem) -> str:
    """C++ expression of the value of buffer element ``elem`` (of ``ptr_ctype(dt)``)."""
    dt = np.dtype(dt)
    if dt in LP.FORMATS:
        return LP.load(dt, elem)
    return f"({elem} != 0)" if dt.kind == "b" else elem


def acc_value(dt, acc) -> str:
    """C++ value of dtype ``dt`` from a reduction accumulator (low-precision floats: rounded
    to the format, NaN payloads dropped as numpy_ref's float32 accumulation does)."""
    return LP.rounded(dt, f"(float)({acc})") if is_lowp(dt) else f"({ctype(dt)}){acc}"


def store_expr(dt, value) -> str:
    """C++ expression storing the value ``value`` into an element of ``ptr_ctype(dt)``."""
    dt = np.dtype(dt)
    if dt in LP.FORMATS:
        return LP.store(dt, value)
    return f"(uint8_t)({value})" if dt.kind == "b" else value


# ---- literals ------------------------------------------------------------------------------------

def literal(value, dt) -> str:
    """Exact C++ literal of ``value`` as dtype ``dt``."""
    dt = np.dtype(dt)
    v = casting.scalar(value, dt)
    if dt in LP.FORMATS:   # held in float: the float32 literal of the rounded value
        return literal(np.float32(v), np.float32)
    if dt.kind == "b":
        return "true" if bool(v) else "false"
    if dt.kind == "f":
        f = float(v)
        if math.isnan(f):
            return "__builtin_nanf(\"\")" if dt == np.float32 else "__builtin_nan(\"\")"
        if math.isinf(f):
            inf = "__builtin_inff()" if dt == np.float32 else "__builtin_inf()"
            return f"({'-' if f < 0 else ''}{inf})"
        text = f.hex()
        return f"({text}f)" if dt == np.float32 else f"({text})"
    i = int(v)
    if dt.kind == "u":
        return f"(({ctype(dt)}){i}ULL)"
    if i == -(1 << 63):
        return "((int64_t)(-9223372036854775807LL - 1))"
    return f"(({ctype(dt)}){i}LL)"


# ---- vector math ---------------------------------------------------------------------------------

_MVEC_UNARY = ("acos", "acosh", "asin", "asinh", "atan", "atanh", "cbrt", "cos", "cosh", "erf",
               "erfc", "exp", "exp10", "exp2", "expm1", "log", "log10", "log1p", "log2", "sin",
               "sinh", "tan", "tanh")
_MVEC_BINARY = ("atan2", "hypot", "pow")


def mvec_soname():
    """The file name of the vector math library to link (found by ldconfig, e.g.
    "libmvec.so.1"; linked by that name, so no development symlink is needed)."""
    return ctypes.util.find_library("mvec")


@functools.lru_cache(maxsize=None)
def mvec_functions() -> tuple:
    """(C name, C type, number of args) of the math functions with SIMD variants in this
    machine's libmvec (glibc), e.g. ("expf", "float", 1)."""
    path = ctypes.util.find_library("mvec")
    if path is None:
        return ()
    try:
        lib = ctypes.CDLL(path)
    except OSError:
        return ()
    found = []
    for fn, nargs in [(f, 1) for f in _MVEC_UNARY] + [(f, 2) for f in _MVEC_BINARY]:
        v = "v" * nargs
        # The SSE ('b') and AVX2 ('d') variants are the ones GCC picks on x86-64 without AVX-512.
        if hasattr(lib, f"_ZGVbN4{v}_{fn}f") and hasattr(lib, f"_ZGVdN8{v}_{fn}f"):
            found.append((fn + "f", "float", nargs))
        if hasattr(lib, f"_ZGVbN2{v}_{fn}") and hasattr(lib, f"_ZGVdN4{v}_{fn}"):
            found.append((fn, "double", nargs))
    return tuple(found)


_LIBM = {1: ("exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sin", "cos", "tan", "asin",
             "acos", "atan", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "sqrt", "cbrt",
             "nearbyint", "floor", "ceil", "trunc", "fabs", "erf", "erfc"),
         2: ("atan2", "hypot", "copysign", "nextafter", "fmod", "pow")}


def _decls() -> str:
    """Declarations of the libm functions used (with the SIMD attribute where libmvec has a
    vector variant), for float and double."""
    simd = {name for name, _, _ in mvec_functions()}
    lines = []
    for nargs, names in _LIBM.items():
        for base in names:
            for t, name in (("float", base + "f"), ("double", base)):
                attr = " ST_SIMD" if name in simd else ""
                lines.append(f"{t} {name}({', '.join([t] * nargs)}) throw(){attr};")
    lines.append("float ldexpf(float, int) throw(); double ldexp(double, int) throw();")
    return "\n".join(lines)


_HELPERS = r"""
// Generated by Starling (src/lowering/backends/formulas.py). No C++ standard headers:
// parsing <cmath> would triple the compile time; the math functions are declared below.
#include <stdint.h>
#define ST_SIMD __attribute__((simd("notinbranch")))
#define ST_INLINE static inline __attribute__((always_inline))

extern "C" {
%(decls)s
}

template <class T> struct st_traits;
#define ST_TRAITS(T, U, S) template <> struct st_traits<T> { typedef U u; enum { is_signed = S }; };
ST_TRAITS(int8_t, uint8_t, 1) ST_TRAITS(int16_t, uint16_t, 1) ST_TRAITS(int32_t, uint32_t, 1)
ST_TRAITS(int64_t, uint64_t, 1) ST_TRAITS(uint8_t, uint8_t, 0) ST_TRAITS(uint16_t, uint16_t, 0)
ST_TRAITS(uint32_t, uint32_t, 0) ST_TRAITS(uint64_t, uint64_t, 0)

// Overloads of the few libm functions the helpers use, for float and double.
#define ST_F1(name) ST_INLINE float st_##name(float a) { return name##f(a); } \
  ST_INLINE double st_##name(double a) { return name(a); }
#define ST_F2(name) ST_INLINE float st_##name(float a, float b) { return name##f(a, b); } \
  ST_INLINE double st_##name(double a, double b) { return name(a, b); }
ST_F1(floor) ST_F1(log1p) ST_F1(exp) ST_F1(exp2) ST_F1(nearbyint)
ST_F2(fmod) ST_F2(copysign) ST_F2(nextafter)
ST_INLINE float st_inf(float) { return __builtin_inff(); }
ST_INLINE double st_inf(double) { return __builtin_inf(); }
ST_INLINE float st_nan(float) { return __builtin_nanf(""); }
ST_INLINE double st_nan(double) { return __builtin_nan(""); }

// exp(x) with the same bits as expf / exp, but without the vector library's scalar fallback for
// lanes whose result is 0 or inf: arguments below -104 (float; -746 double) or above 89 (710)
// are passed as +0.0 and their lane's result set to +0.0 / +inf afterwards. A masked softmax
// (scores where(mask, s, -1e9) or -inf) otherwise sends half its lanes through scalar expf,
// ~9x slower. Written in bit operations, not selects: GCC sinks a call whose result a select
// discards into a branch (no vectorisation), or drops the replaced argument.
#define ST_EXPV(T, U, LO, HI, INF)                                                          \
  ST_INLINE T st_expv(T x) {                                                                \
    const bool lo = x < (T)(LO), hi = x > (T)(HI);                                          \
    U xb;                                                                                   \
    __builtin_memcpy(&xb, &x, sizeof xb);                                                   \
    const U m = (U)0 - (U)(lo | hi);                                                        \
    const U ab = xb & ~m;                                                                   \
    T a;                                                                                    \
    __builtin_memcpy(&a, &ab, sizeof a);                                                    \
    const T r = st_exp(a);                                                                  \
    U rb;                                                                                   \
    __builtin_memcpy(&rb, &r, sizeof rb);                                                   \
    rb = (rb & ~m) | (((U)0 - (U)hi) & (U)(INF));                                           \
    T out;                                                                                  \
    __builtin_memcpy(&out, &rb, sizeof out);                                                \
    return out;                                                                             \
  }
ST_EXPV(float, uint32_t, -104, 89, 0x7f800000u)
ST_EXPV(double, uint64_t, -746, 710, 0x7ff0000000000000ull)

// NaN-propagating maximum / minimum (NumPy maximum / minimum); fmax / fmin ignore NaN.
template <class T> ST_INLINE T st_max(T a, T b) { return (a > b || a != a) ? a : b; }
template <class T> ST_INLINE T st_min(T a, T b) { return (a < b || a != a) ? a : b; }
template <class T> ST_INLINE T st_fmax(T a, T b) { return (a > b || b != b) ? a : b; }
template <class T> ST_INLINE T st_fmin(T a, T b) { return (a < b || b != b) ? a : b; }

// Integer division with NumPy's conventions: x / 0 == 0, MIN / -1 wraps (never traps).
template <class T> ST_INLINE T st_ifloordiv(T a, T b) {
  if (b == 0) return 0;
  if (st_traits<T>::is_signed) {
    if (b == (T)-1) return (T)(0 - (typename st_traits<T>::u)a);
    T q = (T)(a / b);
    if ((T)(a % b) != 0 && ((a < 0) != (b < 0))) q = (T)(q - 1);
    return q;
  }
  return (T)(a / b);
}
template <class T> ST_INLINE T st_iremainder(T a, T b) {
  if (b == 0) return 0;
  if (st_traits<T>::is_signed) {
    if (b == (T)-1) return 0;
    T r = (T)(a % b);
    if (r != 0 && ((r < 0) != (b < 0))) r = (T)(r + b);
    return r;
  }
  return (T)(a % b);
}
template <class T> ST_INLINE T st_ifmod(T a, T b) {
  if (b == 0) return 0;
  if (st_traits<T>::is_signed && b == (T)-1) return 0;
  return (T)(a % b);
}
// Float floor division and remainder through fmod (the divmod algorithm NumPy and Python use),
// so that e.g. 1.0 // 0.1 == 9.0.
template <class T> ST_INLINE T st_fremainder(T a, T b) {
  T mod = st_fmod(a, b);
  if (b == 0) return mod;
  if (mod != 0) {
    if ((b < 0) != (mod < 0)) mod += b;
  } else {
    mod = st_copysign((T)0, b);
  }
  return mod;
}
template <class T> ST_INLINE T st_ffloordiv(T a, T b) {
  if (b == 0) return a / b;
  T mod = st_fmod(a, b);
  T div = (a - mod) / b;
  if (mod != 0 && ((b < 0) != (mod < 0))) div -= 1;
  if (div != 0) {
    T fl = st_floor(div);
    if (div - fl > (T)0.5) fl += 1;
    return fl;
  }
  return st_copysign((T)0, a / b);
}
// Shifts: NumPy gives 0 (or -1 for negative operands shifted right) past the bit width.
template <class T> ST_INLINE T st_lshift(T a, T b) {
  typedef typename st_traits<T>::u U;
  if ((U)b >= (U)(8 * sizeof(T))) return 0;
  return (T)((U)a << (U)b);
}
template <class T> ST_INLINE T st_rshift(T a, T b) {
  typedef typename st_traits<T>::u U;
  if ((U)b >= (U)(8 * sizeof(T))) return (st_traits<T>::is_signed && a < 0) ? (T)-1 : (T)0;
  return (T)(a >> b);
}
// Integer power by squaring (wrapping); a negative exponent gives the truncated exact value.
template <class T> ST_INLINE T st_ipow(T a, T b) {
  if (st_traits<T>::is_signed && b < 0) {
    if (a == 1) return 1;
    if (a == (T)-1) return (b & 1) ? (T)-1 : (T)1;
    return 0;
  }
  typedef typename st_traits<T>::u U;
  U r = 1, x = (U)a;
  U e = (U)b;
  while (e) {
    if (e & 1) r = (U)(r * x);
    x = (U)(x * x);
    e >>= 1;
  }
  return (T)r;
}
template <class T> ST_INLINE T st_sign(T a) {
  if (a != a) return a;
  return (T)((a > 0) - (a < 0));
}
template <class T> ST_INLINE T st_heaviside(T a, T b) {
  if (a != a) return a;
  return a < 0 ? (T)0 : (a > 0 ? (T)1 : b);
}
template <class T> ST_INLINE T st_logaddexp(T a, T b) {
  if (a == b) return a + (T)0.693147180559945309417232121458176568;
  T d = a - b;
  if (d > 0) return a + st_log1p(st_expv(-d));
  if (d <= 0) return b + st_log1p(st_expv(d));
  return d;
}
template <class T> ST_INLINE T st_logaddexp2(T a, T b) {
  const T ln2 = (T)0.693147180559945309417232121458176568;
  if (a == b) return a + 1;
  T d = a - b;
  if (d > 0) return a + st_log1p(st_exp2(-d)) / ln2;
  if (d <= 0) return b + st_log1p(st_exp2(d)) / ln2;
  return d;
}
template <class T> ST_INLINE T st_spacing(T a) {
  if (a != a || __builtin_isinf(a)) return st_nan(a);
  T up = st_nextafter(a, a < 0 ? -st_inf(a) : st_inf(a));   // NumPy: -0.0 steps up like 0.0
  return up - a;
}
template <class T> ST_INLINE T st_gcd(T a, T b) {
  typedef typename st_traits<T>::u U;
  U x = (st_traits<T>::is_signed && a < 0) ? (U)(0 - (U)a) : (U)a;
  U y = (st_traits<T>::is_signed && b < 0) ? (U)(0 - (U)b) : (U)b;
  while (y) { U t = x % y; x = y; y = t; }
  return (T)x;
}
template <class T> ST_INLINE T st_lcm(T a, T b) {
  // NumPy: |a| / gcd * |b|, wrapping in T.
  T g = st_gcd(a, b);
  if (g == 0) return 0;
  T aa = (st_traits<T>::is_signed && a < 0) ? (T)(0 - a) : a;
  T bb = (st_traits<T>::is_signed && b < 0) ? (T)(0 - b) : b;
  return (T)((T)(aa / g) * bb);
}
// float -> integer (Starling's convert, core/casting.py): truncation toward zero, NaN -> 0, out
// of range (+-inf too) saturates to T's min / max. The C++ conversion only ever sees an
// in-range value (0 otherwise), so it is defined, and every vector lane may compute it.
template <class T, class F> ST_INLINE T st_f2i_sat(F x) {
  typedef typename st_traits<T>::u U;
  const int s = st_traits<T>::is_signed;
  const F half = (F)((U)1 << (8 * sizeof(T) - 1));   // 2**(bits - 1), exact
  const F lo = s ? -half : (F)0, hi = s ? half : half + half;
  const T mn = (T)(s ? (U)((U)1 << (8 * sizeof(T) - 1)) : (U)0), mx = (T)((U)~(U)0 >> s);
  const T r = (T)(x >= lo && x < hi ? x : (F)0);
  return x >= hi ? mx : (x < lo ? mn : r);
}
// float32 of s + e (the exact value; |e| <= ulp(s) / 2) rounded to odd: truncated toward zero,
// the last bit set when inexact. Rounding it once more to a format with at least two fewer
// bits (bfloat16, float16, float8, float4) is the one correct rounding of s + e.
ST_INLINE float st_f32_odd(double s, double e) {
  const float f = (float)s;
  const double b = (double)f;
  const uint32_t away = (__builtin_fabs(b) > __builtin_fabs(s) ||
                         (b == s && e != 0 && ((e < 0) != (s < 0)))) ? 1u : 0u;
  const uint32_t inexact = (b != s || e != 0) ? 1u : 0u;
  uint32_t u;
  __builtin_memcpy(&u, &f, 4);
  u = (u - away) | inexact;
  float r;
  __builtin_memcpy(&r, &u, 4);
  return r;
}
// 64-bit integers: halves that double holds exactly, their sum and its exact error (TwoSum).
ST_INLINE float st_sum_f32_odd(double hi, double lo) {
  const double s = hi + lo, bb = s - hi;
  return st_f32_odd(s, (hi - (s - bb)) + (lo - bb));
}
ST_INLINE float st_f32_odd(int64_t x) {
  return st_sum_f32_odd((double)(int32_t)(x >> 32) * 4294967296.0, (double)(uint32_t)x);
}
ST_INLINE float st_f32_odd(uint64_t x) {
  return st_sum_f32_odd((double)(uint32_t)(x >> 32) * 4294967296.0, (double)(uint32_t)x);
}
template <class T> ST_INLINE T st_nan_to_num(T x, T nan, T posinf, T neginf) {
  if (x != x) return nan;
  if (__builtin_isinf(x)) return x > 0 ? posinf : neginf;
  return x;
}
"""


@functools.lru_cache(maxsize=None)
def prelude() -> str:
    """The head of every kernel library: math declarations, formula helpers, low-precision
    conversions and the native runtime (thread pool, GEMM: src/lowering/runtime/native.py)."""
    from ...runtime.native import PRELUDE
    return (_HELPERS.replace("%(decls)s", _decls()) + LP.HELPERS + hypot.HELPERS + PRELUDE
            + "\n")


# ---- rendering the scalar formula language (core/scalar.py) -------------------------------------

def _fn(dt, name):
    """The C math function for ``dt``: ``expf`` for float32, ``exp`` for float64."""
    return name + ("f" if dt == np.float32 else "")


# formula-language op -> C function (float / double variants by _fn)
_MATH = {"exp": "exp", "exp2": "exp2", "expm1": "expm1", "log": "log", "log2": "log2",
         "log10": "log10", "log1p": "log1p", "sin": "sin", "cos": "cos", "tan": "tan",
         "asin": "asin", "acos": "acos", "atan": "atan", "sinh": "sinh", "cosh": "cosh",
         "tanh": "tanh", "asinh": "asinh", "acosh": "acosh", "atanh": "atanh", "sqrt": "sqrt",
         "cbrt": "cbrt", "rint": "nearbyint", "erf": "erf", "erfc": "erfc", "floor": "floor",
         "ceil": "ceil", "trunc": "trunc", "fabs": "fabs", "atan2": "atan2",
         "copysign": "copysign", "nextafter": "nextafter"}
_INFIX = {"add": "+", "sub": "-", "mul": "*", "div": "/", "eq": "==", "ne": "!=", "lt": "<",
          "le": "<=", "gt": ">", "ge": ">=", "and_": "&&", "or_": "||", "xor_": "!="}
_BITS = {"band": "&", "bor": "|", "bxor": "^"}
# ops rendered as a helper template of the prelude: st_<name><T>(...) (ints / floats variants)
_HELPER = {"max": "st_max", "min": "st_min", "fmax": "st_fmax", "fmin": "st_fmin",
           "shl": "st_lshift", "shr": "st_rshift", "sign": "st_sign", "heaviside": "st_heaviside",
           "logaddexp": "st_logaddexp", "logaddexp2": "st_logaddexp2", "spacing": "st_spacing",
           "gcd": "st_gcd", "lcm": "st_lcm"}
_BY_KIND = {"floordiv": ("st_ffloordiv", "st_ifloordiv"), "mod": ("st_fremainder", "st_iremainder"),
            "fmod": (None, "st_ifmod"), "pow": (None, "st_ipow")}
_NARROW = frozenset(np.dtype(t) for t in (np.int8, np.int16, np.uint8, np.uint16))


class _Unsupported(S.Unrenderable):
    pass


def render_expr(e, args):
    """C++ expression of the formula ``e`` (a core.scalar.Expr) with operand ``i`` given by the
    C++ expression ``args[i]`` (of ``ctype`` of its dtype). Raises _Unsupported for what the
    C++ kernels do not compute (NumPy then does)."""
    dt, op = e.dtype, e.op
    if op == "arg":
        return args[e.attr]
    if op == "lit":
        return literal(e.attr, dt)
    a = [render_expr(x, args) for x in e.args]
    t = ctype(dt) if op not in ("eq", "ne", "lt", "le", "gt", "ge", "isnan", "isinf",
                               "isfinite", "signbit") else ctype(e.args[0].dtype)
    if op == "cast":
        src = e.args[0].dtype
        if is_lowp(dt) or is_lowp(src):
            if e.attr and _F32 in (src, dt):
                return a[0]   # widening, or a value of the format already: held in float as is
            x = _convert_lowp(a[0], src, dt)
        else:
            x = _convert(a[0], src, dt)
        if x is None:
            raise _Unsupported(f"cast {src} -> {dt}")
        return x
    if op == "select":
        return f"({a[0]} ? {a[1]} : {a[2]})"
    if op in _INFIX:
        x = f"({a[0]} {_INFIX[op]} {a[1]})"
        # int8 / int16 arithmetic: C promotes to int; wrap like the dtype before any further use
        return f"({t})({x})" if op in ("add", "sub", "mul") and dt in _NARROW else x
    if op == "neg":
        return f"({t})(0 - {a[0]})" if dt.kind == "u" or dt in _NARROW else f"(-{a[0]})"
    if op == "not_":
        return f"(!{a[0]})"
    if op in _BITS:
        return f"({t})({a[0]} {_BITS[op]} {a[1]})"
    if op == "binv":
        return f"({t})(~{a[0]})"
    if op == "popcount":
        # counted on the unsigned bits of the same width (two's complement for negatives)
        u = CTYPES[np.dtype(f"uint{dt.itemsize * 8}")]
        return f"({t})__builtin_popcountll((unsigned long long)({u}){a[0]})"
    if op == "pow" and dt.kind == "f":
        if a[1] == literal(2.0, dt):
            return f"({a[0]} * {a[0]})"   # NumPy squares too: exactly pow(x, 2)
        return f"{_fn(dt, 'pow')}({a[0]}, {a[1]})"
    if op == "fmod" and dt.kind == "f":
        return f"{_fn(dt, 'fmod')}({a[0]}, {a[1]})"
    if op in _BY_KIND:
        return f"{_BY_KIND[op][0 if dt.kind == 'f' else 1]}<{t}>({', '.join(a)})"
    if op == "hypot":
        return f"st_hypot({a[0]}, {a[1]})"   # correctly rounded (hypot.py)
    if op == "exp" and dt.kind == "f":
        return f"st_expv({a[0]})"
    if op in _MATH:
        return f"{_fn(dt, _MATH[op])}({', '.join(a)})"
    if op in _HELPER:
        return f"{_HELPER[op]}<{t}>({', '.join(a)})"
    if op in ("isnan", "isinf", "isfinite"):
        return f"((bool)__builtin_{op}({a[0]}))"
    if op == "signbit":
        if is_lowp(e.args[0].dtype):
            # from the bits: GCC 12 crashes (internal compiler error) vectorising
            # __builtin_signbit after the integer widening
            return f"((bool)(st_fbits({a[0]}) >> 31))"
        return f"((bool)__builtin_signbit({a[0]}))"
    if op == "ldexp":
        return f"{_fn(dt, 'ldexp')}({a[0]}, {a[1]})"
    raise _Unsupported(op)


def render(prim, args, in_dtypes, out_dtype, params):
    """C++ expression for one element of primitive ``prim`` (a Primitive or its name) from the
    C++ expressions ``args``, or None where it has no C++ formula for these dtypes (the
    backend then runs its NumPy implementation)."""
    if isinstance(prim, str):
        from ....core.primitive import Primitive
        prim = Primitive.registry[prim]
    return S.render_primitive(prim, args, in_dtypes, out_dtype, params,
                              supported=supported_dtype, render_expr=render_expr)



def _convert(x, src, dst):
    """convert_element_type between standard dtypes (Starling's rules, core/casting.py)."""
    src, dst = np.dtype(src), np.dtype(dst)
    if src == dst:
        return x
    if dst.kind == "b":
        return f"({x} != 0)"
    if src.kind == "b":
        # a ternary, not a cast: GCC does not vectorise bool -> number conversions
        return f"({x} ? ({ctype(dst)})1 : ({ctype(dst)})0)"
    if src.kind == "f" and dst.kind in "iu":
        return f"st_f2i_sat<{ctype(dst)}>({x})"
    return f"({ctype(dst)})({x})"




# ---- low-precision floats (see lowp.py) ------------------------------------------------------

_F32, _F64 = np.dtype(np.float32), np.dtype(np.float64)


def _convert_lowp(x, src, dst):
    """convert_element_type with a low-precision side (Starling's rules, core/casting.py): the
    source value in float, exactly (a low-precision value, a float32, a short integer) or
    rounded to odd (float64, 32 / 64-bit integers), rounded once to the format; to an integer
    ``st_f2i_sat``."""
    if src == dst:
        return x
    if dst.kind == "b":
        return f"({x} != 0)"
    if src == LP.E5M2:
        x = f"st_qnan({x})"   # kernels keep float8_e5m2 NaN payloads; casts quieten them
    if is_lowp(dst):
        if src.kind == "b":   # (rounded: float8_e8m0fnu has no zero)
            return LP.rounded(dst, f"({x} ? 1.0f : 0.0f)")
        if src == _F64 and dst == LP.FLOAT16:
            return f"st_f16_of_d({x})"   # float16 keeps the payload of a float64 NaN
        if src == _F64 or (src.kind in "iu" and src.itemsize == 8):
            x = f"st_f32_odd({x})" if src.kind in "iu" else f"st_f32_odd({x}, 0.0)"
        elif src.kind in "iu":
            x = f"st_f32_odd((double)({x}), 0.0)" if src.itemsize == 4 else f"(float)({x})"
        return LP.rounded(dst, x)
    if dst == _F32:
        return x
    if dst == _F64:
        return f"st_f16_to_f64({x})" if src == LP.FLOAT16 else f"(double)({x})"
    if dst.kind in "iu":
        return f"st_f2i_sat<{ctype(dst)}>({x})"
    return None
