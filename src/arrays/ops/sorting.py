"""Sorting and searching: sort, argsort, searchsorted, top_k, and the (eager-only) unique family.

Primitives:

============  =====================  ========================================================
primitive     params                 semantics
============  =====================  ========================================================
sort          axis, descending       sort along ``axis``; NaN last (first when descending:
                                     descending is the exact reverse order); -0.0 == 0.0
argsort       axis, descending       int64 indices of the stable sort (ties keep their order,
                                     also when descending)
searchsorted  side ("left"/"right")  int64 insertion points of ``x2`` into the sorted 1-D ``x1``
top_k         k                      the k largest along the last axis, descending, ties by
                                     lower index (NaN counts as largest); [values, indices]
============  =====================  ========================================================

Ordering is NumPy's: real values ascending with NaN after everything (after +inf); complex
values lexicographically by (real, imag) with NaNs last; -0.0 and 0.0 are equal (ties).

``unique`` and friends have output shapes that depend on the values, so they need concrete
arrays: under a transformation (make_ir, compile, vmap, ...) they raise ConcretizationError.
"""
from __future__ import annotations

import collections
import operator

import numpy as np

from ...core import dtypes
from ...core.ad_util import Zero, tangent_aval
from ...core.avals import ShapedArray
from ...core.primitive import Primitive
from ...core.trace import EVAL_TRACE, ConcretizationError, Tracer, current_trace
from ..array import Array, wrap
from ..convert import operand
from .axes import normalize_axis
from .elementwise_family import promote_operands
from .reductions import _ACC32, _F32, _ns
from .shape_lax import concatenate as lax_concatenate, slice_in_dim
from .sorting_unique import check_sized, unique_sized

__all__ = ["sort", "argsort", "searchsorted", "top_k", "unique", "unique_values",
           "unique_counts", "unique_inverse", "unique_all"]

_I64 = np.dtype(np.int64)
_KINDS = (None, "quicksort", "mergesort", "heapsort", "stable")


# ---- primitives ----------------------------------------------------------------------------------

def _argsort_impl(x, *, axis, descending):
    if x.dtype in _ACC32:
        x = x.astype(_F32)  # exact, and NumPy sorts float32 natively
    if not descending:
        return np.argsort(x, axis=axis, kind="stable").astype(_I64, copy=False)
    # Stable descending order: sort the reversed axis stably, reverse the result, and map the
    # positions back; equal elements then keep their original relative order.
    r = np.flip(np.argsort(np.flip(x, axis), axis=axis, kind="stable"), axis)
    return (x.shape[axis] - 1 - r).astype(_I64, copy=False)


def _sort_impl(x, *, axis, descending):
    if x.dtype in _ACC32:
        return np.take_along_axis(x, _argsort_impl(x, axis=axis, descending=descending), axis)
    # Sorted values do not show whether the sort was stable (equal values are interchangeable;
    # only the order of -0.0 and 0.0 could tell), so NumPy's fastest sort is used.
    out = np.sort(x, axis=axis)
    return np.flip(out, axis) if descending else out


sort_p = Primitive("sort", family="sorting")
sort_p.impl = _sort_impl
sort_p.abstract_eval = lambda x, *, axis, descending: x
sort_p.weak_type = lambda w, *, axis, descending: w

argsort_p = Primitive("argsort", family="sorting")
argsort_p.impl = _argsort_impl
argsort_p.abstract_eval = lambda x, *, axis, descending: ShapedArray(x.shape, _I64, False)


def _searchsorted_impl(a, v, *, side):
    if a.dtype in _ACC32:
        a, v = a.astype(_F32), v.astype(_F32)
    return np.asarray(np.searchsorted(a, v, side=side), dtype=_I64)


searchsorted_p = Primitive("searchsorted", family="sorting")
searchsorted_p.impl = _searchsorted_impl
searchsorted_p.abstract_eval = lambda a, v, *, side: ShapedArray(v.shape, _I64, False)


