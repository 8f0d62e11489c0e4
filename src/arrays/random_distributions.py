"""Distributions of ``starling.random``: compositions of random bits and public ops.

Every function takes the key first and is traceable (it only binds primitives). Floats are
built from the top bits of the stream without rounding:

* ``[0, 1)``: ``m * 2**-p`` with ``m`` the top ``p`` bits of a word and ``p`` the mantissa
  width of the dtype (23 float32, 52 float64, 10 float16, 7 bfloat16, 3/2/1 for float8/float4).
  This equals the mantissa trick ``bitcast(m | bits(1.0)) - 1`` exactly.
* ``(0, 1)`` ("open"): ``(m + 1/2) * 2**-p`` (``p`` = 23 or 52), symmetric around 1/2, used
  where a log or an inverse CDF must not see 0 or 1. Transcendental distributions compute in
  float32 (float64 for float64) and round to float16 / bfloat16 at the end.
"""
from __future__ import annotations

import math

import numpy as np

from ..core import casting, dtypes
from ..core.trace import Tracer
from . import numpy as snp
from .array import Array, wrap
from .convert import operand
from .ops.axes import normalize_axis
from .ops.convert_element_type import convert_element_type
from .ops.elementwise_family import broadcast_shapes
from .ops.special import ndtr, ndtri
from .random import (TAG_BITS, _check_key, _is_eager, _native, _random_bits, _random_bits_native,
                     _shape)

__all__ = [
    "uniform", "normal", "truncated_normal", "bernoulli", "categorical", "gumbel", "exponential",
    "laplace", "logistic", "cauchy",
]

_F32, _F64 = dtypes.float32, dtypes.float64
_UINT_OF_SIZE = {1: dtypes.uint8, 2: dtypes.uint16, 4: dtypes.uint32, 8: dtypes.uint64}


def _float_dtype(dtype, op):
    dt = dtypes.canonicalize(dtype)
    if not dtypes.is_floating(dt):
        raise TypeError(f"{op}: dtype must be a real floating dtype (float16, bfloat16, float32, "
                        f"float64, float8/float4), got {dt}")
    return dt


def _compute(dt):
    return _F64 if dt == _F64 else _F32


def _unit(k, shape, dt):
    """Uniform on the grid ``m * 2**-p`` in ``[0, 1)``, dtype ``dt`` (exact, no rounding)."""
    p = int(dtypes.finfo(dt).nmant)
    width = dt.itemsize * 8
    b = _random_bits(k, shape, _UINT_OF_SIZE[dt.itemsize], TAG_BITS)
    m = snp.right_shift(b, width - p)
    u = snp.multiply(convert_element_type(m, _compute(dt)), 2.0 ** -p)
    return convert_element_type(u, dt)


def _open_unit(k, shape, cd):
    """Uniform on ``(m + 1/2) * 2**-p``, strictly inside (0, 1); ``cd`` float32 or float64."""
    if cd == _F64:
        m = snp.right_shift(_random_bits(k, shape, dtypes.uint64, TAG_BITS), 12)
        p = 52
    else:
        m = snp.right_shift(_random_bits(k, shape, dtypes.uint32, TAG_BITS), 9)
        p = 23
    return snp.multiply(snp.add(convert_element_type(m, cd), 0.5), 2.0 ** -p)


# Bit patterns of 1.0: the mantissa trick ``bitcast(m | bits(1.0)) - 1 == m * 2**-p``.
_ONE_BITS = {_F32: np.uint32(0x3F800000), _F64: np.uint64(0x3FF0000000000000)}


def _uniform_eager(key_buf, shape, dt, bounds):
    # Eager fast path for concrete keys, in place on the fresh bits buffer; bit-identical to the
    # composed ops above (tests compare it with the staged program).
    b = _random_bits_native(key_buf, shape, _UINT_OF_SIZE[dt.itemsize], TAG_BITS)
    b >>= b.dtype.type(dt.itemsize * 8 - int(dtypes.finfo(dt).nmant))
    b |= _ONE_BITS[dt]
    u = b.view(dt)
    u -= dt.type(1)
    if bounds is not None:
        lo, hi = bounds
        u *= np.asarray(hi - lo, dt)
        u += lo
        np.minimum(u, _prev_float(hi, dt), out=u)
    return u


def _prev_float(v, dt):
    """The largest ``dt`` value strictly below the finite ``dt`` value ``v`` (NumPy scalar)."""
    x = np.asarray(v, dtype=dt)
    if x == 0:
        return np.asarray(-dtypes.finfo(dt).smallest_subnormal, dtype=dt)
    u = x.view(_UINT_OF_SIZE[dt.itemsize])
    return (u - 1 if x > 0 else u + 1).astype(u.dtype).view(dt)


