"""NaN-ignoring index and running reductions: nanargmax, nanargmin, nancumsum, nancumprod.

(The NaN-ignoring sums, means, variances and extrema live in reductions_stats.py, the
quantiles in reductions_quantile.py.) All are compositions of traceable ops; for integer and
bool inputs, which hold no NaN, they are the plain reductions.
"""
from __future__ import annotations

from ...core import dtypes
from ..convert import operand
from .axes import normalize_axis
from .reductions import _ns, no_out

__all__ = ["nanargmax", "nanargmin", "nancumsum", "nancumprod"]


def _nan_arg_extremum(op, x, axis, keepdims, largest):
    snp = _ns()
    x = operand(x, op)
    arg = snp.argmax if largest else snp.argmin
    if not dtypes.is_inexact(x.dtype):
        return arg(x, axis=axis, keepdims=keepdims)
    nan = snp.isnan(x)
    ext = snp.nanmax if largest else snp.nanmin
    if x.ndim == 0:
        return snp.where(nan, -1, snp.zeros((), dtype=snp.int64))
    # The first non-NaN entry equal to the NaN-ignoring extremum: argmax of a bool mask is the
    # index of its first True. (Replacing NaN by -inf instead would tie with a real -inf.)
    n = x.size if axis is None else x.shape[normalize_axis(op, axis, x.ndim)]
    if n == 0:
        raise ValueError(f"{op}: attempt to get the arg-extremum of an empty sequence (shape "
                         f"{tuple(x.shape)}, axis {axis})")
    m = ext(snp.where(nan, snp.nan, x), axis=axis, keepdims=True)
    hit = snp.logical_and(snp.equal(x, m), snp.logical_not(nan))
    idx = snp.argmax(hit, axis=axis, keepdims=keepdims)
    all_nan = snp.all(nan, axis=axis, keepdims=keepdims)
    return snp.where(all_nan, -1, idx)


def nanargmax(a, /, axis=None, out=None, *, keepdims=False):
    """Index of the largest non-NaN entry (NumPy ``nanargmax``); ties give the first index.

    Args:
        a: real or complex array (complex order is lexicographic, as ``max``).
        axis: an int, or None for the flattened array. out: must be None.
        keepdims: keep the reduced axis as size 1.
    Returns:
        int64 array without ``axis``. A slice holding only NaN gives -1 (JAX's convention:
        NumPy raises ValueError, which a traced program cannot do).
    Raises:
        ValueError: a zero-size reduction. AxisError: axis out of range.
    """
    no_out("nanargmax", out)
    return _nan_arg_extremum("nanargmax", a, axis, keepdims, True)


def nanargmin(a, /, axis=None, out=None, *, keepdims=False):
    """Index of the smallest non-NaN entry (NumPy ``nanargmin``); ties give the first index;
    an all-NaN slice gives -1. Arguments and errors as ``nanargmax``."""
    no_out("nanargmin", out)
    return _nan_arg_extremum("nanargmin", a, axis, keepdims, False)


def _nan_cumulative(op, fn, identity, a, axis, dtype):
    snp = _ns()
    x = operand(a, op)
    if dtypes.is_inexact(x.dtype):
        x = snp.where(snp.isnan(x), identity, x)
    return fn(x, axis=axis, dtype=dtype)


def nancumsum(a, /, axis=None, dtype=None, out=None):
    """``cumsum`` treating NaN as 0 (NumPy ``nancumsum``): leading NaNs give 0s.

    Args as ``cumsum``. Returns an array of ``a``'s shape (flattened for ``axis=None``).
    The gradient of a NaN entry is 0.
    Raises:
        AxisError: axis out of range.
    """
    no_out("nancumsum", out)
    return _nan_cumulative("nancumsum", _ns().cumsum, 0, a, axis, dtype)


def nancumprod(a, /, axis=None, dtype=None, out=None):
    """``cumprod`` treating NaN as 1 (NumPy ``nancumprod``); args as ``cumprod``."""
    no_out("nancumprod", out)
    return _nan_cumulative("nancumprod", _ns().cumprod, 1, a, axis, dtype)
