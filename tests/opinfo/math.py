"""OpInfos of src/arrays/ops/math.py (math_basic.py, math_select.py, math_misc.py).

References are NumPy. Float-only ops on bool / integers: the reference casts those inputs to
float32 first (``fref``) since Starling promotes them to float32 as JAX does (NumPy: float64 or
float16). Low-precision floats whose Starling implementation runs in float32 use references
that do the same (``low32``).
"""
import ml_dtypes
import numpy as np

from tests.opinfo import OpInfo, Sample, register
from tests.opinfo.arithmetic import (
    INEXACT_IN, PROMOTED, REAL, REAL_INEXACT_IN, REAL_NUM, binary_edge_samples, bool_out,
    cast_values, edge_pair, float_out, fref, smooth_binary, smooth_unary, unary_edges,
)
from tests.opinfo.inputs import ALL, COMPLEX, FLOATS, INTS, LOW, rand

LOW_SET = {np.dtype(t) for t in LOW} | {np.dtype(ml_dtypes.bfloat16)}
_NOT_DIFF = dict(differentiable=False)


def _round_ref(x, decimals=0):
    """NumPy's round for floats; integers with negative decimals rounded exactly (half to
    even) in Python integers and wrapped to the dtype (NumPy's own goes through float64 and an
    out-of-range cast, whose result is undefined)."""
    x = np.asarray(x)
    if x.dtype.kind not in "iu" or decimals >= 0:
        return low32(np.round)(x, decimals)
    p, info = 10 ** -decimals, np.iinfo(x.dtype)

    def one(v):
        q, r = divmod(int(v), p)
        q += 2 * r > p or (2 * r == p and q % 2)
        return (q * p - int(info.min)) % 2 ** info.bits + int(info.min)
    return np.array([one(v) for v in x.reshape(-1)], dtype=x.dtype).reshape(x.shape)


def low32(fn):
    """Reference that runs bfloat16 / float8 / float4 inputs in float32 and rounds back."""
    def ref(x, *args, **kwargs):
        if isinstance(x, np.ndarray) and x.dtype in LOW_SET:
            out = fn(x.astype(np.float32), *args, **kwargs)
            return np.asarray(out).astype(x.dtype)
        return fn(x, *args, **kwargs)
    return ref



def _expm1_c99(x):
    """np.expm1 with the C99 special cases for complex infinities/NaNs (Array API)."""
    out = np.expm1(x)
    if np.iscomplexobj(x):
        out = np.where(np.isfinite(x), out, np.exp(x) - 1)
    return out

