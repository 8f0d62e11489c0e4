"""Set operations on arrays: isin, union1d, intersect1d, setdiff1d, setxor1d.

Method: sort, compare neighbours (a "first of its run" mask) and searchsorted into the sorted
other operand; the kept entries are then moved to the front by a scatter to their running
count (``_compact``). All are compositions of primitives with batch rules, so they vmap.

The results of union1d / intersect1d / setdiff1d / setxor1d have a length that depends on the
values. Eagerly it is computed (NumPy's results); under compile / vmap / grad the static
``size=`` argument fixes it (JAX's extension): the first ``size`` entries are returned, padded
with ``fill_value`` (default: the first entry of the result, its smallest for sorted results, or
0 when it is empty).

NaN: as NumPy 2, NaNs count as equal to each other when duplicates are removed (one NaN
survives a union), but a NaN is never found in another array (isin is False, intersect1d
drops it, setxor1d keeps one NaN per operand that holds one).
"""
from __future__ import annotations

import numpy as np

from ...core import dtypes
from ...core.trace import ConcretizationError, Tracer
from ..convert import operand
from .differences import static_int
from .elementwise_family import promote_operands
from .reductions import _ns

__all__ = ["isin", "union1d", "intersect1d", "setdiff1d", "setxor1d"]

_I64 = dtypes.int64


def concrete_buffer(x):
    """The NumPy value of ``x``, or None when it is traced (not known until run time)."""
    if isinstance(x, Tracer):
        try:
            x = x.to_concrete()
        except ConcretizationError:
            return None
    return np.asarray(x)


def _flat_pair(op, ar1, ar2):
    snp = _ns()
    a, b = promote_operands(op, [operand(ar1, op), operand(ar2, op)])
    return snp.reshape(a, (-1,)), snp.reshape(b, (-1,))


def _same(a, b):
    """Equality where NaNs equal NaNs (the duplicate test of NumPy 2's ``unique``)."""
    snp = _ns()
    eq = snp.equal(a, b)
    if dtypes.is_inexact(a.dtype):
        eq = eq | (snp.isnan(a) & snp.isnan(b))
    return eq


def _first_of_runs(s):
    """True where the sorted ``s`` starts a run of equal values."""
    snp = _ns()
    head = snp.ones((min(1, s.shape[0]),), dtype=dtypes.bool_)
    return snp.concatenate([head, ~_same(s[1:], s[:-1])])


def _result_size(op, size, keep):
    if size is not None:
        size = static_int(op, "size", size)
        if size < 0:
            raise ValueError(f"{op}: size must be >= 0, got {size}")
        return size
    buf = concrete_buffer(keep)
    if buf is None:
        raise ConcretizationError(
            f"{op}: the length of the result depends on the values of the inputs, which are "
            f"traced here (inside compile / vmap / grad); pass the static size= argument (and "
            f"optionally fill_value=) for a fixed-length result")
    return int(buf.sum())


def _compact(values, keep, size, fill_value):
    """The entries of the 1-D ``values`` where ``keep``, in order, in an array of length
    ``size``: cut, or padded with ``fill_value`` (None: the first kept entry, or 0)."""
    snp = _ns()
    n = values.shape[0]
    count = snp.sum(keep.astype(_I64))
    if n == 0:
        first = snp.zeros((), dtype=values.dtype)
    else:
        first = snp.where(count > 0, snp.take(values, snp.argmax(keep)), 0).astype(values.dtype)
    fill = first if fill_value is None else snp.asarray(fill_value).astype(values.dtype)
    target = snp.where(keep, snp.cumsum(keep.astype(_I64)) - 1, size)
    out = snp.zeros((size,), dtype=values.dtype).at[target].set(values, mode="drop")
    return snp.where(snp.arange(size) < count, out, fill)


def isin(element, test_elements, assume_unique=False, invert=False, *, kind=None):
    """Elementwise test whether each entry of ``element`` occurs in ``test_elements`` (NumPy
    ``isin``).

    Method: sort ``test_elements``, searchsorted each entry and compare with what is found
    (O((n + m) log m)). NaN never matches (NaN != NaN); -0.0 matches 0.0.

    Args:
        element: array of any shape ``(*dims)``.
        test_elements: array of any shape (flattened); dtypes promote with ``element``'s.
        assume_unique: accepted for NumPy compatibility (the result does not depend on it).
        invert: return the negation (``element`` not in ``test_elements``).
        kind: None, "sort" or "table" (NumPy's algorithm choice); the sort method is used.
    Returns:
        bool Array of shape ``(*dims)``.
    Raises:
        ValueError: unknown ``kind``. TypeError: dtypes that do not promote.
    """
    snp = _ns()
    if kind not in (None, "sort", "table"):
        raise ValueError(f"isin: kind must be None, 'sort' or 'table', got {kind!r}")
    e = operand(element, "isin")
    e, t = promote_operands("isin", [e, operand(test_elements, "isin")])
    t = snp.reshape(t, (-1,))
    m = t.shape[0]
    if m == 0:
        found = snp.zeros(e.shape, dtype=dtypes.bool_)
    else:
        st = snp.sort(t)
        i = snp.clip(snp.searchsorted(st, e), 0, m - 1)
        found = snp.take(st, i) == e
    return ~found if invert else found


def union1d(ar1, ar2, /, *, size=None, fill_value=None):
    """Sorted unique values found in either of the (flattened) arrays (NumPy ``union1d``).

    Args:
        ar1, ar2: arrays of any shapes; dtypes promote.
        size: static length of the result (required under compile / vmap / grad): the first
            ``size`` values, padded with ``fill_value``.
        fill_value: the padding (default: the smallest value, or 0 when there is none).
    Returns:
        1-D array ``(k,)`` (``(size,)`` when given) of the promoted dtype.
    Raises:
        ConcretizationError: traced inputs without ``size``. ValueError: negative ``size``.
    """
    snp = _ns()
    a, b = _flat_pair("union1d", ar1, ar2)
    s = snp.sort(snp.concatenate([a, b]))
    keep = _first_of_runs(s)
    return _compact(s, keep, _result_size("union1d", size, keep), fill_value)