def _is_py_real(x):
    return isinstance(x, (int, float, np.integer, np.floating)) and not isinstance(x, bool)


def _check_fits(op, shape, *operands):
    for x in operands:
        if not isinstance(x, (Array, Tracer)):
            continue
        try:
            ok = broadcast_shapes(op, tuple(shape), tuple(x.shape)) == tuple(shape)
        except ValueError:
            ok = False
        if not ok:
            raise ValueError(f"{op}: parameter shape {tuple(x.shape)} does not broadcast to the "
                             f"requested shape {tuple(shape)}")


def _check_concrete(op, ok, what, *values):
    """Validates array-valued parameters when they are concrete (eager); traced ones cannot be
    checked and follow the documented behaviour. Raises ValueError naming the op."""
    from ..core.trace import Tracer
    if any(isinstance(v, Tracer) for v in values):
        return
    arrs = [np.asarray(v, dtype=np.float64) if not hasattr(v, "dtype") or
            np.asarray(v).dtype.kind not in "iu" else np.asarray(v) for v in values]
    with np.errstate(invalid="ignore"):
        good = np.all(ok(*arrs))
    if not good:
        raise ValueError(f"{op}: {what} (got {', '.join(np.array2string(a) for a in arrs)})")


def uniform(key, shape=(), dtype=_F32, minval=0.0, maxval=1.0):
    """Uniform floats in ``[minval, maxval)``.

    Method: ``u = m * 2**-p`` from the top ``p`` mantissa bits (the mantissa trick, exact), then
    ``minval + u * (maxval - minval)`` clamped below ``maxval`` (rounding could reach it).

    Args:
        key: a key, uint32 ``(2,)``.
        shape: output shape ``(*shape)``; ``minval`` / ``maxval`` must broadcast to it.
        dtype: a real floating dtype (default float32).
        minval, maxval: finite bounds (scalars or arrays) with a finite ``maxval - minval``,
            rounded to ``dtype`` first.
    Returns:
        Array ``(*shape)`` of ``dtype``, every value in ``[minval, maxval)`` when
        ``minval < maxval`` (concrete array bounds are checked; traced ones cannot be, and
        where they are violated the value is unspecified).
    Raises:
        TypeError: a bad key or a non-floating dtype. ValueError: a negative dim, bounds that do
        not broadcast to ``shape``, or scalar bounds with ``minval >= maxval``.
    """
    k = _check_key(key, "uniform")
    dt = _float_dtype(dtype, "uniform")
    shape = _shape(shape, "uniform")
    if _is_py_real(minval) and _is_py_real(maxval):
        lo, hi = (np.asarray(casting.scalar(v, dt)) for v in (minval, maxval))
        if not lo < hi:
            raise ValueError(f"uniform: minval ({minval}) must be less than maxval ({maxval}) "
                             f"in {dt}")
        unit = lo == 0 and hi == 1
        if dt in _ONE_BITS and _native is not None and _is_eager(k):
            return wrap(_uniform_eager(k._buf, shape, dt, None if unit else (lo, hi)), False)
        u = _unit(k, shape, dt)
        if unit:
            return u
        r = snp.add(snp.multiply(u, wrap(np.asarray(hi - lo, dt), False)), wrap(lo, False))
        return snp.minimum(r, wrap(_prev_float(hi, dt), False))
    _check_concrete("uniform", lambda lo, hi: lo < hi, "minval must be less than maxval",
                    minval, maxval)
    u = _unit(k, shape, dt)
    lo = convert_element_type(operand(minval, "uniform"), dt)
    hi = convert_element_type(operand(maxval, "uniform"), dt)
    _check_fits("uniform", shape, lo, hi)
    r = snp.add(snp.multiply(u, snp.subtract(hi, lo)), lo)
    below = snp.nextafter(hi, snp.full_like(hi, -np.inf))
    return snp.broadcast_to(snp.maximum(lo, snp.minimum(r, below)), shape)


