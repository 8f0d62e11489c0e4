"""Shared sample-input generators for OpInfos (hard cases included)."""
from __future__ import annotations

import ml_dtypes
import numpy as np

from tests.opinfo import Sample

FLOATS = (np.float16, ml_dtypes.bfloat16, np.float32, np.float64)
LOW = (ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2, ml_dtypes.float4_e2m1fn)
COMPLEX = (np.complex64, np.complex128)
SINTS = (np.int8, np.int16, np.int32, np.int64)
UINTS = (np.uint8, np.uint16, np.uint32, np.uint64)
INTS = SINTS + UINTS
NUMERIC = INTS + FLOATS + COMPLEX
ALL = (np.bool_,) + NUMERIC
INEXACT = FLOATS + COMPLEX

SHAPES = [(), (1,), (0,), (5,), (3, 4), (2, 1, 3), (0, 3)]
BROADCAST_PAIRS = [((), ()), ((5,), ()), ((), (5,)), ((3, 4), (4,)), ((2, 1, 3), (4, 1)),
                   ((1,), (0,)), ((0, 3), (1, 3)), ((3, 1), (1, 3))]


def rand(rng, shape, dtype, *, low=-3, high=3, special=True):
    """Random array of ``dtype``; floats include NaN, ±inf and -0.0 when ``special`` and size>=6."""
    dt = np.dtype(dtype)
    if dt == np.bool_:
        return rng.random(shape) < 0.5
    if dt.kind in "iu":
        info = np.iinfo(dt)
        lo, hi = (0 if dt.kind == "u" else max(low, info.min)), min(high, info.max)
        x = rng.integers(lo, hi + 1, size=shape).astype(dt)
        if special and x.size >= 4:
            flat = x.reshape(-1)
            flat[0], flat[1] = info.max, info.min
        return x
    if dt.kind == "c":
        parts = rng.uniform(low, high, size=shape) + 1j * rng.uniform(low, high, size=shape)
        x = parts.astype(dt)
        if special and x.size >= 6:
            flat = x.reshape(-1)
            flat[0] = complex(np.nan, 1)
            flat[1] = complex(np.inf, 0)
        return x
    x = rng.uniform(low, high, size=shape).astype(dt)
    if special and x.size >= 6:
        flat = x.reshape(-1)
        flat[0], flat[1], flat[2], flat[3] = np.nan, np.inf, -np.inf, -0.0
    return x


def unary_samples(rng, dtype, **kw):
    return [Sample((rand(rng, s, dtype, **kw),), name=f"[{s}]") for s in SHAPES]


def binary_samples(rng, dtype, **kw):
    out = [Sample((rand(rng, a, dtype, **kw), rand(rng, b, dtype, **kw)), name=f"[{a},{b}]")
           for a, b in BROADCAST_PAIRS]
    return out
