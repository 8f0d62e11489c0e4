"""OpInfos of src/arrays/ops/arithmetic.py, and the sample helpers shared with opinfo/math.py.

References are NumPy on the same dtype. Where Starling follows JAX promotion instead of NumPy
(float-only ops on bool / integers give float32), the reference first casts such inputs to
float32 (``fref``) and ``expected_dtype`` says float32.
"""
import numpy as np

from tests.opinfo import OpInfo, Sample, register
from tests.opinfo.inputs import (
    ALL, COMPLEX, FLOATS, INTS, LOW, NUMERIC, binary_samples, rand, unary_samples,
)

F32 = np.dtype(np.float32)
BOOL = (np.bool_,)
REAL = BOOL + INTS + FLOATS            # no complex
REAL_NUM = INTS + FLOATS               # no bool, no complex
INTEGER = BOOL + INTS
# Float-only ops see bool / integers only through promotion to float32: a few suffice.
PROMOTED = (np.bool_, np.int8, np.uint16, np.int64)
INEXACT_IN = PROMOTED + FLOATS + COMPLEX
REAL_INEXACT_IN = PROMOTED + FLOATS


# ---- references --------------------------------------------------------------------------------

def as_float(a):
    """JAX promotion of one NumPy input of a float-only op: bool / integers -> float32."""
    if isinstance(a, (np.ndarray, np.generic)) and a.dtype.kind in "biu":
        return np.asarray(a).astype(np.float32)
    return a


def fref(fn):
    """Reference of a float-only op: NumPy on float32 copies of bool / integer inputs."""
    def ref(*args, **kwargs):
        return fn(*[as_float(a) for a in args], **kwargs)
    ref.__name__ = getattr(fn, "__name__", "ref")
    return ref


def float_out(dt, sample):
    dt = np.dtype(dt)
    return F32 if dt.kind in "biu" else dt


def bool_out(dt, sample):
    return np.dtype(np.bool_)


# ---- samples -----------------------------------------------------------------------------------

def cast_values(vals, dt):
    """``vals`` (Python floats) as an array of ``dt``; integer dtypes keep only the values that
    are integral and in range, bool the truth values."""
    dt = np.dtype(dt)
    if dt == np.bool_:
        return np.array([bool(v) for v in vals if v == v], dt)
    if dt.kind in "iu":
        info = np.iinfo(dt)
        keep = [int(v) for v in vals
                if np.isfinite(v) and float(v).is_integer() and info.min <= v <= info.max]
        return np.array(keep, dt)
    return np.array(vals, np.float64).astype(dt)


def int_edge_pair(dt):
    """Overflow, INT_MIN / -1 and division by zero for integer dtype ``dt``."""
    dt = np.dtype(dt)
    info = np.iinfo(dt)
    if dt.kind == "u":
        a = [info.max, info.max, 0, 7, 9, 0, 3, 1]
        b = [1, info.max, 0, 0, 2, 1, 2, info.max]
    else:
        a = [info.max, info.min, info.min, 7, -7, 0, 3, -1]
        b = [1, -1, 0, 0, 2, 0, -2, info.min]
    return np.array(a, dt), np.array(b, dt)


_FA = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 5.5, -5.5, 0.0, 2.0, -0.0]
_FB = [0.0, 0.0, np.inf, 2.0, 1.0, -0.0, np.inf, -2.0, 2.0, -np.inf, 2.0, np.nan]
_CA = [0, 1 + 1j, complex(np.nan, 0), complex(np.inf, 0), -1j, 2 - 3j]
_CB = [0, 1 - 1j, 1, 1, 0, 1 + 2j]


def edge_pair(dt):
    """Hand-picked operand pairs of dtype ``dt``: ties, signed zeros, inf / nan, overflow."""
    dt = np.dtype(dt)
    if dt == np.bool_:
        return np.array([True, True, False, False]), np.array([True, False, True, False])
    if dt.kind in "iu":
        return int_edge_pair(dt)
    if dt.kind == "c":
        return np.array(_CA, dt), np.array(_CB, dt)
    return np.array(_FA).astype(dt), np.array(_FB).astype(dt)


