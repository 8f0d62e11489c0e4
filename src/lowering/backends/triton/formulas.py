"""The Triton renderer of the scalar formula language (core/scalar.py).

``render(prim, args, in_dtypes, out_dtype, params)`` instantiates the primitive's
``scalar_formula`` and renders it as a Triton expression over blocks (``args`` are the Triton
expressions of the operands, blocks of ``BLOCK`` elements), or returns None where Triton has no
rendering for that primitive / dtype combination (the group is then not fused: NumPy runs it).
Every op honours its contract (core/scalar.py) on the GPU and under the interpreter alike:

* IEEE division and square root (``tl.math.div_rn``, ``tl.sqrt_rn``: Triton's ``/`` and
  ``tl.sqrt`` are approximate on GPUs); the other math functions come from the device math
  library, ``M`` in the generated module (``libdevice`` on a GPU, NumPy's ufuncs under the
  interpreter: device_math.py), since ``tl.exp`` / ``tl.log`` are approximate too;
* NumPy's integer conventions written out: division by zero gives 0, ``MIN // -1`` wraps,
  shifts past the width give 0 or -1 (Triton's ``//`` and ``%`` truncate, as C);
* float -> integer conversion saturates with NaN -> 0 (Starling's rule, core/casting.py);
* literals are exact: NaN / inf and other special values through their bit patterns.

Low-precision floats: float16, bfloat16, float8_e4m3fn, float8_e5m2, float4_e2m1fn (and the
scale format float8_e8m0fnu) are widened to float32 exactly; a conversion to them rounds once,
by Starling's rules (core/casting.py), from float32 only (float64 and wide integers would round
twice: not rendered). All but float16 are held as their bits (uint16 / uint8, ``BIT_FORMATS``)
and converted by device functions with integer operations and one float addition that rounds
at the format's last bit: the algorithms of the C++ kernels (cpp/lowp.py), which the GPU and
the interpreter (whose bfloat16 conversions flush subnormals and which has no float8 of its
own) compute alike. A NaN stored by a kernel is the format's canonical NaN (payloads of
selected NaNs are not kept, unlike the C++ kernels).
"""
from __future__ import annotations

import math

import ml_dtypes
import numpy as np

from ....core import scalar as S

TL_DTYPES = {
    np.dtype(np.bool_): "tl.int1", np.dtype(np.int8): "tl.int8", np.dtype(np.int16): "tl.int16",
    np.dtype(np.int32): "tl.int32", np.dtype(np.int64): "tl.int64",
    np.dtype(np.uint8): "tl.uint8", np.dtype(np.uint16): "tl.uint16",
    np.dtype(np.uint32): "tl.uint32", np.dtype(np.uint64): "tl.uint64",
    np.dtype(np.float16): "tl.float16", np.dtype(ml_dtypes.bfloat16): "tl.uint16",   # its bits
    np.dtype(np.float32): "tl.float32", np.dtype(np.float64): "tl.float64",
    **{np.dtype(dt): "tl.uint8" for dt in (ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2,
                                           ml_dtypes.float4_e2m1fn, ml_dtypes.float8_e8m0fnu)},
}
_F32, _F64 = np.dtype(np.float32), np.dtype(np.float64)
_BF16 = np.dtype(ml_dtypes.bfloat16)
# formats held as their bits: dtype -> the tag of their st_from_<tag> / st_to_<tag> helpers
BIT_FORMATS = {_BF16: "bf16", np.dtype(ml_dtypes.float8_e4m3fn): "f8e4m3fn",
               np.dtype(ml_dtypes.float8_e5m2): "f8e5m2",
               np.dtype(ml_dtypes.float4_e2m1fn): "f4e2m1fn",
               np.dtype(ml_dtypes.float8_e8m0fnu): "f8e8m0fnu"}
_LOWP = (np.dtype(np.float16),) + tuple(BIT_FORMATS)
_BITS = {_F32: ("tl.uint32", "tl.int32", np.uint32), _F64: ("tl.uint64", "tl.int64", np.uint64),
         np.dtype(np.float16): ("tl.uint16", "tl.int16", np.uint16),
         np.dtype(ml_dtypes.bfloat16): ("tl.uint16", "tl.int16", np.uint16)}
