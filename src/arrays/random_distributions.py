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
    ``ndtr`` / ``ndtri`` below. The result is clamped to ``[lower, upper]`` after
    rounding to ``dtype``.

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


# ---- special functions (float64 compositions; used by truncated_normal) ------------------------
# W. J. Cody, "Rational Chebyshev approximations for the error function", Math. Comp. 23 (1969)
# 631-637: erf on |x| <= 0.46875, erfc on 0.46875 < |x| <= 4 and |x| > 4 (coefficients of his
# CALERF, relative error below 1e-16 on each interval).
_ERF_A = (3.1611237438705656, 113.864154151050156, 377.485237685302021, 3209.37758913846947,
          0.185777706184603153)
_ERF_B = (23.6012909523441209, 244.024637934444173, 1282.61652607737228, 2844.23683343917062)
_ERFC_C = (0.564188496988670089, 8.88314979438837594, 66.1191906371416295, 298.635138197400131,
           881.95222124176909, 1712.04761263407058, 2051.07837782607147, 1230.33935479799725,
           2.15311535474403846e-8)
_ERFC_D = (15.7449261107098347, 117.693950891312499, 537.181101862009858, 1621.38957456669019,
           3290.79923573345963, 4362.61909014324716, 3439.36767414372164, 1230.33935480374942)
_ERFC_P = (0.305326634961232344, 0.360344899949804439, 0.125781726111229246,
           0.0160837851487422766, 6.58749161529837803e-4, 0.0163153871373020978)
_ERFC_Q = (2.56852019228982242, 1.87295284992346047, 0.527905102951428412,
           0.0605183413124413191, 0.00233520497626869185)
_INV_SQRT_PI = 0.56418958354775628695


def _cody_ratio(x, num, den, lead_num):
    # Cody's nested form: ((lead_num x + num0) x + num1) x ... / ((x + den0) x + den1) x ...
    xnum = snp.multiply(x, lead_num)
    xden = x
    for a, b in zip(num, den):
        xnum = snp.multiply(snp.add(xnum, a), x)
        xden = snp.multiply(snp.add(xden, b), x)
    return xnum, xden


def _exp_neg_sq(y):
    # exp(-y*y) without the rounding error of y*y: y = t + d with t = floor(16 y) / 16 exact.
    t = snp.divide(snp.floor(snp.multiply(y, 16.0)), 16.0)
    d = snp.multiply(snp.subtract(y, t), snp.add(y, t))
    return snp.multiply(snp.exp(snp.negative(snp.multiply(t, t))), snp.exp(snp.negative(d)))


def erfc(x):
    """Complementary error function of float64 ``x`` (any shape), by Cody's rational Chebyshev
    approximations (relative error ~1e-16; ``erfc(x) = 2 - erfc(-x)`` for x < 0)."""
    y = snp.minimum(snp.abs(x), 30.0)  # erfc(30) underflows to 0: avoids inf - inf below
    ysq = snp.multiply(y, y)
    num, den = _cody_ratio(ysq, _ERF_A[:3], _ERF_B[:3], _ERF_A[4])
    erf_small = snp.divide(snp.multiply(x, snp.add(num, _ERF_A[3])), snp.add(den, _ERF_B[3]))
    num, den = _cody_ratio(y, _ERFC_C[:7], _ERFC_D[:7], _ERFC_C[8])
    mid = snp.divide(snp.add(num, _ERFC_C[7]), snp.add(den, _ERFC_D[7]))
    z = snp.divide(1.0, snp.maximum(ysq, 16.0))
    num, den = _cody_ratio(z, _ERFC_P[:4], _ERFC_Q[:4], _ERFC_P[5])
    tail = snp.multiply(z, snp.divide(snp.add(num, _ERFC_P[4]), snp.add(den, _ERFC_Q[4])))
    tail = snp.divide(snp.subtract(_INV_SQRT_PI, tail), snp.maximum(y, 4.0))
    big = snp.multiply(_exp_neg_sq(y), snp.where(snp.less_equal(y, 4.0), mid, tail))
    big = snp.where(snp.less(x, 0.0), snp.subtract(2.0, big), big)
    out = snp.where(snp.less_equal(y, 0.46875), snp.subtract(1.0, erf_small), big)
    return snp.where(snp.isnan(x), x, out)


