"""One-dimensional piecewise-linear interpolation: ``interp``.

A composition of searchsorted, take and arithmetic: it traces, vmaps and differentiates in
``x``, ``xp`` and ``fp`` (the derivative in ``x`` is the slope of the segment ``x`` falls in,
from the right at the sample points, as the segment choice is).
"""
from __future__ import annotations

from ...core import dtypes
from ..convert import operand
from .elementwise_family import promote_operands
from .reductions import _ns

__all__ = ["interp"]


def _interp_real(x, xp, fp, j, left, right, nan_x):
    """NumPy's formula on the segment ``[xp[j], xp[j + 1]]`` with its NaN fall-backs: when
    ``slope * (x - xp[j]) + fp[j]`` is NaN (infinite ``fp``), try from the right end, and for
    equal infinite ends return that end; exactly at a sample point the sample itself. NaN
    ``x`` gives ``nan_x`` (NaN, or 0 for the imaginary part, as NumPy; None: the single
    sample, as NumPy's one-point path)."""
    snp = _ns()
    n = xp.shape[0]
    x0, x1 = snp.take(xp, j), snp.take(xp, j + 1)
    y0, y1 = snp.take(fp, j), snp.take(fp, j + 1)
    dx = x1 - x0
    flat = dx == 0  # only where the result is replaced below (x outside, or x == xp[-1])
    slope = (y1 - y0) / snp.where(flat, 1, dx)
    r = slope * (x - x0) + y0
    r2 = slope * (x - x1) + y1
    # the fall-backs only replace NaNs, so the derivative in x stays the slope elsewhere
    fallback = snp.where((x == x0) | (snp.isnan(r2) & (y0 == y1)), y0, r2)
    r = snp.where(snp.isnan(r), fallback, r)
    r = snp.where(x == xp[n - 1], fp[n - 1], r)
    r = snp.where(x < xp[0], left, r)
    r = snp.where(x > xp[n - 1], right, r)
    return snp.where(snp.isnan(x), fp[0] if nan_x is None else nan_x, r)


def interp(x, xp, fp, left=None, right=None, period=None):
    """Piecewise-linear interpolant of the points ``(xp, fp)`` evaluated at ``x`` (NumPy
    ``interp``).

    For ``xp[j] <= x < xp[j + 1]`` the result is ``fp[j] + (x - xp[j]) * slope_j``; at
    ``x == xp[-1]`` it is ``fp[-1]``; below ``xp[0]`` it is ``left``, above ``xp[-1]``
    ``right``; NaN ``x`` gives NaN. Repeated ``xp`` values are allowed (the last of a run
    wins). ``xp`` is assumed increasing (not checked, as NumPy).

    Args:
        x: the evaluation points, any shape ``(*dims)``, real.
        xp: 1-D ``(n,)``, n >= 1, real, increasing (with ``period``: any order).
        fp: 1-D ``(n,)``, real or complex (complex: real and imaginary parts separately).
        left, right: the values outside ``[xp[0], xp[-1]]`` (default ``fp[0]`` / ``fp[-1]``);
            ignored with ``period``.
        period: optional period of the x-coordinates: ``x`` and ``xp`` are taken modulo it
            and ``xp`` is sorted, so the interpolant wraps around.
    Returns:
        Array ``(*dims)`` of the promoted inexact dtype of ``x``, ``xp`` and ``fp`` (default
        float for integer input; NumPy gives float64).
    Raises:
        ValueError: ``xp`` / ``fp`` not 1-D of one nonzero length; ``period`` == 0.
        TypeError: complex ``x`` or ``xp``.
    """
    snp = _ns()
    x, xp, fp = (operand(snp.asarray(v) if isinstance(v, (list, tuple, int, float)) else v,
                         "interp") for v in (x, xp, fp))
    for name, v in (("x", x), ("xp", xp)):
        if dtypes.is_complex(v.dtype):
            raise TypeError(f"interp: {name} must be real, got {v.dtype}")
    if xp.ndim != 1 or fp.ndim != 1 or xp.shape[0] != fp.shape[0]:
        raise ValueError(f"interp: xp and fp must be 1-D of the same length, got shapes "
                         f"{tuple(xp.shape)} and {tuple(fp.shape)}")
    if xp.shape[0] == 0:
        raise ValueError("interp: xp and fp must not be empty")
    x, xp, fp = promote_operands("interp", [x, xp, fp], "inexact")
    real = dtypes.real_dtype(x.dtype)
    x, xp = x.astype(real), xp.astype(real)
    if period is not None:
        if not isinstance(period, (int, float)) or isinstance(period, bool):
            period = operand(period, "interp")
        elif period == 0:
            raise ValueError("interp: period must be a non-zero value")
        period = snp.abs(period)
        x = snp.remainder(x, period)
        xp = snp.remainder(xp, period)
        order = snp.argsort(xp)
        xp, fp = snp.take(xp, order), snp.take(fp, order)
        xp = snp.concatenate([xp[-1:] - period, xp, xp[:1] + period])
        fp = snp.concatenate([fp[-1:], fp, fp[:1]])
        left = right = None
    n = xp.shape[0]
    if n == 1:
        j = snp.zeros(x.shape, dtype=dtypes.int64)
        xp, fp = snp.concatenate([xp, xp]), snp.concatenate([fp, fp])
    else:
        j = snp.clip(snp.searchsorted(xp, x, side="right") - 1, 0, n - 2)
    if dtypes.is_complex(fp.dtype):
        parts = []
        for part, nan_x in ((snp.real, x), (snp.imag, 0)):
            nan_x = None if n == 1 else nan_x
            lo = part(fp)[0] if left is None else part(snp.asarray(left).astype(fp.dtype))
            hi = part(fp)[-1] if right is None else part(snp.asarray(right).astype(fp.dtype))
            parts.append(_interp_real(x, xp, part(fp), j, lo, hi, nan_x))
        return parts[0].astype(fp.dtype) + 1j * parts[1].astype(fp.dtype)
    left = fp[0] if left is None else left
    right = fp[-1] if right is None else right
    return _interp_real(x, xp, fp, j, left, right, None if n == 1 else x).astype(fp.dtype)