# ops that are one call of the device math library (device_math.py), float32 / float64
_MATH = ("exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sin", "cos", "tan", "asin",
         "acos", "atan", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "cbrt", "erf", "erfc",
         "rint", "floor", "ceil", "trunc", "atan2", "hypot", "copysign", "nextafter", "pow",
         "fmod")
_INFIX = {"add": "+", "sub": "-", "mul": "*", "eq": "==", "ne": "!=", "lt": "<", "le": "<=",
          "gt": ">", "ge": ">=", "and_": "&", "or_": "|", "xor_": "^", "band": "&", "bor": "|",
          "bxor": "^"}


def supported_dtype(dt) -> bool:
    """True for the dtypes Triton kernels load and store here (bool, integers, the floats but
    complex)."""
    return np.dtype(dt) in TL_DTYPES


def tl_dtype(dt) -> str:
    """The Triton dtype (source text, e.g. ``"tl.float32"``) a ``dt`` array is loaded and
    stored as (bfloat16 and the 8- / 4-bit floats as their bits); KeyError for a dtype
    ``supported_dtype`` rejects."""
    return TL_DTYPES[np.dtype(dt)]


class Unsupported(S.Unrenderable):
    """An op or dtype of a formula this renderer does not render."""


def literal(value, dt, block=True) -> str:
    """A block (``block``; else a scalar) of ``value`` as ``dt``, exactly (non-finite floats
    through their bits)."""
    dt = np.dtype(dt)
    if not block:
        return literal(value, dt).replace("tl.full([BLOCK],", "tl.full([],")
    if dt.kind == "f" or dt in _LOWP:
        v = np.asarray(value, dt)
        if dt in BIT_FORMATS:   # held as its bits
            return f"tl.full([BLOCK], {int(v.view(f'uint{8 * dt.itemsize}'))}, {tl_dtype(dt)})"
        if dt in _LOWP or not math.isfinite(float(v)):
            u, _, ut = _BITS[dt]
            return f"tl.full([BLOCK], {int(v.view(ut))}, {u}).to({tl_dtype(dt)}, bitcast=True)"
        return f"tl.full([BLOCK], {float(v)!r}, {tl_dtype(dt)})"
    return f"tl.full([BLOCK], {int(value)}, {tl_dtype(dt)})"