def normal(key, shape=(), dtype=_F32):
    """Standard normal samples (mean 0, variance 1).

    Method: Box-Muller (Box & Muller 1958): for ``n`` samples, ``ceil(n/2)`` pairs
    ``(u1, u2)`` give ``r = sqrt(-2 log u1)`` and the samples ``r cos(2 pi u2)`` (first half of
    the flat output) and ``r sin(2 pi u2)`` (second half). ``u1`` in ``(0, 1]`` uses all 32
    (float32) / 53 (float64) bits, so the tails reach about 6.7 (float32) / 8.6 (float64) sigma.
    float16 / bfloat16 are computed in float32 and rounded.

    Args:
        key: a key, uint32 ``(2,)``.
        shape: output shape ``(*shape)``.
        dtype: a real floating dtype (default float32).
    Returns:
        Array ``(*shape)`` of ``dtype``.
    Raises:
        TypeError: a bad key or a non-floating dtype. ValueError: a negative dim.
    """
    k = _check_key(key, "normal")
    dt = _float_dtype(dtype, "normal")
    shape = _shape(shape, "normal")
    cd = _compute(dt)
    n = math.prod(shape)
    m = (n + 1) // 2
    if cd == _F64:
        b = snp.right_shift(_random_bits(k, (2, m), dtypes.uint64, TAG_BITS), 11)
        scale = 2.0 ** -53
    else:
        b = _random_bits(k, (2, m), dtypes.uint32, TAG_BITS)
        scale = 2.0 ** -32
    u1 = snp.multiply(snp.add(convert_element_type(b[0], cd), 1.0), scale)   # (0, 1]
    theta = snp.multiply(convert_element_type(b[1], cd), 2.0 * math.pi * scale)  # [0, 2 pi]
    r = snp.sqrt(snp.multiply(snp.log(u1), -2.0))
    z = snp.concatenate([snp.multiply(r, snp.cos(theta)), snp.multiply(r, snp.sin(theta))])
    if 2 * m != n:
        z = z[:n]
    return convert_element_type(snp.reshape(z, shape), dt)


def truncated_normal(key, lower, upper, shape=None, dtype=_F32):
    """Standard normal samples conditioned on ``lower <= x <= upper``.

    Method: inverse CDF, computed in float64 for every dtype: ``x = ndtri(Phi(a) + U (Phi(b) -
    Phi(a)))`` with ``U`` uniform in (0, 1). Intervals lying mostly above 0 are mirrored to the
    lower tail first (``Phi`` of negative arguments keeps full relative precision), so bounds far
    in either tail work (up to about 37 sigma). ``Phi`` uses W. J. Cody's rational Chebyshev
    erfc (Math. Comp. 1969), ``ndtri`` M. J. Wichura's AS 241 PPND16 (Appl. Stat. 1988); see
    ``starling.scipy.special.ndtr`` / ``ndtri``. The result is clamped to
    ``[lower, upper]`` after rounding to ``dtype``.

    Args:
        key: a key, uint32 ``(2,)``.
        lower, upper: bounds (scalars or arrays; -inf / inf allowed).
        shape: output shape; default the broadcast shape of ``lower`` and ``upper``.
        dtype: a real floating dtype (default float32).
    Returns:
        Array ``(*shape)`` of ``dtype`` in ``[lower, upper]`` (bounds rounded to ``dtype``).
        Where array bounds have ``lower > upper`` the value is NaN.
    Raises:
        TypeError: a bad key or a non-floating dtype. ValueError: scalar bounds with
        ``lower > upper`` or bounds that do not broadcast to ``shape``.
    """
    k = _check_key(key, "truncated_normal")
    dt = _float_dtype(dtype, "truncated_normal")
    if _is_py_real(lower) and _is_py_real(upper) and not lower <= upper:
        raise ValueError(f"truncated_normal: lower ({lower}) must be <= upper ({upper})")
    a = convert_element_type(operand(lower, "truncated_normal"), _F64)
    b = convert_element_type(operand(upper, "truncated_normal"), _F64)
    if shape is None:
        shape = broadcast_shapes("truncated_normal", tuple(a.shape), tuple(b.shape))
    shape = _shape(shape, "truncated_normal")
    _check_fits("truncated_normal", shape, a, b)
    flip = snp.greater(a, snp.negative(b))  # a + b > 0, without inf - inf
    lo = snp.where(flip, snp.negative(b), a)
    hi = snp.where(flip, snp.negative(a), b)
    p_lo, p_hi = ndtr(lo), ndtr(hi)
    u = _open_unit(k, shape, _F64)
    x = ndtri(snp.add(p_lo, snp.multiply(u, snp.subtract(p_hi, p_lo))))
    x = snp.minimum(snp.maximum(x, lo), hi)
    x = snp.where(flip, snp.negative(x), x)
    x = convert_element_type(x, dt)
    lo_t, hi_t = convert_element_type(a, dt), convert_element_type(b, dt)
    x = snp.minimum(snp.maximum(x, lo_t), hi_t)
    bad = snp.greater(a, b)
    return snp.broadcast_to(snp.where(bad, snp.full_like(x, np.nan), x), shape)