def _top_k_impl(x, *, k):
    idx = _argsort_impl(x, axis=x.ndim - 1, descending=True)[..., :k]
    return [np.take_along_axis(x, idx, -1), np.ascontiguousarray(idx)]


def _top_k_abstract_eval(x, *, k):
    shape = tuple(x.shape[:-1]) + (k,)
    return [ShapedArray(shape, x.dtype, x.weak_type), ShapedArray(shape, _I64, False)]


top_k_p = Primitive("top_k", multiple_results=True, family="sorting")
top_k_p.impl = _top_k_impl
top_k_p.abstract_eval = _top_k_abstract_eval
top_k_p.weak_type = lambda w, *, k: [w, False]



# ---- transformation rules ----------------------------------------------------------------------
#
# sort: the tangent is permuted like the values (t gathered along the stable sort order), then
#   each run of tied outputs shares the mean of its tangents (_tie_averaged): the minimum-norm
#   subgradient, so median / quantile / max-like uses of sort agree with the reductions.
# top_k: the same over the whole descending order, then the first k (a tie straddling the k-th
#   place shares with the entries left out).
# argsort / searchsorted: integer outputs, zero tangents.
# Batch rules: the batch axis stays put and ``axis`` is renumbered around it (top_k works on
#   the last axis, so a batch axis there is moved to the front); searchsorted with a batched
#   sorted array counts, per example, the elements before each value with one stable argsort.
# Sharding: sort / argsort / top_k keep splits of the dims they do not act on. searchsorted is
#   elementwise in the values (any split of them, the sorted array replicated), and a split
#   sorted array gives a partial sum: each chunk of a sorted array is sorted, and the insertion
#   point into the whole is the sum of the insertion points into the chunks (the number of
#   entries before the value).

def _tie_averaged(s, g, axis):
    """The sorted tangents ``g`` with each run of equal sorted values ``s`` (along ``axis``)
    sharing the mean of its tangents: the minimum-norm subgradient at ties, as ``max`` over k
    ties gives 1/k each. Where no value repeats ``g`` is returned exactly. Linear in ``g``
    (a scatter-add and a gather), so it transposes and differentiates again."""
    snp = _ns()
    n = s.shape[axis]
    if n < 2:
        return g
    s_ = snp.moveaxis(s, axis, -1)
    g_ = snp.moveaxis(g, axis, -1)
    lead = tuple(s_.shape[:-1])
    rows = int(np.prod(lead, dtype=np.int64))
    s2 = snp.reshape(s_, (rows, n))
    g2 = snp.reshape(g_, (rows, n))
    new = snp.concatenate([snp.ones((rows, 1), dtype=dtypes.bool_),
                           snp.not_equal(s2[:, 1:], s2[:, :-1])], axis=1)
    gid = snp.cumsum(new.astype(_I64), axis=1) - 1
    flat = (snp.arange(rows, dtype=_I64)[:, None] * n + gid).reshape((-1,))
    sums = snp.zeros((rows * n,), dtype=g.dtype).at[flat].add(snp.reshape(g2, (-1,)))
    counts = snp.zeros((rows * n,), dtype=dtypes.real_dtype(g.dtype)).at[flat].add(
        snp.ones((rows * n,), dtype=dtypes.real_dtype(g.dtype)))
    mean = snp.take(sums, flat) / snp.take(counts, flat).astype(g.dtype)
    tied = snp.take(counts, flat) > 1
    out = snp.where(tied, mean, snp.reshape(g2, (-1,)))
    return snp.moveaxis(snp.reshape(out, lead + (n,)), -1, axis)


def _sort_jvp(primals, tangents, *, axis, descending):
    x, = primals
    t, = tangents
    ans = sort_p.bind(x, axis=axis, descending=descending)
    if type(t) is Zero or not dtypes.is_inexact(x.dtype):
        return ans, Zero(tangent_aval(ans.aval))
    order = argsort_p.bind(x, axis=axis, descending=descending)
    g = _ns().take_along_axis(t, order, axis=axis)
    return ans, _tie_averaged(ans, g, axis)