def render_expr(e, args) -> str:
    """Triton expression of the formula ``e`` with operand ``i`` given by ``args[i]``; raises
    Unsupported for what is not rendered."""
    dt, op = e.dtype, e.op
    if op == "arg":
        return args[e.attr]
    if op == "lit":
        return literal(e.attr, dt)
    if any(not supported_dtype(x.dtype) for x in e.args) or not supported_dtype(dt):
        raise Unsupported(f"{op} on {[str(x.dtype) for x in e.args]}")
    a = [render_expr(x, args) for x in e.args]
    t = tl_dtype(dt)
    x0 = e.args[0].dtype if e.args else None
    if op == "cast":
        return _cast(a[0], x0, dt, e.attr)
    if op == "select":
        return f"tl.where({a[0]}, {a[1]}, {a[2]})"
    if op in _INFIX:
        return f"({a[0]} {_INFIX[op]} {a[1]})"
    if op == "div":
        return _div(a[0], a[1], dt)
    if op == "neg":
        return f"({literal(0, dt)} - {a[0]})" if dt.kind == "u" else f"(-{a[0]})"
    if op == "not_":
        return f"({a[0]} == 0)"
    if op == "binv":
        return f"(~{a[0]})"
    if op in ("shl", "shr"):
        return _shift(op, a[0], a[1], dt)
    if op == "popcount":
        # the bits of the two's-complement pattern, widened without sign extension to the
        # int32 / int64 that libdevice's popc / popcll take
        bits = 8 * dt.itemsize
        w = 64 if bits == 64 else 32
        u = f"{a[0]}.to(tl.uint{bits}, bitcast=True)" if dt.kind == "i" else a[0]
        return f"M.popc({u}.to(tl.uint{w}).to(tl.int{w}, bitcast=True)).to({t})"
    if op == "sqrt":   # float64's are IEEE already; float32's tl.sqrt is approximate
        return f"tl.sqrt_rn({a[0]})" if dt == _F32 else f"tl.sqrt({a[0]})"
    if op == "fabs":
        return f"tl.abs({a[0]})"
    if op == "pow" and dt.kind == "f" and _is_literal(a[1], 2.0, dt):
        return f"({a[0]} * {a[0]})"   # NumPy squares too: exactly pow(x, 2)
    if op in ("fmod", "pow") and dt.kind in "iu":
        if op == "fmod":
            return _int_divmod("fmod", a[0], a[1], dt)
        raise Unsupported("integer pow")
    if op in _MATH:
        return f"M.{op}({', '.join(a)})"
    if op in ("max", "min", "fmax", "fmin"):
        cmp = ">" if op in ("max", "fmax") else "<"
        nan = a[0] if op in ("max", "min") else a[1]
        if dt.kind == "f":
            return f"tl.where(({a[0]} {cmp} {a[1]}) | ({nan} != {nan}), {a[0]}, {a[1]})"
        return f"tl.where({a[0]} {cmp} {a[1]}, {a[0]}, {a[1]})"
    if op in ("floordiv", "mod"):
        if dt.kind == "f":
            return _float_divmod(op, a[0], a[1], dt)
        return _int_divmod(op, a[0], a[1], dt)
    if op == "sign":
        one, zero = literal(1, dt), literal(0, dt)
        if dt.kind == "u":
            return f"tl.where({a[0]} > {zero}, {one}, {zero})"
        s = f"tl.where({a[0]} > {zero}, {one}, tl.where({a[0]} < {zero}, -{one}, {zero}))"
        return f"tl.where({a[0]} != {a[0]}, {a[0]}, {s})" if dt.kind == "f" else s
    if op == "heaviside":
        zero, one = literal(0, dt), literal(1, dt)
        return (f"tl.where({a[0]} != {a[0]}, {a[0]}, tl.where({a[0]} < {zero}, {zero}, "
                f"tl.where({a[0]} > {zero}, {one}, {a[1]})))")
    if op in ("logaddexp", "logaddexp2"):
        return _logaddexp(op, a[0], a[1], dt)
    if op == "isnan":
        return f"({a[0]} != {a[0]})"
    if op in ("isinf", "isfinite"):
        inf = literal(np.inf, x0)
        return f"(tl.abs({a[0]}) == {inf})" if op == "isinf" else f"(tl.abs({a[0]}) < {inf})"
    if op == "signbit":
        return f"({a[0]}.to({_BITS[x0][1]}, bitcast=True) < 0)"
    if op == "ldexp":
        return f"M.ldexp({a[0]}, {a[1]})"
    raise Unsupported(op)


LOWP = _LOWP


def _is_literal(x, value, dt):
    """True when the rendered block ``x`` is the literal ``value`` as ``dt``, or that literal in
    a low-precision format widened to ``dt`` (how a low-precision operand reaches a float32
    formula)."""
    return x == literal(value, dt) or any(
        x == _cast(literal(value, f), f, dt, True) for f in _LOWP if dt in (_F32, _F64))


def render_cast(x, src, dst):
    """Triton expression converting block ``x`` from ``src`` to ``dst`` (Starling's rules), or
    raise Unsupported."""
    return _cast(x, np.dtype(src), np.dtype(dst), False)


def _div(a, b, dt):
    """IEEE division: float32's ``/`` is approximate on GPUs, float64's is not."""
    return f"tl.math.div_rn({a}, {b})" if np.dtype(dt) == _F32 else f"({a} / {b})"