def bernoulli(key, p=0.5, shape=None):
    """Booleans that are True with probability ``p``.

    Method: ``uniform(key, shape) < p`` (float32, or float64 for float64 ``p``), so ``p = 0``
    and ``p = 1`` are exact.

    Args:
        key: a key, uint32 ``(2,)``.
        p: probability (scalar or array). A Python scalar must be in [0, 1]; array values are
            checked when concrete (ValueError); traced ones cannot be: there ``p <= 0`` gives
            False, ``p >= 1`` True, NaN False.
        shape: output shape; default ``p``'s shape. ``p`` must broadcast to it.
    Returns:
        bool Array ``(*shape)``.
    Raises:
        TypeError: a bad key. ValueError: a Python scalar ``p`` outside [0, 1], or ``p`` that
        does not broadcast to ``shape``.
    """
    k = _check_key(key, "bernoulli")
    if _is_py_real(p) and not 0.0 <= p <= 1.0:
        raise ValueError(f"bernoulli: p must be in [0, 1], got {p}")
    if not _is_py_real(p):
        _check_concrete("bernoulli", lambda q: (q >= 0) & (q <= 1), "p must be in [0, 1]", p)
    p = operand(p, "bernoulli")
    cd = _F64 if p.dtype == _F64 else _F32
    p = convert_element_type(p, cd)
    shape = tuple(p.shape) if shape is None else _shape(shape, "bernoulli")
    _check_fits("bernoulli", shape, p)
    return snp.less(_unit(k, shape, cd), p)


def gumbel(key, shape=(), dtype=_F32):
    """Standard Gumbel samples (location 0, scale 1): ``-log(-log(u))``, ``u`` open uniform.

    The range is about [-2.8, 16.6] in float32 and [-3.6, 36.7] in float64 (tail probability
    beyond it ~6e-8, resp. 2e-16). float16 / bfloat16 are computed in float32.

    Returns:
        Array ``(*shape)`` of ``dtype``. Raises TypeError / ValueError like ``uniform``.
    """
    k = _check_key(key, "gumbel")
    dt = _float_dtype(dtype, "gumbel")
    u = _open_unit(k, _shape(shape, "gumbel"), _compute(dt))
    return convert_element_type(snp.negative(snp.log(snp.negative(snp.log(u)))), dt)


def exponential(key, shape=(), dtype=_F32):
    """Exponential samples with rate 1: ``-log(u)``, ``u`` open uniform (max ~16.6 in float32,
    ~36.7 in float64). Returns Array ``(*shape)`` of ``dtype``; errors as ``uniform``."""
    k = _check_key(key, "exponential")
    dt = _float_dtype(dtype, "exponential")
    u = _open_unit(k, _shape(shape, "exponential"), _compute(dt))
    return convert_element_type(snp.negative(snp.log(u)), dt)


def laplace(key, shape=(), dtype=_F32):
    """Laplace samples (location 0, scale 1) by the inverse CDF: with ``v = 2u - 1`` in
    (-1, 1), ``-sign(v) log(1 - |v|)``. Returns Array ``(*shape)`` of ``dtype``; errors as
    ``uniform``."""
    k = _check_key(key, "laplace")
    dt = _float_dtype(dtype, "laplace")
    v = snp.subtract(snp.multiply(_open_unit(k, _shape(shape, "laplace"), _compute(dt)), 2.0),
                     1.0)
    out = snp.multiply(snp.negative(snp.sign(v)), snp.log1p(snp.negative(snp.abs(v))))
    return convert_element_type(out, dt)


def logistic(key, shape=(), dtype=_F32):
    """Standard logistic samples by the inverse CDF ``log(u) - log(1 - u)``, ``u`` open
    uniform. Returns Array ``(*shape)`` of ``dtype``; errors as ``uniform``."""
    k = _check_key(key, "logistic")
    dt = _float_dtype(dtype, "logistic")
    u = _open_unit(k, _shape(shape, "logistic"), _compute(dt))
    return convert_element_type(snp.subtract(snp.log(u), snp.log1p(snp.negative(u))), dt)


