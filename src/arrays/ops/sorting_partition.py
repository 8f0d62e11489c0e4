"""Partial and multi-key orderings: partition, argpartition, lexsort.

``partition`` / ``argpartition`` return a fully sorted (stable) order along the axis. That is
one of the valid partitions NumPy's contract allows (the kth element is in its sorted place,
nothing before it is larger, nothing after it smaller; the order inside the two sides is
unspecified), and it keeps the results deterministic, differentiable (through ``sort``) and
identical eager, compiled and under ``vmap``. The cost is O(n log n) rather than introselect's
O(n).

``lexsort`` is a chain of stable argsorts, from the least significant key to the most
significant (the last key), each applied to the keys permuted by the order so far (the
classical LSD radix-sort argument: stability keeps the order of the less significant keys
among ties of the more significant ones).
"""
from __future__ import annotations

import operator

from ..convert import operand
from .axes import normalize_axis
from .reductions import _ns

__all__ = ["partition", "argpartition", "lexsort"]


def _check_kth(op, kth, n):
    ks = kth if isinstance(kth, (list, tuple)) else [kth]
    try:
        ks = [operator.index(k) for k in ks]
    except TypeError:
        raise TypeError(f"{op}: kth must be an int or a sequence of ints, got {kth!r}") from None
    for k in ks:
        if not -n <= k < n:
            raise ValueError(f"{op}: kth {k} is out of bounds for an axis of length {n} "
                             f"(valid: {-n}..{n - 1})")


def _prepare(op, a, kth, axis):
    snp = _ns()
    x = operand(a, op)
    if axis is None:
        x, axis = snp.ravel(x), 0
    if x.ndim == 0:
        raise ValueError(f"{op}: expected an array of ndim >= 1, got a 0-d array")
    axis = normalize_axis(op, axis, x.ndim)
    _check_kth(op, kth, x.shape[axis])
    return x, axis


def partition(a, kth, axis=-1, kind="introselect", order=None):
    """``a`` rearranged so that the element at each position in ``kth`` is the one a sort would
    put there, with no larger element before it and no smaller one after (NumPy
    ``partition``).

    Starling returns the sorted array (a valid partition for every ``kth``; see the module
    docstring). NaNs go last, as in ``sort``.

    Args:
        a: array of shape ``(*dims)``. kth: an int or a sequence of ints (negative allowed).
        axis: the axis to partition along (-1 by default), or None for the flattened array.
        kind, order: accepted for NumPy compatibility (``order`` must be None).
    Returns:
        Array of ``a``'s shape and dtype (1-D for ``axis=None``). Differentiable.
    Raises:
        ValueError: a ``kth`` out of range or a 0-d input. TypeError: non-integer ``kth``;
        ``order`` given. AxisError: axis out of range.
    """
    if order is not None:
        raise TypeError("partition: order= (structured arrays) is not supported")
    x, axis = _prepare("partition", a, kth, axis)
    return _ns().sort(x, axis=axis)


def argpartition(a, kth, axis=-1, kind="introselect", order=None):
    """Indices that partition ``a`` (NumPy ``argpartition``): the stable sorting indices,
    a valid choice for every ``kth``.

    Args / errors as ``partition``. Returns an int64 array of ``a``'s shape (1-D for
    ``axis=None``); ties keep their original order.
    """
    if order is not None:
        raise TypeError("argpartition: order= (structured arrays) is not supported")
    x, axis = _prepare("argpartition", a, kth, axis)
    return _ns().argsort(x, axis=axis, stable=True)


def lexsort(keys, axis=-1):
    """Indices that sort by several keys, the LAST key being the primary one (NumPy
    ``lexsort``): ``lexsort((b, a))`` sorts by ``a``, then by ``b`` among equal ``a``.

    Args:
        keys: a sequence of k arrays of one shape ``(*dims)`` (or an array of shape
            ``(k, *dims)``); each key orders like ``sort`` (NaN last).
        axis: the axis to sort along (-1 by default).
    Returns:
        int64 array of shape ``(*dims)``: a stable ordering (full ties keep their order).
    Raises:
        TypeError: no keys (a 0-d array is not a sequence of keys). ValueError: keys of
            different shapes. AxisError: axis out of range.
    """
    snp = _ns()
    if hasattr(keys, "ndim") and not isinstance(keys, (list, tuple)):
        keys = operand(keys, "lexsort")
        if keys.ndim == 0:
            raise TypeError("lexsort: keys must be a sequence of arrays (or an array of shape "
                            "(k, *dims)), got a 0-d array")
        keys = [keys[i] for i in range(keys.shape[0])]
    keys = [operand(k, "lexsort") for k in keys]
    if not keys:
        raise TypeError("lexsort: need at least one key")
    shape = tuple(keys[0].shape)
    for k in keys[1:]:
        if tuple(k.shape) != shape:
            raise ValueError(f"lexsort: all keys must have the same shape, got "
                             f"{[tuple(k.shape) for k in keys]}")
    if len(shape) == 0:
        return snp.zeros((), dtype=snp.int64)
    axis = normalize_axis("lexsort", axis, len(shape))
    order = snp.argsort(keys[0], axis=axis, stable=True)
    for k in keys[1:]:
        step = snp.argsort(snp.take_along_axis(k, order, axis=axis), axis=axis, stable=True)
        order = snp.take_along_axis(order, step, axis=axis)
    return order