def _top_k_jvp(primals, tangents, *, k):
    x, = primals
    t, = tangents
    values, indices = top_k_p.bind(x, k=k)
    zero_i = Zero(tangent_aval(indices.aval))
    if type(t) is Zero or not dtypes.is_inexact(x.dtype):
        return [values, indices], [Zero(tangent_aval(values.aval)), zero_i]
    # ties may straddle the k-th place: average over the whole descending order, keep k
    full = sort_p.bind(x, axis=x.ndim - 1, descending=True)
    order = argsort_p.bind(x, axis=x.ndim - 1, descending=True)
    g = _tie_averaged(full, _ns().take_along_axis(t, order, axis=-1), x.ndim - 1)
    return [values, indices], [g[..., :k], zero_i]


def _axis_batch(prim):
    def rule(args, dims, *, axis, descending):
        d = dims[0]
        return prim.bind(args[0], axis=axis + (axis >= d), descending=descending), d
    prim.batch = rule
    return rule


def _top_k_batch(args, dims, *, k):
    x, d = args[0], dims[0]
    if d == x.ndim - 1:
        x, d = _ns().moveaxis(x, d, 0), 0
    return top_k_p.bind(x, k=k), [d, d]


def _inverse_perm_ranks(x):
    """Rank of every entry of ``x`` along its last axis in the stable ascending order."""
    last = x.ndim - 1
    order = argsort_p.bind(x, axis=last, descending=False)
    return argsort_p.bind(order, axis=last, descending=False)


def _searchsorted_batch(args, dims, *, side):
    a, v = args
    da, dv = dims
    if da is None:
        return searchsorted_p.bind(a, v, side=side), dv  # elementwise in v: the axis stays
    snp = _ns()
    a = snp.moveaxis(a, da, 0)  # (B, n)
    size, n = a.shape
    if dv is None:
        v = snp.broadcast_to(v, (size,) + tuple(v.shape))
    else:
        v = snp.moveaxis(v, dv, 0)
    vshape = tuple(v.shape[1:])
    m = 1
    for s in vshape:
        m *= s
    vf = snp.reshape(v, (size, m))
    # In the stable order of [v, a] ("left") or [a, v] ("right"), the entries before v_i are the
    # a_j < v_i (resp. <= v_i) plus the v_k before v_i in v's own stable order.
    if side == "left":
        joined, start = lax_concatenate([vf, a], 1), 0
    else:
        joined, start = lax_concatenate([a, vf], 1), n
    ranks = slice_in_dim(_inverse_perm_ranks(joined), start, start + m, axis=1)
    out = snp.subtract(ranks, _inverse_perm_ranks(vf))
    return snp.reshape(out, (size,) + vshape), 0


def _sort_axis(params, ndim):
    return (params["axis"],)


def _last_axis(params, ndim):
    return (ndim - 1,)


def _searchsorted_sharding(in_avals, out_avals, *, side):
    from .rules_sharding import R as REP, Partial, Shard
    a, v = in_avals
    combos = [((Shard(d),), (REP, Shard(d))) for d in range(len(v.shape)) if v.shape[d] > 1]
    return combos + [((Partial("sum"),), (Shard(0), REP))]


def _declare_rules():
    from . import rules as R
    from . import rules_sharding as RS
    sort_p.sharding = RS.along(_sort_axis)
    argsort_p.sharding = RS.along(_sort_axis)
    top_k_p.sharding = RS.along(_last_axis)
    searchsorted_p.sharding = _searchsorted_sharding
    sort_p.jvp = _sort_jvp
    top_k_p.jvp = _top_k_jvp
    R.defjvp_zero(argsort_p)
    R.defjvp_zero(searchsorted_p)
    _axis_batch(sort_p)
    _axis_batch(argsort_p)
    top_k_p.batch = _top_k_batch
    searchsorted_p.batch = _searchsorted_batch