def _cast(x, src, dst, exact):
    src, dst = np.dtype(src), np.dtype(dst)
    t = tl_dtype(dst)
    if src in BIT_FORMATS:   # held as its bits: widened exactly to float32 first
        x = f"st_from_{BIT_FORMATS[src]}({x})"
        return x if dst == _F32 else _cast(x, _F32, dst, exact)
    if dst in _LOWP and src != _F32 and src.kind != "b" and src not in _LOWP and \
            not (src.kind in "iu" and src.itemsize <= 2):
        raise Unsupported(f"cast {src} -> {dst} (would round twice)")
    if dst in BIT_FORMATS:
        if src != _F32:
            x = _cast(x, src, _F32, exact)   # exact: bool, short integers, float16
        return f"st_to_{BIT_FORMATS[dst]}({x})"
    if dst.kind == "b":
        return f"({x} != 0)"
    if src.kind == "b":
        return f"{x}.to({t})"
    if src.kind == "f" or src in _LOWP:
        if dst.kind in "iu":
            return _float_to_int(x, src, dst)
    return f"{x}.to({t})"


# Device functions of every generated module: conversions of the formats held as bits, on the
# bits (cpp/lowp.py's algorithms and rules). st_grid_<f>: |x| (float bits a: finite, below the
# overflow threshold) rounded to nearest-even onto the format's grid by adding and subtracting
# the power of two 23 - M binades above a's binade (or the smallest normal's); st_pack_<f>: the
# magnitude code of a value on the grid; st_wide_<f>: the float of a magnitude code.
_GRID = """

def st_grid_{tag}(a):
    e = a & 0x7f800000
    c = (tl.where(e > {lo}, e, {lo}) + {shift}).to(tl.float32, bitcast=True)
    return (a.to(tl.float32, bitcast=True) + c) - c


def st_pack_{tag}(a):
    sub = (tl.where(a < {tiny}, a, 0).to(tl.float32, bitcast=True) * {scale}).to(tl.uint32)
    return tl.where(a >= {tiny}, (a >> {sh}) - {rebias}, sub)


def st_wide_{tag}(c):
    o = c << {sh}
    nrm = (o + {normal}).to(tl.float32, bitcast=True)
    sub = (o + {tiny}).to(tl.float32, bitcast=True) - {tinyf}
    return tl.where(c < {one}, sub, nrm)
"""


def _grid_helpers(tag, mant, bias):
    emin = 1 - bias
    return _GRID.format(tag=tag, lo=(emin + 127) << 23, shift=(23 - mant) << 23,
                        tiny=(128 - bias) << 23, scale=repr(2.0 ** (bias - 1 + mant)),
                        sh=23 - mant, rebias=(127 - bias) << mant, normal=(127 - bias) << 23,
                        tinyf=repr(2.0 ** (1 - bias)), one=1 << mant)


