"""``starling.scipy.ndimage``: interpolation of an N-d array at arbitrary coordinates
(``map_coordinates``, orders 0 and 1, as JAX's ``jax.scipy.ndimage``), with SciPy's values.

SciPy (ni_interpolation.c) first maps an out-of-range coordinate into the array by the mode
(with its exact floating-point steps), then takes the neighbouring samples, extending the
array by the mode where a neighbour is still outside. This module does the same steps with
array operations, so values match SciPy's to rounding, including its corner cases (order 0
rounds half up after the mapping; "wrap" has period ``n - 1``, "grid-wrap" period ``n``).
"""
from __future__ import annotations

import numpy as np

from ...core import dtypes
from .. import numpy as snp
from ..convert import operand

__all__ = ["map_coordinates"]

_MODES = ("constant", "nearest", "wrap", "mirror", "reflect", "grid-constant", "grid-wrap",
          "grid-mirror")


def _map(x, n, mode):
    """SciPy's ``map_coordinate``: an out-of-range coordinate moved into the array (slope
    +-1 or 0: differentiable almost everywhere). "constant" / "grid-constant" are untouched
    (handled by masks)."""
    if mode in ("constant", "grid-constant"):
        return x
    if mode == "nearest" or n == 1:
        return snp.clip(x, 0.0, float(n - 1)) if mode == "nearest" else x * 0.0
    t = snp.trunc
    if mode == "mirror":
        s2 = 2.0 * n - 2.0
        neg = s2 * t(-x / s2) + x
        neg = snp.where(neg <= 1.0 - n, neg + s2, -neg)
        pos = x - s2 * t(x / s2)
        pos = snp.where(pos >= n, s2 - pos, pos)
    elif mode == "reflect":
        s2 = 2.0 * n
        neg = snp.where(x < -s2, s2 * t(-x / s2) + x, x)
        neg = snp.where(neg < -n, neg + s2, -neg - 1.0)
        pos = x - s2 * t(x / s2)
        pos = snp.where(pos >= n, s2 - pos - 1.0, pos)
    elif mode == "wrap":
        sz = n - 1.0
        neg = x + sz * (t(-x / sz) + 1.0)
        pos = x - sz * t(x / sz)
    else:   # grid-wrap
        neg = x + n * (t((-1.0 - x) / n) + 1.0)
        pos = x - n * t(x / n)
    return snp.where(x < 0, neg, snp.where(x > n - 1.0, pos, x))


def _extend(i, n, mode):
    """The sample index used for the integer (float-valued) index ``i``, and whether it is
    inside (False only for "grid-constant", where the sample is ``cval``)."""
    if n == 1:
        return i * 0.0, (i == 0) if mode == "grid-constant" else None
    if mode == "mirror":
        m = snp.remainder(i, 2.0 * n - 2.0)
        return snp.where(m >= n, 2.0 * n - 2.0 - m, m), None
    if mode in ("reflect", "grid-mirror"):
        m = snp.remainder(i, 2.0 * n)
        return snp.where(m >= n, 2.0 * n - 1.0 - m, m), None
    if mode == "grid-wrap":
        return snp.remainder(i, float(n)), None
    inside = (i >= 0) & (i <= n - 1.0) if mode == "grid-constant" else None
    return snp.clip(i, 0.0, float(n - 1)), inside


def _axis_terms(x, n, mode, order):
    """Per axis: ``[(index, weight, inside)]`` of the 1 (order 0) or 2 (order 1) samples, and
    the "constant"-mode mask of coordinates outside ``[0, n - 1]``."""
    outside = ((x < 0) | (x > n - 1.0)) if mode == "constant" else None
    c = _map(x, n, "reflect" if mode == "grid-mirror" else mode)   # SciPy: the same mode
    if order == 0:
        idx, inside = _extend(snp.floor(c + 0.5), n, mode)
        return [(idx, None, inside)], outside
    lo = snp.floor(c)
    frac = c - lo
    i0, in0 = _extend(lo, n, mode)
    i1, in1 = _extend(lo + 1.0, n, mode)
    return [(i0, 1.0 - frac, in0), (i1, frac, in1)], outside