_declare_rules()

# ---- public ------------------------------------------------------------------------------------

def _sort_args(op, x, axis, kind, order):
    if order is not None:
        raise TypeError(f"{op}: order= (structured arrays) is not supported")
    if kind not in _KINDS:
        raise ValueError(f"{op}: kind must be one of {_KINDS[1:]} or None, got {kind!r}")
    x = operand(x, op)
    if axis is None:
        if x.ndim != 1:
            x = _ns().reshape(x, (-1,))
        return x, 0
    return x, normalize_axis(op, axis, x.ndim)


def sort(x, /, axis=-1, kind=None, order=None, *, descending=False, stable=True):
    """Sorted copy of ``x`` along an axis (Array API ``sort`` plus NumPy's ``axis=None``).

    Equal values are interchangeable, so stability cannot be observed in the sorted values
    (except for the relative order of -0.0 and 0.0, which is unspecified); ``argsort`` is
    always stable. ``kind`` and ``stable`` are accepted for compatibility.

    Args:
        x: input array, shape ``(*dims)``, any dtype. Real NaNs sort after +inf; complex values
            order by (real, imag), NaNs last (NumPy's order).
        axis: the axis to sort (default last; negative allowed) or None to sort the flattened
            array.
        kind: NumPy's algorithm name; ignored.
        order: must be None (no structured arrays).
        descending: sort in descending order: the exact reverse of ascending, so NaNs first.
        stable: accepted for the Array API (see above).
    Returns:
        Array of ``x``'s dtype and shape (``(size,)`` for ``axis=None``).
    Raises:
        AxisError: axis out of range (a 0-d array has no axis -1: use axis=None).
        ValueError: unknown ``kind``. TypeError: ``order`` given.
    """
    if (type(x) is Array and kind is None and order is None and axis is not None
            and current_trace() is EVAL_TRACE):
        ax = normalize_axis("sort", axis, x._buf.ndim)
        return wrap(_sort_impl(x._buf, axis=ax, descending=bool(descending)), x._weak)
    x, ax = _sort_args("sort", x, axis, kind, order)
    return sort_p.bind(x, axis=ax, descending=bool(descending))


def argsort(x, /, axis=-1, kind=None, order=None, *, descending=False, stable=True):
    """Indices that sort ``x`` along an axis (Array API ``argsort``); always stable: equal
    elements keep their original order, in descending order too.

    Args:
        x: input array, any dtype (ordering as in ``sort``).
        axis: the axis (default last) or None for the flattened array.
        kind, order, stable: as in ``sort``. descending: NaNs first, ties in original order.
    Returns:
        int64 Array of ``x``'s shape (``(size,)`` for ``axis=None``).
    Raises:
        AxisError: axis out of range. ValueError: unknown ``kind``. TypeError: ``order`` given.
    """
    if (type(x) is Array and kind is None and order is None and axis is not None
            and current_trace() is EVAL_TRACE):
        ax = normalize_axis("argsort", axis, x._buf.ndim)
        return wrap(_argsort_impl(x._buf, axis=ax, descending=bool(descending)), False)
    x, ax = _sort_args("argsort", x, axis, kind, order)
    return argsort_p.bind(x, axis=ax, descending=bool(descending))


