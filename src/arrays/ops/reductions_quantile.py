"""Order statistics: quantile, percentile, median and the NaN-ignoring nanquantile,
nanpercentile, nanmedian.

Method: the reduced axes are moved to the end and flattened to one axis of length N, which is
sorted (NaN last); quantile ``q`` sits at the fractional position ``q * (N - 1)`` and is read by
gathering its two neighbours (NumPy's default method "linear", Hyndman & Fan 1996, definition 7)
or one of them ("lower", "higher", "nearest", "midpoint"). The NaN-ignoring forms count the
non-NaN entries ``c`` of each slice (NaNs sort last, so the first ``c`` sorted entries are the
data) and read position ``q * (c - 1)`` per slice with ``take_along_axis``. Everything is a
composition of traceable ops, so ``q`` may be a traced array and the results are differentiable
in ``a`` (through the sort's permutation and the interpolation).
"""
from __future__ import annotations

import numpy as np

from ...core import dtypes
from ...core.avals import is_symbolic
from ...core.trace import Tracer
from ..convert import operand
from .axes import normalize_axes
from .reductions import _ns, cast, const, kept_shape, no_out, reduced_shape, reduction_size
from .reductions_stats import mean_dtypes

__all__ = ["quantile", "percentile", "median", "nanquantile", "nanpercentile", "nanmedian"]

_METHODS = ("linear", "lower", "higher", "nearest", "midpoint")


def _check_q(op, q, scale):
    """q as an operand; concrete values are checked to lie in [0, scale]."""
    if isinstance(q, (int, float, list, tuple)):
        # Python numbers become float64 here, not the float32 of a weak scalar: q = 0.3 must
        # not be rounded before a float64 input is interpolated.
        q = np.asarray(q, dtype=np.float64)
    qa = operand(q, op)
    if not isinstance(qa, Tracer):
        vals = np.asarray(qa)
        if vals.dtype.kind == "c":
            raise TypeError(f"{op}: q must be real, got dtype {vals.dtype}")
        if vals.size and not (np.all(vals >= 0) and np.all(vals <= scale)):
            raise ValueError(f"{op}: q must lie in [0, {scale}], got {vals.tolist()}")
    return qa


def _lerp(snp, a, b, t):
    # Exact at both ends: from a for t < 1/2 and from b for t >= 1/2; equal neighbours give the
    # neighbour itself (so two equal infinities give that infinity, not NaN).
    d = snp.subtract(b, a)
    lo = snp.add(a, snp.multiply(d, t))
    hi = snp.subtract(b, snp.multiply(d, snp.subtract(1, t)))
    return snp.where(snp.equal(a, b), a, snp.where(snp.less(t, 0.5), lo, hi))


def _quantile(op, a, q, axis, method, keepdims, ignore_nan=False):
    snp = _ns()
    if method not in _METHODS:
        raise ValueError(f"{op}: method must be one of {_METHODS}, got {method!r}")
    x = operand(a, op)
    if dtypes.is_complex(x.dtype):
        raise TypeError(f"{op}: complex input is not supported (quantiles need an order); "
                        "pass the real part or the absolute value")
    axes = normalize_axes(op, axis, x.ndim, sort=True)
    acc, res = mean_dtypes(op, x.dtype, None)
    x = cast(x, acc)
    qa = cast(operand(q, op), acc)
    qshape = tuple(qa.shape)
    rest = [i for i in range(x.ndim) if i not in axes]
    out_rest = kept_shape(x.shape, axes) if keepdims else reduced_shape(x.shape, axes)
    n = reduction_size(x.shape, axes)
    if n == 0:
        return cast(snp.broadcast_to(const(np.nan, acc), qshape + tuple(out_rest)), res)
    if rest + list(axes) != list(range(x.ndim)):
        x = snp.permute_dims(x, tuple(rest + list(axes)))
    rest_shape = tuple(x.shape[:len(rest)])
    xs = snp.sort(snp.reshape(x, rest_shape + (n,)), axis=-1)

    qflat = snp.reshape(qa, (-1,))
    ignore_nan = ignore_nan and dtypes.is_floating(acc)
    if ignore_nan:
        # Per-slice count of the data: pos has shape (*rest, nq) and is read along the last axis.
        cnt = snp.sum(snp.logical_not(snp.isnan(xs)), axis=-1, keepdims=True, dtype=acc)
        pos = snp.multiply(qflat, snp.subtract(cnt, 1))
    else:
        pos = snp.multiply(qflat, (n - 1) if is_symbolic(n) else float(n - 1))
    lo_f, hi_f = snp.floor(pos), snp.ceil(pos)

    def gather(idx_f):
        idx = snp.clip(cast(idx_f, dtypes.int64), 0, n - 1)
        if ignore_nan:
            return snp.take_along_axis(xs, idx, axis=-1)  # (*rest, nq)
        return snp.take(xs, idx, axis=-1)  # (*rest, nq)

    if method == "lower":
        r = gather(lo_f)
    elif method == "higher":
        r = gather(hi_f)
    elif method == "nearest":
        r = gather(snp.round(pos))  # halves to even, as NumPy
    else:
        lo, hi = gather(lo_f), gather(hi_f)
        if method == "midpoint":
            r = _lerp(snp, lo, hi, const(0.5, acc))
        else:
            r = _lerp(snp, lo, hi, snp.subtract(pos, lo_f))
    if ignore_nan:
        # An all-NaN slice has no data: NaN (NumPy, which also warns).
        r = snp.where(snp.equal(cnt, 0), const(np.nan, acc), r)
    elif dtypes.is_floating(acc):
        # A slice holding a NaN has it last after sorting: its quantiles are NaN (NumPy).
        last = snp.reshape(operand(n - 1, op), (1,)) if is_symbolic(n) else np.array([n - 1])
        r = snp.where(snp.isnan(snp.take(xs, last, axis=-1)), const(np.nan, acc), r)
    r = snp.moveaxis(r, -1, 0)  # (nq, *rest)
    return cast(snp.reshape(r, qshape + tuple(out_rest)), res)