def cauchy(key, shape=(), dtype=_F32):
    """Standard Cauchy samples by the inverse CDF ``tan(pi (u - 1/2))``, ``u`` open uniform.
    Returns Array ``(*shape)`` of ``dtype``; errors as ``uniform``."""
    k = _check_key(key, "cauchy")
    dt = _float_dtype(dtype, "cauchy")
    u = _open_unit(k, _shape(shape, "cauchy"), _compute(dt))
    return convert_element_type(snp.tan(snp.multiply(snp.subtract(u, 0.5), math.pi)), dt)


def categorical(key, logits, axis=-1, shape=None):
    """Samples category indices with probabilities ``softmax(logits)`` along ``axis``.

    Method: the Gumbel-max trick, ``argmax(logits + gumbel, axis)`` (Gumbel 1954; see e.g.
    Maddison, Tarlow, Minka, "A* Sampling", NeurIPS 2014). ``-inf`` logits are never drawn.

    Args:
        key: a key, uint32 ``(2,)``.
        logits: float array ``(*batch_pre, n, *batch_post)`` of unnormalised log-probabilities
            (integer logits are converted to float32).
        axis: the category axis of ``logits``.
        shape: output shape; default ``batch = logits.shape`` without ``axis``. ``batch`` must
            broadcast to it (extra leading dims draw independent samples).
    Returns:
        int64 Array ``(*shape)`` of indices in ``[0, n)``.
    Raises:
        TypeError: a bad key or complex logits. AxisError: ``axis`` out of range.
        ValueError: 0-d logits, ``n == 0``, or ``batch`` that does not broadcast to ``shape``.
    """
    k = _check_key(key, "categorical")
    logits = operand(logits, "categorical")
    dt = logits.dtype
    if dtypes.is_complex(dt):
        raise TypeError(f"categorical: logits must be real, got {dt}")
    if logits.ndim == 0:
        raise ValueError("categorical: logits must have at least one dim (the categories)")
    ax = normalize_axis("categorical", axis, logits.ndim)
    n = logits.shape[ax]
    if n == 0:
        raise ValueError(f"categorical: logits axis {axis} has no categories (size 0)")
    batch = tuple(logits.shape[:ax]) + tuple(logits.shape[ax + 1:])
    shape = batch if shape is None else _shape(shape, "categorical")
    try:
        ok = broadcast_shapes("categorical", shape, batch) == shape
    except ValueError:
        ok = False
    if not ok:
        raise ValueError(f"categorical: logits batch shape {batch} (logits shape "
                         f"{tuple(logits.shape)} without axis {axis}) does not broadcast to "
                         f"shape {shape}")
    cd = _F64 if dt == _F64 else _F32
    lg = convert_element_type(logits, cd)
    if ax != logits.ndim - 1:
        lg = snp.moveaxis(lg, ax, -1)
    noisy = snp.add(lg, gumbel(k, shape + (n,), cd))
    return snp.argmax(noisy, axis=-1)


def real_params(op, shape, cd, params):
    """Checks and broadcasts real distribution parameters.

    ``params``: ``(name, value, ok, rule)`` tuples; ``ok`` maps a float64 NumPy array to a
    bool array of valid entries and ``rule`` says what is valid (e.g. ``"a must be >= 0"``).
    Python scalars and concrete arrays are checked (ValueError naming ``op``); traced values
    cannot be, and each distribution documents what invalid entries give. ``shape`` None means
    the broadcast shape of the parameters. Returns ``(shape, [value as cd, broadcast to
    shape])``.
    """
    vals = []
    for name, v, ok, rule in params:
        if _is_py_real(v):
            with np.errstate(invalid="ignore"):
                good = bool(ok(np.float64(v)))
            if not good:
                raise ValueError(f"{op}: {rule}, got {name}={v}")
        elif not isinstance(v, Tracer):
            arr = np.asarray(v._buf if type(v) is Array else v)
            if arr.dtype.kind not in "biuf":
                raise TypeError(f"{op}: {name} must be real, got dtype {arr.dtype}")
            with np.errstate(invalid="ignore"):
                good = np.all(ok(arr.astype(np.float64)))
            if not good:
                raise ValueError(f"{op}: {rule}; {name} has invalid entries "
                                 f"({np.array2string(arr, threshold=8)})")
        x = operand(v, op)
        if dtypes.is_complex(x.dtype):
            raise TypeError(f"{op}: {name} must be real, got dtype {x.dtype}")
        vals.append(convert_element_type(x, cd))
    if shape is None:
        shape = broadcast_shapes(op, *(tuple(x.shape) for x in vals)) if vals else ()
    shape = _shape(shape, op)
    _check_fits(op, shape, *vals)
    return shape, [snp.broadcast_to(x, shape) for x in vals]