def ndtr(x):
    """Standard normal CDF ``Phi(x) = erfc(-x / sqrt 2) / 2`` of float64 ``x``."""
    return snp.multiply(erfc(snp.multiply(x, -0.70710678118654752440)), 0.5)


# M. J. Wichura, "Algorithm AS 241: The percentage points of the normal distribution", Applied
# Statistics 37 (1988) 477-484, PPND16 (relative error ~1e-16): a degree-7 rational function in
# three regions (|p - 1/2| <= 0.425; r = sqrt(-log min(p, 1-p)) <= 5; r > 5).
_AS241_A = (3.3871328727963666080, 1.3314166789178437745e2, 1.9715909503065514427e3,
            1.3731693765509461125e4, 4.5921953931549871457e4, 6.7265770927008700853e4,
            3.3430575583588128105e4, 2.5090809287301226727e3)
_AS241_B = (1.0, 4.2313330701600911252e1, 6.8718700749205790830e2, 5.3941960214247511077e3,
            2.1213794301586595867e4, 3.9307895800092710610e4, 2.8729085735721942674e4,
            5.2264952788528545610e3)
_AS241_C = (1.42343711074968357734, 4.63033784615654529590, 5.76949722146069140550,
            3.64784832476320460504, 1.27045825245236838258, 2.41780725177450611770e-1,
            2.27238449892691845833e-2, 7.74545014278341407640e-4)
_AS241_D = (1.0, 2.05319162663775882187, 1.67638483018380384940, 6.89767334985100004550e-1,
            1.48103976427480074590e-1, 1.51986665636164571966e-2, 5.47593808499534494600e-4,
            1.05075007164441684324e-9)
_AS241_E = (6.65790464350110377720, 5.46378491116411436990, 1.78482653991729133580,
            2.96560571828504891230e-1, 2.65321895265761230930e-2, 1.24266094738807843860e-3,
            2.71155556874348757815e-5, 2.01033439929228813265e-7)
_AS241_F = (1.0, 5.99832206555887937690e-1, 1.36929880922735805310e-1,
            1.48753612908506148525e-2, 7.86869131145613259100e-4, 1.84631831751005468180e-5,
            1.42151175831644588870e-7, 2.04426310338993978564e-15)


def _horner(x, coeffs):
    # coeffs in increasing degree: c0 + c1 x + ... (evaluated from the top).
    acc = snp.multiply(x, coeffs[-1])
    for c in coeffs[-2:0:-1]:
        acc = snp.multiply(snp.add(acc, c), x)
    return snp.add(acc, coeffs[0])


def _rational(x, num, den):
    return snp.divide(_horner(x, num), _horner(x, den))


def ndtri(p):
    """Inverse of the standard normal CDF for float64 ``p`` (Wichura's AS 241 PPND16).

    ``ndtri(0) = -inf``, ``ndtri(1) = inf``, NaN outside [0, 1].
    """
    q = snp.subtract(p, 0.5)
    central = snp.multiply(q, _rational(snp.subtract(0.180625, snp.multiply(q, q)),
                                        _AS241_A, _AS241_B))
    lower = snp.less(q, 0.0)
    r = snp.where(lower, p, snp.subtract(1.0, p))
    r = snp.sqrt(snp.negative(snp.log(snp.maximum(r, 1e-300))))
    near = _rational(snp.subtract(r, 1.6), _AS241_C, _AS241_D)
    far = _rational(snp.subtract(r, 5.0), _AS241_E, _AS241_F)
    tail = snp.where(snp.less_equal(r, 5.0), near, far)
    out = snp.where(snp.less_equal(snp.abs(q), 0.425), central,
                    snp.where(lower, snp.negative(tail), tail))
    out = snp.where(snp.less_equal(p, 0.0), -np.inf, snp.where(snp.greater_equal(p, 1.0),
                                                                  np.inf, out))
    bad = snp.logical_or(snp.logical_or(snp.less(p, 0.0), snp.greater(p, 1.0)), snp.isnan(p))
    return snp.where(bad, np.nan, out)