def map_coordinates(input, coordinates, order, mode="constant", cval=0.0):  # noqa: A002
    """Values of ``input`` at the given (fractional) coordinates by nearest-neighbour
    (``order=0``) or multilinear (``order=1``) interpolation (``scipy.ndimage.map_coordinates``;
    JAX's ``jax.scipy.ndimage.map_coordinates``).

    Args:
        input: array ``(*dims)`` with ``d = len(dims) >= 1``; real or complex (integers: the
            result is rounded half away from zero back to the integer dtype).
        coordinates: a sequence of ``d`` arrays broadcasting to ``(*out)``, or one array
            ``(d, *out)``: the index along each axis of ``input``; floating or integer.
        order: 0 or 1 (SciPy's higher-order splines need a prefilter: NotImplementedError).
        mode: how points outside ``[0, n - 1]`` are sampled, as SciPy: "constant" (``cval``
            outside, no interpolation past the edges), "grid-constant" (the array extended
            by ``cval``, interpolated), "nearest" (the edge value), "mirror" (``d c b | a b c
            d | c b a``), "reflect" / "grid-mirror" (``d c b a | a b c d | d c b a``),
            "wrap" (period ``n - 1``: the edge samples coincide) or "grid-wrap" (period
            ``n``). JAX's "wrap" is SciPy's "grid-wrap", and JAX's "constant" SciPy's
            "grid-constant"; this function follows SciPy.
        cval: the value outside for the constant modes (a Python number).
    Returns:
        Array ``(*out)`` of ``input``'s dtype.
    Raises:
        ValueError: a number of coordinate arrays other than ``input.ndim``, a bad ``mode``,
            or 0-d ``input``. NotImplementedError: ``order`` other than 0 or 1.
        TypeError: complex coordinates.

    Method: per axis the mode's map of the coordinate and the 1 or 2 neighbouring indices
    (floor / round half up), one flat ``take`` per corner of the ``2**d`` (order 1) or 1
    (order 0) samples, weighted by products of ``1 - t`` and ``t``. Differentiable in
    ``input`` (a scatter-add) and, for order 1, in the coordinates (the weights; zero where
    "nearest" clamps, and at sample points the derivative of the right-hand piece).
    """
    op = "map_coordinates"
    if order not in (0, 1):
        raise NotImplementedError(f"{op}: only order 0 and 1 are supported, got {order!r}")
    if mode not in _MODES:
        raise ValueError(f"{op}: mode must be one of {_MODES}, got {mode!r}")
    x = operand(input, op)
    if x.ndim == 0:
        raise ValueError(f"{op}: input must be at least 1-D, got a 0-d array")
    coords = [operand(c, op) for c in coordinates] if isinstance(coordinates, (list, tuple)) \
        else [operand(coordinates, op)[i] for i in range(operand(coordinates, op).shape[0])]
    if len(coords) != x.ndim:
        raise ValueError(f"{op}: expected {x.ndim} coordinate arrays (one per axis of input "
                         f"{tuple(x.shape)}), got {len(coords)}")
    if any(dtypes.is_complex(c.dtype) for c in coords):
        raise TypeError(f"{op}: coordinates must be real, got complex")
    real_dt = x.real.dtype if dtypes.is_complex(x.dtype) else (
        x.dtype if dtypes.is_inexact(x.dtype) else snp.result_type(*[c.dtype for c in coords],
                                                                   snp.float32))
    if not dtypes.is_inexact(real_dt):
        real_dt = snp.float32
    coords = snp.broadcast_arrays(*[c.astype(real_dt) for c in coords])
    terms, outside = zip(*[_axis_terms(c, n, mode, order) for c, n in zip(coords, x.shape)])
    strides = np.cumprod((x.shape[1:] + (1,))[::-1])[::-1]
    flat = snp.ravel(x if dtypes.is_inexact(x.dtype) else x.astype(real_dt))
    total = 0.0
    for corner in np.ndindex(*(len(t) for t in terms)):
        index, weight, inside = 0, None, None
        for axis, k in enumerate(corner):
            i, w, ok = terms[axis][k]
            index = index + i.astype(snp.int64) * int(strides[axis])
            weight = w if weight is None else (weight if w is None else weight * w)
            inside = ok if inside is None else (inside if ok is None else inside & ok)
        sample = snp.take(flat, index)
        if inside is not None:
            sample = snp.where(inside, sample, cval)
        total = total + (sample if weight is None else sample * weight)
    for mask in outside:
        if mask is not None:
            total = snp.where(mask, cval, total)
    if dtypes.is_inexact(x.dtype):
        return snp.asarray(total).astype(x.dtype)
    return (snp.sign(total) * snp.floor(snp.abs(total) + 0.5)).astype(x.dtype)