def searchsorted(x1, x2, /, side="left", sorter=None):
    """Insertion points of ``x2`` into the sorted 1-D ``x1`` that keep it sorted.

    ``side="left"`` gives the first valid position (``x1[i-1] < v <= x1[i]``), ``"right"`` the
    last (``x1[i-1] <= v < x1[i]``). NaNs count as larger than everything, as in ``sort``.

    Args:
        x1: 1-D array ``(n,)``, sorted ascending (or made so by ``sorter``); not checked.
        x2: values, any shape ``(*dims)``; promoted with ``x1`` to a common dtype.
        side: "left" or "right".
        sorter: optional int array ``(n,)`` of indices that sort ``x1`` (e.g. ``argsort(x1)``).
    Returns:
        int64 Array of shape ``(*dims)`` with entries in ``0..n``.
    Raises:
        ValueError: ``x1`` not 1-D, bad ``side``, ``sorter`` of the wrong shape.
        TypeError: dtypes that do not promote.
    """
    if side not in ("left", "right"):
        raise ValueError(f"searchsorted: side must be 'left' or 'right', got {side!r}")
    a, v = promote_operands("searchsorted", (x1, x2))
    if a.ndim != 1:
        raise ValueError(f"searchsorted: x1 must be 1-D, got shape {tuple(a.shape)}")
    if sorter is not None:
        s = operand(sorter, "searchsorted")
        if tuple(s.shape) != tuple(a.shape) or not dtypes.is_integer(s.dtype):
            raise ValueError(f"searchsorted: sorter must be an integer array of x1's shape "
                             f"{tuple(a.shape)}, got {s.dtype}{list(s.shape)}")
        a = _ns().take(a, s)
    if type(a) is Array and type(v) is Array and current_trace() is EVAL_TRACE:
        return wrap(_searchsorted_impl(a._buf, v._buf, side=side), False)
    return searchsorted_p.bind(a, v, side=side)


def top_k(x, k, /):
    """The ``k`` largest entries along the last axis and their indices (JAX ``lax.top_k``).

    Args:
        x: array of shape ``(*batch, n)``, n >= k. NaN counts as larger than every number.
        k: a static int, ``0 <= k <= n``.
    Returns:
        ``(values, indices)``: values of ``x``'s dtype and int64 indices, both
        ``(*batch, k)``, in descending order; ties keep the lower index first.
    Raises:
        ValueError: 0-d input or ``k`` out of range. TypeError: non-integer ``k``.
    """
    x = operand(x, "top_k")
    try:
        k = operator.index(k)
    except TypeError:
        raise TypeError(f"top_k: k must be a Python int, got {type(k).__name__}") from None
    if x.ndim == 0:
        raise ValueError("top_k: input must have at least one dimension, got a 0-d array")
    n = x.shape[-1]
    if not 0 <= k <= n:
        raise ValueError(f"top_k: k={k} is out of range for the last axis of size {n} "
                         f"(valid: 0..{n})")
    values, indices = top_k_p.bind(x, k=k)
    return values, indices


# ---- unique (eager only) -----------------------------------------------------------------------

UniqueAllResult = collections.namedtuple(
    "UniqueAllResult", ["values", "indices", "inverse_indices", "counts"])
UniqueCountsResult = collections.namedtuple("UniqueCountsResult", ["values", "counts"])
UniqueInverseResult = collections.namedtuple("UniqueInverseResult", ["values", "inverse_indices"])


def _concrete(op, x):
    """The NumPy buffer of ``x``; a clear error for traced values (value-dependent shapes)."""
    x = operand(x, op)
    if isinstance(x, Tracer):
        try:
            x = x.to_concrete()
        except ConcretizationError:
            raise ConcretizationError(
                f"{op}: the output shape depends on the values of the input, so {op} needs a "
                f"concrete array and cannot run on the traced value {x.aval.str_short()} (inside "
                "make_ir / compile / vmap / grad). Call it outside the transformation, or use a "
                "fixed-size formulation (e.g. sort and compare neighbours).") from None
    return x._buf


def _np_unique(op, buf, **kwargs):
    dt = buf.dtype
    if dt in _ACC32:
        # NumPy has no sort for the ml_dtypes floats: find uniques in float32 (exact).
        out = np.unique(buf.astype(_F32), **kwargs)
        if isinstance(out, tuple):
            return (out[0].astype(dt),) + tuple(out[1:])
        return out.astype(dt)
    return np.unique(buf, **kwargs)