# ---- unary float functions ---------------------------------------------------------------------
# (name, NumPy function, accepts complex, edge values, check_grads range)
_EDGE = [0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan]
UNARY = [
    ("exp", np.exp, True, _EDGE + [100.0, -100.0], (-2, 2)),
    ("exp2", np.exp2, True, _EDGE + [200.0], (-2, 2)),
    ("expm1", _expm1_c99, True, _EDGE + [1e-10], (-2, 2)),
    ("log", np.log, True, _EDGE + [-2.0], (0.5, 3)),
    ("log2", np.log2, True, _EDGE + [8.0], (0.5, 3)),
    ("log10", np.log10, True, _EDGE + [1000.0], (0.5, 3)),
    ("log1p", np.log1p, True, _EDGE + [1e-10, -2.0], (0.5, 3)),
    ("sqrt", np.sqrt, True, _EDGE + [4.0, -4.0], (0.5, 3)),
    ("cbrt", np.cbrt, False, _EDGE + [-8.0, 27.0], (0.5, 3)),
    ("rsqrt", lambda x: np.reciprocal(np.sqrt(x)), True, _EDGE + [4.0], (0.5, 3)),
    ("sin", np.sin, True, _EDGE + [1e4], (-2, 2)),
    ("cos", np.cos, True, _EDGE + [1e4], (-2, 2)),
    ("tan", np.tan, True, _EDGE + [1.5707963], (-1, 1)),
    ("arcsin", np.arcsin, True, _EDGE + [1.5, -1.5], (-0.9, 0.9)),
    ("asin", np.arcsin, True, _EDGE, (-0.9, 0.9)),
    ("arccos", np.arccos, True, _EDGE + [1.5], (-0.9, 0.9)),
    ("acos", np.arccos, True, _EDGE, (-0.9, 0.9)),
    ("arctan", np.arctan, True, _EDGE, (-2, 2)),
    ("atan", np.arctan, True, _EDGE, (-2, 2)),
    ("sinh", np.sinh, True, _EDGE + [100.0], (-2, 2)),
    ("cosh", np.cosh, True, _EDGE + [100.0], (-2, 2)),
    ("tanh", np.tanh, True, _EDGE + [100.0], (-2, 2)),
    ("arcsinh", np.arcsinh, True, _EDGE, (-2, 2)),
    ("asinh", np.arcsinh, True, _EDGE, (-2, 2)),
    ("arccosh", np.arccosh, True, _EDGE + [0.5], (1.5, 3)),
    ("acosh", np.arccosh, True, _EDGE, (1.5, 3)),
    ("arctanh", np.arctanh, True, _EDGE + [0.5, 2.0], (-0.9, 0.9)),
    ("atanh", np.arctanh, True, _EDGE, (-0.9, 0.9)),
    ("deg2rad", np.deg2rad, False, _EDGE + [180.0], (-2, 2)),
    ("radians", np.radians, False, _EDGE, (-2, 2)),
    ("rad2deg", np.rad2deg, False, _EDGE + [np.pi], (-2, 2)),
    ("degrees", np.degrees, False, _EDGE, (-2, 2)),
    ("fabs", np.fabs, False, _EDGE + [-2.5], (0.5, 2)),
    ("spacing", np.spacing, False, _EDGE + [1e30], None),
    ("rint", np.rint, True, _EDGE + [0.5, 1.5, 2.5, -0.5, -2.5], None),
    ("i0", lambda x: np.asarray(np.i0(np.asarray(x, np.float64))).astype(x.dtype), False,
     _EDGE + [10.0, -10.0], (-2, 2)),
    ("sinc", lambda x: np.sinc(np.asarray(x, np.complex128 if x.dtype.kind == "c" else np.float64)
                               ).astype(x.dtype), True, _EDGE + [1.0, 2.0, -3.0], (0.2, 2)),
]
# Low precision errors: sinc (pi rounded to the dtype), i0 (float32 internally).
_TOLS = {"sinc": {"float16": (3e-3, 3e-3), "bfloat16": (3e-2, 3e-2), "float32": (1e-5, 1e-5),
                  "complex64": (1e-5, 1e-5)},
         "deg2rad": {"float16": (2e-3, 1e-3)}, "radians": {"float16": (2e-3, 1e-3)},
         "rad2deg": {"float16": (2e-3, 1e-3)}, "degrees": {"float16": (2e-3, 1e-3)},
         "i0": {"float32": (1e-5, 1e-5)}}
_LOW_CORE = ("exp", "log", "sqrt", "sin", "tanh")  # float8 / float4 spot checks

register(*[
    OpInfo(name, fref(fn), (INEXACT_IN if cplx else REAL_INEXACT_IN)
           + (LOW if name in _LOW_CORE else ()),
           unary_edges(edges), expected_dtype=float_out, tols=_TOLS.get(name, {}),
           differentiable=grad is not None,
           grad_samples=smooth_unary(*grad) if grad else None)
    for name, fn, cplx, edges, grad in UNARY
])

# ---- binary float functions --------------------------------------------------------------------
BINARY = [
    ("arctan2", np.arctan2, (0.5, 2)), ("atan2", np.arctan2, (0.5, 2)),
    ("logaddexp", np.logaddexp, (-2, 2)), ("logaddexp2", np.logaddexp2, (-2, 2)),
    ("hypot", np.hypot, (0.5, 2)), ("copysign", np.copysign, (0.5, 2)),
    ("nextafter", np.nextafter, (0.5, 2)), ("heaviside", np.heaviside, None),
]
register(*[
    OpInfo(name, fref(fn), REAL_INEXACT_IN, binary_edge_samples, nin=2, expected_dtype=float_out,
           differentiable=grad is not None, grad_samples=smooth_binary(*grad) if grad else None)
    for name, fn, grad in BINARY
])

# ---- rounding and predicates -------------------------------------------------------------------
_ROUND_EDGE = [0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.49999997, -0.0, np.inf, np.nan, 1e20]


def round_samples(rng, dtype):
    out = unary_edges(_ROUND_EDGE)(rng, dtype)
    x = rand(rng, (3, 4), dtype, low=-300, high=300)
    for d in (1, 2, -1, -2):
        out.append(Sample((x,), {"decimals": d}, name=f"[decimals={d}]"))
    out.append(Sample((cast_values([1.25, 2.675, -0.125, 15.0, 25.0, 1234.5], dtype),),
                      {"decimals": 1}, name="[ties decimals=1]"))
    return out