def binary_edge_samples(rng, dtype, **kw):
    a, b = edge_pair(dtype)
    return binary_samples(rng, dtype, **kw) + [Sample((a, b), name="[edges]")]


def unary_edges(*edges, **kw):
    """Samples: the shared unary shapes plus one sample per list of edge values."""
    def samples(rng, dtype):
        out = unary_samples(rng, dtype, **kw)
        for i, vals in enumerate(edges):
            x = cast_values(vals, dtype)
            if x.size:
                out.append(Sample((x,), name=f"[edge{i}]"))
        if np.dtype(dtype).kind in "iu":
            info = np.iinfo(dtype)
            out.append(Sample((np.array([info.min, info.max, 0, 1], dtype),), name="[limits]"))
        return out
    return samples


def smooth_unary(low=-2.0, high=2.0):
    """check_grads samples away from kinks / domain edges: values in ``[low, high]``."""
    def samples(rng, dtype):
        return [Sample((rand(rng, s, dtype, low=low, high=high, special=False),), name=f"[{s}]")
                for s in [(3,), (2, 3)]]
    return samples


def smooth_binary(lo1=-2.0, hi1=2.0, lo2=None, hi2=None):
    lo2 = lo1 if lo2 is None else lo2
    hi2 = hi1 if hi2 is None else hi2

    def samples(rng, dtype):
        return [Sample((rand(rng, a, dtype, low=lo1, high=hi1, special=False),
                        rand(rng, b, dtype, low=lo2, high=hi2, special=False)), name=f"[{a},{b}]")
                for a, b in [((3,), (3,)), ((2, 3), (3,))]]
    return samples


# ---- integer power reference (independent of NumPy's power) ------------------------------------

def _int_pow_scalar(a, b, bits, signed):
    if b < 0:
        if a == 1:
            return 1
        if a == -1:
            return -1 if b % 2 else 1
        return 0
    r = pow(a, b, 1 << bits)
    if signed and r >= 1 << (bits - 1):
        r -= 1 << bits
    return r


def pow_ref(a, b):
    if a.dtype.kind not in "iu":
        return np.power(a, b)
    bits, signed = a.dtype.itemsize * 8, a.dtype.kind == "i"
    a2, b2 = np.broadcast_arrays(a, b)
    out = [_int_pow_scalar(int(x), int(y), bits, signed) for x, y in zip(a2.ravel(), b2.ravel())]
    return np.array(out, dtype=np.int64 if signed else np.uint64).astype(a.dtype).reshape(a2.shape)


def shift_samples(rng, dtype):
    dt = np.dtype(dtype)
    bits = dt.itemsize * 8
    counts = [0, 1, bits - 1, bits, bits + 1] + ([-1] if dt.kind == "i" else [])
    info = np.iinfo(dt)
    a = np.array([1, info.max, info.min, 3, 5, 7][:len(counts)], dt)
    b = np.array(counts, dt)
    out = [Sample((rand(rng, s1, dt), rand(rng, s2, dt, low=0, high=bits - 1, special=False)),
                  name=f"[{s1},{s2}]") for s1, s2 in [((5,), (5,)), ((3, 4), (4,)), ((0,), ())]]
    return out + [Sample((a, b), name="[counts]")]


# ---- registry ----------------------------------------------------------------------------------

_NOT_DIFF = dict(differentiable=False)