def _wrap_index(a):
    return wrap(np.asarray(a, dtype=_I64), False)


def unique(x, /, return_index=False, return_inverse=False, return_counts=False, axis=None, *,
           equal_nan=True, size=None, fill_value=None):
    """Sorted unique elements of ``x`` (NumPy ``unique``); eager only unless ``size`` is given.

    Args:
        x: input array, shape ``(*dims)``.
        return_index: also return the index of the first occurrence of each unique value.
        return_inverse: also return indices into the uniques that rebuild ``x``.
        return_counts: also return how often each unique value occurs.
        axis: None (flatten) or the axis along which unique sub-arrays are found.
        equal_nan: collapse all NaNs into one (NumPy's default); False keeps each NaN.
        size: None, or a static int (``axis=None`` only, as JAX): return exactly ``size``
            uniques, the first ``size`` if there are more, padded with ``fill_value`` if fewer;
            padded indices and counts are 0. This form traces (``compile``, ``vmap``, ``grad``)
            and is differentiable in the values.
        fill_value: the padding value (default: the smallest element of ``x``).
    Returns:
        The unique values (1-D for ``axis=None``), then the requested int64 arrays in the order
        index, inverse, counts, as a tuple when any is requested (NumPy's convention). For
        ``axis=None`` the inverse has ``x``'s shape.
    Raises:
        ConcretizationError: (a TypeError) ``x`` is traced without ``size``: the output shape
            depends on values.
        AxisError: axis out of range. ValueError: ``size`` with an axis, or negative.
    """
    size = check_sized(size, axis)
    if size is not None:
        return unique_sized(x, size, fill_value, return_index, return_inverse, return_counts,
                            equal_nan)
    buf = _concrete("unique", x)
    if axis is not None:
        axis = normalize_axis("unique", axis, buf.ndim)
    out = _np_unique("unique", buf, return_index=return_index, return_inverse=return_inverse,
                     return_counts=return_counts, axis=axis, equal_nan=equal_nan)
    if not isinstance(out, tuple):
        return wrap(out, False)
    return (wrap(out[0], False),) + tuple(_wrap_index(a) for a in out[1:])


def unique_values(x, /):
    """Unique elements of ``x`` as a sorted 1-D array (Array API); eager only.

    NaNs are all kept (each NaN is distinct, as the Array API says). Raises ConcretizationError
    (a TypeError) on traced input: the output shape depends on the values.
    """
    buf = _concrete("unique_values", x)
    return wrap(_np_unique("unique_values", buf, equal_nan=False), False)


def unique_counts(x, /):
    """``(values, counts)`` of the unique elements (Array API); eager only; NaNs distinct."""
    buf = _concrete("unique_counts", x)
    v, c = _np_unique("unique_counts", buf, return_counts=True, equal_nan=False)
    return UniqueCountsResult(wrap(v, False), _wrap_index(c))


def unique_inverse(x, /):
    """``(values, inverse_indices)``: ``values[inverse_indices]`` rebuilds ``x`` (Array API);
    the inverse has ``x``'s shape; eager only; NaNs distinct."""
    buf = _concrete("unique_inverse", x)
    v, inv = _np_unique("unique_inverse", buf, return_inverse=True, equal_nan=False)
    return UniqueInverseResult(wrap(v, False), _wrap_index(np.reshape(inv, buf.shape)))


def unique_all(x, /):
    """``(values, indices, inverse_indices, counts)`` (Array API); eager only; NaNs distinct.

    ``indices`` are the first occurrences in the flattened ``x``; ``inverse_indices`` has
    ``x``'s shape.
    """
    buf = _concrete("unique_all", x)
    v, idx, inv, c = _np_unique("unique_all", buf, return_index=True, return_inverse=True,
                                return_counts=True, equal_nan=False)
    return UniqueAllResult(wrap(v, False), _wrap_index(idx),
                           _wrap_index(np.reshape(inv, buf.shape)), _wrap_index(c))