register(
    *[OpInfo(name, fn, REAL + (LOW if name == "floor" else ()), unary_edges(_ROUND_EDGE),
             **_NOT_DIFF)
      for name, fn in [("floor", np.floor), ("ceil", np.ceil), ("trunc", np.trunc),
                       ("fix", np.fix)]],
    OpInfo("round", _round_ref, INTS + FLOATS + COMPLEX + LOW, round_samples, **_NOT_DIFF),
    *[OpInfo(name, fn, ALL + (LOW if name == "isnan" else ()), unary_edges(_EDGE), **_NOT_DIFF)
      for name, fn in [("isfinite", np.isfinite), ("isinf", np.isinf), ("isnan", np.isnan)]],
    *[OpInfo(name, fn, REAL, unary_edges(_EDGE), **_NOT_DIFF)
      for name, fn in [("signbit", np.signbit), ("isneginf", np.isneginf),
                       ("isposinf", np.isposinf)]],
)

# ---- complex parts -----------------------------------------------------------------------------
_CEDGE = [complex(0, -0.0), complex(-0.0, 0), complex(np.nan, 1), complex(1, np.inf), -1 + 0j]


def complex_samples(rng, dtype):
    out = unary_edges(_EDGE)(rng, dtype)
    if np.dtype(dtype).kind == "c":
        out.append(Sample((np.array(_CEDGE, dtype),), name="[complex edges]"))
    return out


def angle_ref(z, deg=False):
    z = np.asarray(z)
    if z.dtype.kind in "biu":
        z = z.astype(np.float32)
    out = np.angle(z, deg=deg)
    want = z.real.dtype
    return np.asarray(out).astype(want)


def angle_samples(rng, dtype):
    out = complex_samples(rng, dtype)
    out.append(Sample((rand(rng, (3,), dtype),), {"deg": True}, name="[deg]"))
    return out


register(
    OpInfo("real", np.real, ALL, complex_samples),
    OpInfo("imag", np.imag, ALL, complex_samples, grad_samples=smooth_unary()),
    OpInfo("conj", lambda x: np.conjugate(x) if x.dtype.kind == "c" else x, ALL, complex_samples),
    OpInfo("conjugate", np.conjugate, (np.float32, np.complex64), complex_samples),
    OpInfo("angle", angle_ref, PROMOTED + FLOATS + COMPLEX, angle_samples,
           expected_dtype=lambda dt, s: np.dtype(np.float32) if np.dtype(dt).kind in "biu"
           else np.empty(0, dt).real.dtype, grad_samples=smooth_unary(0.5, 2)),
)

# ---- maximum / minimum / clip / where / nan_to_num -------------------------------------------
register(*[
    OpInfo(name, fn, REAL + (LOW if name in ("maximum", "minimum") else ()),
           binary_edge_samples, nin=2, hypothesis_shapes=True, grad_samples=smooth_binary())
    for name, fn in [("maximum", np.maximum), ("minimum", np.minimum), ("fmax", np.fmax),
                     ("fmin", np.fmin)]
])


def _bounds(dt):
    dt = np.dtype(dt)
    if dt == np.bool_:
        return False, True
    if dt.kind == "u":
        return 1, 2
    if dt.kind == "i":
        return -2, 2
    return -1.5, 1.0


def clip_ref(x, lo=None, hi=None):
    if lo is not None:
        x = np.maximum(x, np.asarray(lo, x.dtype) if not isinstance(lo, np.ndarray) else lo)
    if hi is not None:
        x = np.minimum(x, np.asarray(hi, x.dtype) if not isinstance(hi, np.ndarray) else hi)
    return x


def clip_samples(rng, dtype):
    dt = np.dtype(dtype)
    lo, hi = _bounds(dt)
    x = rand(rng, (3, 4), dt)
    out = [Sample((x, lo, hi), name="[static]"), Sample((x, None, hi), name="[static max]"),
           Sample((x, lo, None), name="[static min]"), Sample((x, hi, lo), name="[lo>hi]"),
           Sample((rand(rng, (0, 3), dt), lo, hi), name="[empty]"),
           Sample((rand(rng, (), dt), lo, hi), name="[0-d]"),
           Sample((x, rand(rng, (4,), dt), rand(rng, (3, 1), dt)), name="[arrays]"),
           Sample((x, rand(rng, (1, 4), dt), None), name="[array min]"),
           Sample((x, None, rand(rng, (4,), dt)), name="[array max]"),
           Sample((x, rand(rng, (4,), dt), hi), name="[array+scalar]")]
    ties = cast_values([-1.0, 0.0, 1.0, 2.0], dt)
    if ties.size:
        out.append(Sample((ties, ties, ties), name="[x==lo==hi]"))
        out.append(Sample((ties, ties.min(), ties.max()), name="[static ties]"))
    if dt.kind == "f" or dt in LOW_SET:
        out.append(Sample((x, np.nan, 1.0), name="[nan bound]"))
        out.append(Sample((np.array([-0.0, 0.0, np.nan, np.inf], dt), -0.0, 0.0), name="[zeros]"))
    return out