HELPERS = """
def st_from_bf16(h):
    return (h.to(tl.uint32) << 16).to(tl.float32, bitcast=True)


def st_to_bf16(x):
    u = x.to(tl.uint32, bitcast=True)
    r = (u + 0x7fff + ((u >> 16) & 1)) >> 16
    return tl.where(x != x, ((u >> 16) & 0x8000) | 0x7fc0, r).to(tl.uint16)


def st_to_f8e4m3fn(x):
    u = x.to(tl.uint32, bitcast=True)
    a = u & 0x7fffffff
    g = st_grid_f8e4m3fn(a).to(tl.uint32, bitcast=True)
    c = tl.where(a > 0x43e80000, 0x7f, st_pack_f8e4m3fn(g))   # past 464: NaN
    return (((u >> 24) & 0x80) | c).to(tl.uint8)


def st_from_f8e4m3fn(b):
    c = b.to(tl.uint32) & 0x7f
    f = tl.where(c == 0x7f, 0x7fc00000, st_wide_f8e4m3fn(c).to(tl.uint32, bitcast=True))
    return (f | ((b.to(tl.uint32) & 0x80) << 24)).to(tl.float32, bitcast=True)


def st_to_f8e5m2(x):
    u = x.to(tl.uint32, bitcast=True)
    a = u & 0x7fffffff
    g = st_grid_f8e5m2(a).to(tl.uint32, bitcast=True)
    c = tl.where(a > 0x7f800000, 0x7e, tl.where(a >= 0x47700000, 0x7c, st_pack_f8e5m2(g)))
    return (((u >> 24) & 0x80) | c).to(tl.uint8)


def st_from_f8e5m2(b):
    c = b.to(tl.uint32) & 0x7f
    f = tl.where(c > 0x7c, 0x7fc00000,
                 tl.where(c == 0x7c, 0x7f800000, st_wide_f8e5m2(c).to(tl.uint32, bitcast=True)))
    return (f | ((b.to(tl.uint32) & 0x80) << 24)).to(tl.float32, bitcast=True)


def st_to_f4e2m1fn(x):
    u = x.to(tl.uint32, bitcast=True)
    a = u & 0x7fffffff
    g = tl.where(a >= 0x40c00000, 0x40c00000, st_grid_f4e2m1fn(a).to(tl.uint32, bitcast=True))
    nan = a > 0x7f800000   # NaN: a zero with the opposite sign bit
    s = tl.where(nan, ~u, u) & 0x80000000
    return (((s >> 28) & 8) | st_pack_f4e2m1fn(tl.where(nan, 0, g))).to(tl.uint8)


def st_from_f4e2m1fn(b):
    v = b.to(tl.uint32)
    f = st_wide_f4e2m1fn(v & 7).to(tl.uint32, bitcast=True)
    return (f | tl.where(v > 7, 0x80000000, 0)).to(tl.float32, bitcast=True)


def st_to_f8e8m0fnu(x):
    u = x.to(tl.uint32, bitcast=True)
    r = tl.where(u < 0x00600000, 0, ((u + 0x00400000) >> 23) & 0xff)
    return tl.where((u == 0) | (u >= 0x7f400000), 0xff, r).to(tl.uint8)


def st_mul_combine(a, b):
    return a * b


def st_argmax_combine(av, ai, bv, bi):
    an = av != av
    bn = bv != bv
    tie = (bv == av) & (bi < ai)
    take = (bn & (~an | (bi < ai))) | (~an & ~bn & ((bv > av) | tie))
    return tl.where(take, bv, av), tl.where(take, bi, ai)


def st_argmin_combine(av, ai, bv, bi):
    an = av != av
    bn = bv != bv
    tie = (bv == av) & (bi < ai)
    take = (bn & (~an | (bi < ai))) | (~an & ~bn & ((bv < av) | tie))
    return tl.where(take, bv, av), tl.where(take, bi, ai)


def st_from_f8e8m0fnu(b):
    v = b.to(tl.uint32)
    f = tl.where(v == 0xff, 0x7fc00000, tl.where(v == 0, 0x00400000, v << 23))
    return f.to(tl.float32, bitcast=True)
""" + _grid_helpers("f8e4m3fn", 3, 7) + _grid_helpers("f8e5m2", 2, 15) + \
    _grid_helpers("f4e2m1fn", 1, 1)
HELPER_NAMES = tuple(f"st_{d}_{t}" for t in BIT_FORMATS.values() for d in ("from", "to")) + \
    tuple(f"st_{d}_{t}" for t in ("f8e4m3fn", "f8e5m2", "f4e2m1fn")
          for d in ("grid", "pack", "wide")) + \
    ("st_mul_combine", "st_argmax_combine", "st_argmin_combine")


def _float_to_int(x, src, dst):
    """Starling's rule: truncation toward zero, NaN -> 0, out of range saturates."""
    bits = 8 * dst.itemsize
    signed = dst.kind == "i"
    half = float(2 ** (bits - 1))
    lo, hi = (-half, half) if signed else (0.0, 2 * half)
    info = np.iinfo(dst)
    w = src if src.kind == "f" else _F32
    xs = x if src.kind == "f" else f"{x}.to(tl.float32)"
    in_range = f"({xs} >= {literal(lo, w)}) & ({xs} < {literal(hi, w)})"
    r = f"tl.where({in_range}, {xs}, {literal(0, w)}).to({tl_dtype(dst)})"
    return (f"tl.where({xs} >= {literal(hi, w)}, {literal(info.max, dst)}, "
            f"tl.where({xs} < {literal(lo, w)}, {literal(info.min, dst)}, {r}))")