def intersect1d(ar1, ar2, /, assume_unique=False, return_indices=False, *, size=None,
                fill_value=None):
    """Sorted unique values found in both (flattened) arrays (NumPy ``intersect1d``).

    Args:
        ar1, ar2: arrays of any shapes; dtypes promote.
        assume_unique: the inputs hold no duplicates (then duplicates are not removed; with
            duplicates the result is unspecified, as in NumPy).
        return_indices: also return, for each value, the index of its first occurrence in the
            flattened ``ar1`` and ``ar2``.
        size: static length of the result (required under compile / vmap / grad); values are
            padded with ``fill_value``, indices with the length of their array (one past the
            end).
        fill_value: the value padding (default: the smallest value, or 0 when there is none).
    Returns:
        1-D ``(k,)`` array of the promoted dtype; with ``return_indices`` a tuple
        ``(values, indices1, indices2)``, the indices int64.
    Raises:
        ConcretizationError: traced inputs without ``size``. ValueError: negative ``size``.
    """
    snp = _ns()
    a, b = _flat_pair("intersect1d", ar1, ar2)
    o1 = snp.argsort(a)
    s1 = snp.take(a, o1)
    n2 = b.shape[0]
    if n2 == 0 or s1.shape[0] == 0:
        keep = snp.zeros(s1.shape, dtype=dtypes.bool_)
        j = snp.zeros(s1.shape, dtype=_I64)
        o2 = snp.zeros((max(n2, 1),), dtype=_I64)
    else:
        o2 = snp.argsort(b)
        s2 = snp.take(b, o2)
        j = snp.clip(snp.searchsorted(s2, s1), 0, n2 - 1)
        keep = snp.take(s2, j) == s1
        if not assume_unique:
            keep = keep & _first_of_runs(s1)
    k = _result_size("intersect1d", size, keep)
    values = _compact(s1, keep, k, fill_value)
    if not return_indices:
        return values
    i1 = _compact(o1, keep, k, a.shape[0])
    i2 = _compact(snp.take(o2, j), keep, k, n2)
    return values, i1, i2


def setdiff1d(ar1, ar2, /, assume_unique=False, *, size=None, fill_value=None):
    """Unique values of ``ar1`` that are not in ``ar2`` (NumPy ``setdiff1d``).

    Args:
        ar1, ar2: arrays of any shapes (flattened); dtypes promote.
        assume_unique: ``ar1`` holds no duplicates: they are not removed and the result keeps
            ``ar1``'s order (NumPy); otherwise the result is sorted.
        size: static length of the result (required under compile / vmap / grad).
        fill_value: the padding (default: the first value of the result, or 0).
    Returns:
        1-D ``(k,)`` array (``(size,)`` when given) of the promoted dtype.
    Raises:
        ConcretizationError: traced inputs without ``size``. ValueError: negative ``size``.
    """
    snp = _ns()
    a, b = _flat_pair("setdiff1d", ar1, ar2)
    if assume_unique:
        s, keep = a, isin(a, b, invert=True)
    else:
        s = snp.sort(a)
        keep = _first_of_runs(s) & isin(s, b, invert=True)
    return _compact(s, keep, _result_size("setdiff1d", size, keep), fill_value)


def setxor1d(ar1, ar2, /, assume_unique=False, *, size=None, fill_value=None):
    """Sorted values found in exactly one of the (flattened) arrays (NumPy ``setxor1d``).

    Method (NumPy's definition): the unique values of each array are joined and sorted, and
    the values not equal to a neighbour are kept; so a NaN is kept once per array holding one.

    Args:
        ar1, ar2: arrays of any shapes; dtypes promote.
        assume_unique: the inputs hold no duplicates (not removed then).
        size: static length of the result (required under compile / vmap / grad).
        fill_value: the padding (default: the smallest value, or 0 when there is none).
    Returns:
        1-D ``(k,)`` array (``(size,)`` when given) of the promoted dtype.
    Raises:
        ConcretizationError: traced inputs without ``size``. ValueError: negative ``size``.
    """
    snp = _ns()
    a, b = _flat_pair("setxor1d", ar1, ar2)
    joined = snp.concatenate([a, b])
    n = joined.shape[0]
    if n == 0:
        return _compact(joined, snp.zeros((0,), dtype=dtypes.bool_),
                        _result_size("setxor1d", size, snp.zeros((0,), dtype=dtypes.bool_)),
                        fill_value)
    order = snp.argsort(joined)  # stable: equal values keep ar1's entries before ar2's
    s = snp.take(joined, order)
    if assume_unique:
        u, count = s, n
    else:
        source = order >= a.shape[0]
        first = snp.concatenate([snp.ones((1,), dtype=dtypes.bool_),
                                 ~_same(s[1:], s[:-1]) | (source[1:] != source[:-1])])
        u, count = _compact(s, first, n, 0), snp.sum(first.astype(_I64))
    differs = u[1:] != u[:-1]
    pos = snp.arange(n)
    after = snp.concatenate([differs, snp.ones((1,), dtype=dtypes.bool_)]) | (pos == count - 1)
    before = snp.concatenate([snp.ones((1,), dtype=dtypes.bool_), differs])
    keep = before & after & (pos < count)
    return _compact(u, keep, _result_size("setxor1d", size, keep), fill_value)