def clip_grad_samples(rng, dtype):
    x = rand(rng, (3, 4), dtype, special=False)
    return [Sample((x, -0.9, 1.1)),
            Sample((x, x - 1.0, rand(rng, (4,), dtype, low=5, high=6, special=False)))]


def where_samples(rng, dtype):
    dt = np.dtype(dtype)
    out = []
    for sc, sx, sy in [((), (), ()), ((5,), (5,), (5,)), ((3, 4), (4,), (3, 1)), ((0, 3), (3,), ()),
                       ((1,), (0,), (1,))]:
        out.append(Sample((rand(rng, sc, np.bool_), rand(rng, sx, dt), rand(rng, sy, dt)),
                          name=f"[{sc},{sx},{sy}]"))
    out.append(Sample((rand(rng, (4,), np.int8), rand(rng, (4,), dt), rand(rng, (4,), dt)),
                      name="[int condition]"))
    if dt != np.bool_:
        out.append(Sample((rand(rng, (2, 3), np.bool_), rand(rng, (2, 3), dt), 0), name="[y=0]"))
        out.append(Sample((rand(rng, (2, 3), np.bool_), 1, rand(rng, (3,), dt)), name="[x=1]"))
    return out


def nan_to_num_ref(x, copy=True, nan=0.0, posinf=None, neginf=None):
    if x.dtype.kind in "biu":
        return x
    if x.dtype in LOW_SET:
        fi = ml_dtypes.finfo(x.dtype)
        y = np.nan_to_num(x.astype(np.float32), nan=nan,
                          posinf=float(fi.max) if posinf is None else posinf,
                          neginf=float(fi.min) if neginf is None else neginf)
        return y.astype(x.dtype)
    return np.nan_to_num(x, nan=nan, posinf=posinf, neginf=neginf)


def nan_to_num_samples(rng, dtype):
    out = unary_edges(_EDGE)(rng, dtype)
    x = cast_values(_EDGE, dtype) if np.dtype(dtype).kind != "c" else np.array(
        [complex(np.nan, np.inf), complex(-np.inf, 1), 1 + 1j], dtype)
    out.append(Sample((x,), {"nan": 1.5, "posinf": 100.0, "neginf": -100.0}, name="[values]"))
    out.append(Sample((x,), {"posinf": 1e10}, name="[posinf rounds]"))
    return out


register(
    OpInfo("clip", clip_ref, REAL + LOW, clip_samples, grad_samples=clip_grad_samples),
    OpInfo("clamp", clip_ref, (np.int8, np.float32), clip_samples,
           grad_samples=clip_grad_samples),
    OpInfo("clamp_min", lambda x, lo: clip_ref(x, lo, None), (np.uint8, np.float32),
           lambda rng, dt: [Sample((rand(rng, (3, 4), dt), _bounds(dt)[0])),
                            Sample((rand(rng, (3, 4), dt), rand(rng, (4,), dt)))],
           grad_samples=smooth_binary()),
    OpInfo("clamp_max", lambda x, hi: clip_ref(x, None, hi), (np.int16, np.float32),
           lambda rng, dt: [Sample((rand(rng, (3, 4), dt), _bounds(dt)[1])),
                            Sample((rand(rng, (3, 4), dt), rand(rng, (4,), dt)))],
           grad_samples=smooth_binary()),
    OpInfo("where", np.where, ALL + LOW, where_samples, nin=3, hypothesis_shapes=True),
    OpInfo("nan_to_num", nan_to_num_ref, ALL + LOW, nan_to_num_samples,
           grad_samples=smooth_unary()),
)

# ---- compositions and the rest -----------------------------------------------------------------


def modf_samples(rng, dtype):
    out = unary_edges(_EDGE + [-2.0, 2.5, -2.5])(rng, dtype)
    return out