register(
    OpInfo("add", np.add, ALL + LOW, binary_edge_samples, nin=2, hypothesis_shapes=True,
           grad_samples=smooth_binary()),
    OpInfo("subtract", np.subtract, NUMERIC + LOW, binary_edge_samples, nin=2,
           hypothesis_shapes=True, grad_samples=smooth_binary()),
    OpInfo("multiply", np.multiply, ALL + LOW, binary_edge_samples, nin=2,
           hypothesis_shapes=True, grad_samples=smooth_binary()),
    OpInfo("divide", fref(np.true_divide), INEXACT_IN + LOW, binary_edge_samples, nin=2,
           expected_dtype=float_out, hypothesis_shapes=True,
           grad_samples=smooth_binary(-2, 2, 0.5, 3)),
    OpInfo("true_divide", fref(np.true_divide), (np.int32, np.float32), binary_edge_samples,
           nin=2, expected_dtype=float_out, grad_samples=smooth_binary(-2, 2, 0.5, 3)),
    OpInfo("floor_divide", np.floor_divide, REAL_NUM, binary_edge_samples, nin=2, **_NOT_DIFF),
    OpInfo("remainder", np.remainder, REAL_NUM, binary_edge_samples, nin=2,
           grad_samples=smooth_binary(0.1, 0.4, 1.0, 2.0)),
    OpInfo("mod", np.mod, (np.int16, np.float32), binary_edge_samples, nin=2,
           grad_samples=smooth_binary(0.1, 0.4, 1.0, 2.0)),
    OpInfo("fmod", np.fmod, REAL_NUM, binary_edge_samples, nin=2,
           grad_samples=smooth_binary(0.1, 0.4, 1.0, 2.0)),
    OpInfo("pow", pow_ref, NUMERIC, binary_edge_samples, nin=2, tols={"complex64": (1e-4, 1e-5)},
           grad_samples=smooth_binary(0.5, 2.0, -2.0, 2.0)),
    OpInfo("power", pow_ref, (np.int8, np.uint8, np.float32), binary_edge_samples, nin=2,
           grad_samples=smooth_binary(0.5, 2.0, -2.0, 2.0)),
    OpInfo("negative", np.negative, NUMERIC + LOW, unary_edges([0.0, -0.0, np.inf, np.nan])),
    OpInfo("positive", np.positive, NUMERIC, unary_samples),
    OpInfo("abs", np.absolute, ALL + LOW, unary_edges([0.0, -0.0, -np.inf, np.nan, -2.5]),
           grad_samples=smooth_unary(0.5, 2.0)),
    OpInfo("absolute", np.absolute, (np.int8, np.float32, np.complex64), unary_samples,
           grad_samples=smooth_unary(0.5, 2.0)),
    OpInfo("sign", np.sign, NUMERIC, unary_edges([0.0, -0.0, np.inf, -np.inf, np.nan, -3.0]),
           **_NOT_DIFF),
    OpInfo("reciprocal", fref(np.reciprocal), INEXACT_IN, unary_edges([0.0, -0.0, np.inf, 4.0]),
           expected_dtype=float_out, grad_samples=smooth_unary(0.5, 2.0)),
    OpInfo("square", np.square, NUMERIC, unary_edges([0.0, -0.0, 200.0, -1e20, np.nan])),
    *[OpInfo(name, fn, ALL + LOW if name in ("equal", "not_equal") else REAL + LOW,
             binary_edge_samples, nin=2, hypothesis_shapes=True, **_NOT_DIFF)
      for name, fn in [("equal", np.equal), ("not_equal", np.not_equal), ("less", np.less),
                       ("less_equal", np.less_equal), ("greater", np.greater),
                       ("greater_equal", np.greater_equal)]],
    *[OpInfo(name, fn, ALL, binary_edge_samples, nin=2, **_NOT_DIFF)
      for name, fn in [("logical_and", np.logical_and), ("logical_or", np.logical_or),
                       ("logical_xor", np.logical_xor)]],
    OpInfo("logical_not", np.logical_not, ALL, unary_edges([0.0, -0.0, np.nan, 2.0]),
           **_NOT_DIFF),
    *[OpInfo(name, fn, INTEGER, binary_edge_samples, nin=2, **_NOT_DIFF)
      for name, fn in [("bitwise_and", np.bitwise_and), ("bitwise_or", np.bitwise_or),
                       ("bitwise_xor", np.bitwise_xor)]],
    *[OpInfo(name, np.invert, INTEGER, unary_samples, **_NOT_DIFF)
      for name in ("bitwise_invert", "bitwise_not", "invert")],
    *[OpInfo(name, fn, INTS, shift_samples, nin=2, **_NOT_DIFF)
      for name, fn in [("bitwise_left_shift", np.left_shift),
                       ("bitwise_right_shift", np.right_shift), ("left_shift", np.left_shift),
                       ("right_shift", np.right_shift)]],
)