def _shift(op, a, b, dt):
    bits = 8 * dt.itemsize
    udt = np.dtype(f"uint{bits}")
    bu = f"{b}.to({tl_dtype(udt)}, bitcast=True)" if dt.kind == "i" else b
    big = f"({bu} >= {literal(bits, udt)})"
    sh = f"tl.where({big}, {literal(0, dt)}, {b})"   # no shift by the width or more
    if op == "shl":
        return f"tl.where({big}, {literal(0, dt)}, {a} << {sh})"
    past = f"tl.where({a} < {literal(0, dt)}, {literal(-1, dt)}, {literal(0, dt)})" \
        if dt.kind == "i" else literal(0, dt)
    return f"tl.where({big}, {past}, {a} >> {sh})"


def _int_divmod(op, a, b, dt):
    """NumPy's integer // and % (and C's fmod) from Triton's truncating ones, with b == 0
    giving 0 and MIN // -1 wrapping."""
    zero = literal(0, dt)
    safe = f"tl.where({b} == {zero}, {literal(1, dt)}, {b})"
    if dt.kind == "i":
        m1 = literal(-1, dt)
        safe = f"tl.where({b} == {m1}, {literal(1, dt)}, {safe})"   # MIN / -1 traps
        q, r = f"({a} // {safe})", f"({a} % {safe})"
        if op == "floordiv":
            adj = f"(({r} != {zero}) & (({a} < {zero}) != ({b} < {zero})))"
            v = f"tl.where({b} == {m1}, {zero} - {a}, {q} - {adj}.to({tl_dtype(dt)}))"
        elif op == "mod":
            adj = f"(({r} != {zero}) & (({r} < {zero}) != ({b} < {zero})))"
            v = f"tl.where({b} == {m1}, {zero}, tl.where({adj}, {r} + {b}, {r}))"
        else:   # fmod
            v = f"tl.where({b} == {m1}, {zero}, {r})"
    else:
        v = f"({a} // {safe})" if op == "floordiv" else f"({a} % {safe})"
    return f"tl.where({b} == {zero}, {zero}, {v})"


def _float_divmod(op, a, b, dt):
    """Python's float // and % through fmod (NumPy's divmod algorithm)."""
    zero, one, half = literal(0, dt), literal(1, dt), literal(0.5, dt)
    mod = f"M.fmod({a}, {b})"
    wrong = f"(({mod} != {zero}) & (({b} < {zero}) != ({mod} < {zero})))"
    if op == "mod":
        fixed = f"tl.where({wrong}, {mod} + {b}, {mod})"
        v = f"tl.where({mod} != {zero}, {fixed}, M.copysign({zero}, {b}))"
        return f"tl.where({b} == {zero}, {mod}, {v})"
    div = f"({_div(f'({a} - {mod})', b, dt)} - tl.where({wrong}, {one}, {zero}))"
    fl = f"M.floor({div})"
    rounded = f"({fl} + tl.where({div} - {fl} > {half}, {one}, {zero}))"
    v = f"tl.where({div} != {zero}, {rounded}, M.copysign({zero}, {_div(a, b, dt)}))"
    return f"tl.where({b} == {zero}, {_div(a, b, dt)}, {v})"


def _logaddexp(op, a, b, dt):
    d = f"({a} - {b})"
    if op == "logaddexp":
        same = f"{a} + {literal(math.log(2.0), dt)}"
        up, down = f"{a} + M.log1p(M.exp(-{d}))", f"{b} + M.log1p(M.exp({d}))"
    else:
        ln2 = literal(math.log(2.0), dt)
        same = f"{a} + {literal(1, dt)}"
        up = f"{a} + {_div(f'M.log1p(M.exp2(-{d}))', ln2, dt)}"
        down = f"{b} + {_div(f'M.log1p(M.exp2({d}))', ln2, dt)}"
    return (f"tl.where({a} == {b}, {same}, tl.where({d} > {literal(0, dt)}, {up}, "
            f"tl.where({d} <= {literal(0, dt)}, {down}, {d})))")


def render(prim, args, in_dtypes, out_dtype, params):
    """Triton expression for one block of primitive ``prim`` or None (not rendered)."""
    return S.render_primitive(prim, args, in_dtypes, out_dtype, params,
                              supported=supported_dtype, render_expr=render_expr)
