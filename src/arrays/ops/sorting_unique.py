"""``unique(x, size=...)``: the fixed-size, traceable form of ``unique`` (JAX's ``size`` /
``fill_value``).

Method: a stable argsort of the flattened input, a mask marking the first element of every run
of equal values in sorted order, and ``nonzero(mask, size=size + 1)`` for the run starts. Values
are read at the starts, the first-occurrence indices through the (stable) permutation, counts are
differences of consecutive starts, and the inverse is the run number scattered back through the
permutation. Every step has a static shape, so it works under ``compile`` / ``vmap`` / ``grad``
(the values are differentiable in ``x``).
"""
from __future__ import annotations

from ...core import dtypes
from ..convert import operand
from .reductions import _ns

__all__ = []  # reached through starling.numpy.unique(..., size=)


def _python_fill(fill_value):
    if fill_value is None or type(fill_value) in (bool, int, float, complex):
        return fill_value
    return operand(fill_value, "unique")


def unique_sized(x, size, fill_value, return_index, return_inverse, return_counts, equal_nan):
    """The first ``size`` sorted unique values of ``x`` (flattened), padded with ``fill_value``
    (default: the smallest value of ``x``), and the requested int64 arrays: indices of first
    occurrences (padding 0), the inverse (``x``'s shape) and counts (padding 0)."""
    snp = _ns()
    x = operand(x, "unique")
    flat = snp.ravel(x)
    n = flat.shape[0]
    if n == 0:
        fill = 0 if fill_value is None else fill_value
        vals = snp.full((size,), fill, dtype=x.dtype)
        extra = []
        if return_index:
            extra.append(snp.zeros((size,), dtype=snp.int64))
        if return_inverse:
            extra.append(snp.zeros(x.shape, dtype=snp.int64))
        if return_counts:
            extra.append(snp.zeros((size,), dtype=snp.int64))
        return (vals, *extra) if extra else vals
    perm = snp.argsort(flat, stable=True)
    xs = snp.take(flat, perm)
    same = snp.equal(xs[1:], xs[:-1])
    if equal_nan and dtypes.is_inexact(x.dtype):
        same = snp.logical_or(same, snp.logical_and(snp.isnan(xs[1:]), snp.isnan(xs[:-1])))
    first = snp.concatenate([snp.ones((1,), dtype=snp.bool_), snp.logical_not(same)])
    starts = snp.nonzero(first, size=size + 1, fill_value=n)[0]  # (size + 1,)
    head = starts[:size]
    valid = snp.less(head, n)
    safe = snp.minimum(head, n - 1)
    fill = xs[0] if fill_value is None else _python_fill(fill_value)
    vals = snp.where(valid, snp.take(xs, safe), snp.astype(fill, x.dtype))
    extra = []
    if return_index:
        extra.append(snp.where(valid, snp.take(perm, safe), 0))
    if return_inverse:
        run = snp.cumsum(snp.astype(first, snp.int64)) - 1
        inv = snp.zeros((n,), dtype=snp.int64).at[perm].set(run)
        extra.append(snp.reshape(inv, x.shape))
    if return_counts:
        extra.append(snp.where(valid, snp.subtract(starts[1:], head), 0))
    return (vals, *extra) if extra else vals


def check_sized(size, axis):
    """``size`` as a non-negative Python int (None stays None)."""
    if size is None:
        return None
    if axis is not None:
        raise ValueError("unique: size= is supported for axis=None only (unique elements of the "
                         "flattened array)")
    try:
        size = int(size.__index__())
    except (AttributeError, TypeError):
        raise TypeError(f"unique: size must be a static Python int or None, got "
                        f"{type(size).__name__}") from None
    if size < 0:
        raise ValueError(f"unique: size must be >= 0, got {size}")
    return size