def ldexp_samples(rng, dtype):
    dt = np.dtype(dtype)
    e = np.array([0, 1, -1, 3, 200, -200, 5, -3], np.int32)
    x = cast_values([1.5, -1.5, 0.0, -0.0, 1.0, 1.0, np.inf, np.nan], dt)
    out = [Sample((x, e[:x.size]), name="[edges]"),
           Sample((rand(rng, (3, 4), dt), np.array([1, 2, 3, -4], np.int64)), name="[bcast]"),
           Sample((rand(rng, (0,), dt), np.int8(2)), name="[empty]"),
           Sample((rand(rng, (2,), dt), np.array([2, 70000], np.uint64)), name="[uint64]")]
    return out


def ldexp_ref(x, e):
    x = np.asarray(x)
    if x.dtype.kind in "biu":
        x = x.astype(np.float32)
    e = np.asarray(e)
    if e.dtype == np.uint64:
        e = np.minimum(e, np.uint64(2 ** 31))  # larger exponents overflow all the same
    out = np.ldexp(x.astype(np.float32) if x.dtype in LOW_SET else x, e.astype(np.int64))
    return np.asarray(out).astype(x.dtype)


def frexp_ref(x):
    x = np.asarray(x)
    if x.dtype.kind in "biu":
        x = x.astype(np.float32)
    m, e = np.frexp(x)
    return np.asarray(m).astype(x.dtype), np.asarray(e).astype(np.int32)


def isclose_samples(rng, dtype):
    dt = np.dtype(dtype)
    out = []
    for sa, sb in [((5,), (5,)), ((3, 4), (4,)), ((0,), ()), ((), ())]:
        a = rand(rng, sa, dt)
        b = (a + np.asarray(rand(rng, sa, dt, special=False)).astype(dt) * dt.type(1e-6)
             if dt.kind not in "biu" and sa == sb else rand(rng, sb, dt))
        out.append(Sample((a, np.asarray(b).astype(dt)), name=f"[{sa},{sb}]"))
    a, b = edge_pair(dt)
    out.append(Sample((a, b), name="[edges]"))
    out.append(Sample((a, b), {"equal_nan": True}, name="[equal_nan]"))
    if dt.kind in "fc":
        out.append(Sample((a, a * dt.type(1.001)), {"rtol": 1e-2, "atol": 0.0}, name="[rtol]"))
    return out


def _float_power_dtype(dt):
    """NumPy's documented float_power dtype: complex128 for complex operands, else float64
    (whatever the installed NumPy / ml_dtypes returns: ml_dtypes 0.7 keeps bfloat16)."""
    return np.dtype(np.complex128 if np.dtype(dt).kind == "c" else np.float64)


def _float_power_ref(a, b):
    a, b = np.asarray(a), np.asarray(b)
    t = _float_power_dtype(np.complex128 if "c" in (a.dtype.kind, b.dtype.kind) else np.float64)
    return np.float_power(a.astype(t), b.astype(t))


def isclose_ref(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype.kind in "biu":
        a, b = a.astype(np.float32), b.astype(np.float32)
    return np.isclose(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan)


def divmod_ref(a, b):
    return np.floor_divide(a, b), np.remainder(a, b)


register(
    OpInfo("modf", fref(np.modf), REAL_INEXACT_IN, modf_samples,
           grad_samples=smooth_unary(0.1, 0.9)),
    OpInfo("frexp", frexp_ref, REAL_INEXACT_IN + LOW, unary_edges(_EDGE + [1e-40, 3.0]),
           **_NOT_DIFF),
    OpInfo("ldexp", ldexp_ref, REAL_INEXACT_IN + LOW, ldexp_samples, expected_dtype=float_out,
           grad_samples=lambda rng, dt: [Sample((rand(rng, (3,), dt, special=False),
                                                 np.array([1, -2, 3], np.int32)))]),
    OpInfo("float_power", _float_power_ref, (np.bool_, np.int8, np.uint32) + FLOATS + COMPLEX,
           binary_edge_samples, nin=2, expected_dtype=lambda dt, s: _float_power_dtype(dt),
           grad_samples=smooth_binary(0.5, 2.0, -2.0, 2.0)),
    OpInfo("gcd", np.gcd, INTS, binary_edge_samples, nin=2, **_NOT_DIFF),
    OpInfo("lcm", np.lcm, INTS, binary_edge_samples, nin=2, **_NOT_DIFF),
    OpInfo("divmod", divmod_ref, REAL_NUM, binary_edge_samples, nin=2, **_NOT_DIFF),
    OpInfo("isclose", isclose_ref, PROMOTED + FLOATS + COMPLEX, isclose_samples,
           expected_dtype=bool_out, **_NOT_DIFF),
)