def quantile(a, q, /, axis=None, out=None, overwrite_input=False, method="linear",
             keepdims=False, *, weights=None):
    """The ``q``-th quantiles of ``a`` over the given axes (NumPy ``quantile``).

    Args:
        a: real array, shape ``(*dims)``.
        q: quantile(s) in [0, 1]: a scalar or an array of shape ``(*qdims)`` (may be traced).
        axis: None (all axes), an int or a tuple of ints.
        out: must be None. overwrite_input: ignored (arrays are immutable).
        method: "linear" (default), "lower", "higher", "nearest" or "midpoint".
        keepdims: keep the reduced axes as size 1.
        weights: not supported (must be None).
    Returns:
        Array of shape ``(*qdims, *rest)`` where ``rest`` is ``dims`` without the reduced axes
        (size 1 with ``keepdims``). Floats keep their dtype, integers give float32 (computed
        in float64). A slice containing NaN gives NaN; a zero-size reduction gives NaN.
    Raises:
        ValueError: concrete ``q`` outside [0, 1]; unknown method. TypeError: complex input.
        AxisError: axis out of range.
    """
    no_out("quantile", out)
    if weights is not None:
        raise TypeError("quantile: weights= is not supported")
    return _quantile("quantile", a, _check_q("quantile", q, 1), axis, method, keepdims)


def percentile(a, q, /, axis=None, out=None, overwrite_input=False, method="linear",
               keepdims=False, *, weights=None):
    """The ``q``-th percentiles (``q`` in [0, 100]) of ``a``: ``quantile(a, q / 100, ...)``."""
    no_out("percentile", out)
    if weights is not None:
        raise TypeError("percentile: weights= is not supported")
    qa = _check_q("percentile", q, 100)
    acc, _ = mean_dtypes("percentile", qa.dtype, None)
    return _quantile("percentile", a, _ns().divide(cast(qa, acc), 100.0), axis, method, keepdims)


def median(a, /, axis=None, out=None, overwrite_input=False, keepdims=False):
    """Median over the given axes (NumPy ``median``): the mean of the two middle values of an
    even-length slice. NaN in a slice gives NaN; a zero-size reduction gives NaN.

    Args:
        a: real array. axis: None / int / tuple of ints. out: must be None.
        overwrite_input: ignored. keepdims: keep reduced axes as size 1.
    Returns:
        Array without the reduced axes; integers give float32.
    Raises:
        TypeError: complex input. AxisError: axis out of range.
    """
    no_out("median", out)
    return _quantile("median", a, np.float64(0.5), axis, "linear", keepdims)


def nanquantile(a, q, /, axis=None, out=None, overwrite_input=False, method="linear",
                keepdims=False, *, weights=None):
    """``quantile`` of the non-NaN entries of each slice (NumPy ``nanquantile``).

    Same arguments, shapes and errors as ``quantile``; a slice of NaNs only (or a zero-size
    reduction) gives NaN. Integer inputs have no NaN and give ``quantile``'s result.
    """
    no_out("nanquantile", out)
    if weights is not None:
        raise TypeError("nanquantile: weights= is not supported")
    return _quantile("nanquantile", a, _check_q("nanquantile", q, 1), axis, method, keepdims,
                     ignore_nan=True)


def nanpercentile(a, q, /, axis=None, out=None, overwrite_input=False, method="linear",
                  keepdims=False, *, weights=None):
    """``percentile`` of the non-NaN entries (``q`` in [0, 100]; NumPy ``nanpercentile``)."""
    no_out("nanpercentile", out)
    if weights is not None:
        raise TypeError("nanpercentile: weights= is not supported")
    qa = _check_q("nanpercentile", q, 100)
    acc, _ = mean_dtypes("nanpercentile", qa.dtype, None)
    return _quantile("nanpercentile", a, _ns().divide(cast(qa, acc), 100.0), axis, method,
                     keepdims, ignore_nan=True)


def nanmedian(a, /, axis=None, out=None, overwrite_input=False, keepdims=False):
    """``median`` of the non-NaN entries (NumPy ``nanmedian``); an all-NaN slice gives NaN.

    Args / returns / errors as ``median``.
    """
    no_out("nanmedian", out)
    return _quantile("nanmedian", a, np.float64(0.5), axis, "linear", keepdims, ignore_nan=True)
