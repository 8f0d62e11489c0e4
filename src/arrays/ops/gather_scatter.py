"""The indexing primitives: ``gather``, ``scatter``, ``argwhere`` and ``choose``.

Every NumPy-style indexing expression (``x[idx]``, ``x.at[idx].set(v)``, ``take``, ``diagonal``,
...) is normalised in Python (statically) into at most one of these, plus static slicing and
reshapes for basic indexing. Their convention:

``gather(x, *indices, mode, fill_value)``
    ``x`` of shape ``(d0, ..., d{k-1}, *rest)`` indexed on its k LEADING axes by k integer arrays
    whose shapes broadcast to ``B``; the output has shape ``(*B, *rest)``:
    ``out[b, r] = x[indices[0][b], ..., indices[k-1][b], r]``.
``scatter(x, updates, *indices, op, mode, unique_indices)``
    the same indexing; ``updates`` has shape exactly ``(*B, *rest)`` and the dtype of ``x``;
    returns a copy of ``x`` where each indexed element is combined with its update by ``op``:
    "set" (replace), "add", "multiply", "min", "max". Duplicate indices accumulate all their
    updates for add / multiply / min / max (``np.add.at`` semantics); for "set" the LAST update
    in C order of ``B`` wins, deterministically.

Index values: negative indices of signed dtypes are first wrapped once (``i + d`` for ``i < 0``),
as in NumPy; then ``mode`` decides what an index outside ``0..d-1`` does:

=====================  ========================================================================
mode                   meaning
=====================  ========================================================================
"clip"                 clamped into ``0..d-1``
"wrap"                 taken modulo ``d`` (applied to the raw index, so -1 is d-1 as well)
"fill"                 gather: the output element is ``fill_value``; scatter: same as "drop"
"drop"                 scatter: the update is ignored; gather: same as "fill"
"promise_in_bounds"    the caller promises in-bounds indices; out-of-bounds ones give
                       unspecified values but never touch memory outside the array (gather
                       clamps, scatter drops)
=====================  ========================================================================

An axis of size 0 has no valid index: gathers from it give ``fill_value`` (mode "fill") or 0.

Transformation rules (indices are integers: they never carry a tangent):

* gather is linear in ``x``: its JVP gathers the tangent (fill positions get 0, not the fill);
  its transpose scatter-adds the cotangent into zeros with the adjoint mode (clamped indices
  accumulate at the clamped position, filled / dropped ones contribute nothing).
* scatter "set" / "add" are linear in ``(x, updates)`` jointly: JVP = the same scatter of the
  tangents; the transpose of "add" sends ``ct`` to ``x`` and ``gather(ct)`` to the updates; the
  transpose of "set" finds, for each element, which update was written last (by scattering update
  ids) so only that update gets the cotangent and overwritten elements of ``x`` get none.
  "multiply" uses the product rule with exact per-update "products of the other updates at the
  same index" (see ``_other_products``); "min" / "max" send the tangent to the selected
  contributor(s), ties (between ``x`` and updates, or among updates) sharing it equally.
* batching adds the batch as one more leading index (an iota) when an index is batched, or moves
  it behind the indexed axes otherwise: always ONE gather / scatter.
* argwhere has a zero JVP (integer output); batched, it ranks the nonzero elements of each
  example with a cumsum and scatters their flat positions (static ``size``).
* choose is linear in the choices: the JVP chooses among the tangents, the transpose routes ``ct``
  back to the chosen operand (summing broadcast dims).

Sharding strategies (one mesh axis; see rules_sharding.py):

* gather: the index batch dims may be split (the indices split alike, the operand replicated), or
  a window (not indexed) dim of the operand and the result alike (indices replicated); a
  selection passes pending maxima / minima, and pending sums when no fill value enters.
* scatter: window dims split alike in the operand, the updates and the result; pending sums pass
  a "set" / "add" (linear in operand and updates jointly: each piece writes the same positions,
  so the same duplicate wins), pending maxima / minima / products the matching op; and for
  "add" / "max" / "min" / "multiply" the updates may be split along their index batch dims with
  the indices alike: each device combines its own updates into a pending result (the operand
  held as a partial value: on one device for sums, on all for maxima / minima).
* choose: elementwise, with the chosen operands' pending reductions passing through.
* argwhere: replicated (its result depends on every element's position in the whole array).
"""
from __future__ import annotations

import numpy as np

from ...core import casting, dtypes
from ...core.ad_util import Zero, is_undefined, tangent_aval
from ...core.avals import ShapedArray
from ...core.primitive import Primitive
from ...core.trace import ConcretizationError
from ..array import wrap
from . import rules as R
from . import rules_sharding as RS
from . import shape_lax
from .convert_element_type import convert_element_type
from .elementwise_family import broadcast_shapes

GATHER_MODES = ("clip", "wrap", "fill", "drop", "promise_in_bounds")
SCATTER_OPS = ("set", "add", "multiply", "min", "max")
_INTP_MAX = np.iinfo(np.intp).max


def default_fill_value(dt):
    """The fill of out-of-bounds gathers: NaN for inexact dtypes (float4_e2m1fn, which has no NaN:
    its largest finite value), the minimum for signed ints, the maximum for unsigned, True for
    bool (JAX's choice: values that stand out)."""
    if dtypes.is_bool(dt):
        return True
    if dtypes.is_signed_int(dt):
        return int(np.iinfo(dt).min)
    if dtypes.is_unsigned_int(dt):
        return int(np.iinfo(dt).max)
    if dt == dtypes.float4_e2m1fn:
        return float(dtypes.finfo(dt).max)
    if dtypes.is_complex(dt):
        return complex(np.nan, np.nan)
    return float("nan")


def _check_indices(op, x_aval, idx_avals):
    k = len(idx_avals)
    if k > len(x_aval.shape):
        raise IndexError(f"{op}: {k} index arrays for an operand of ndim {len(x_aval.shape)}")
    for a in idx_avals:
        if not dtypes.is_integer(a.dtype):
            raise TypeError(f"{op}: index arrays must have an integer dtype, got {a.dtype}")
    return broadcast_shapes(op, *[a.shape for a in idx_avals]) if k else ()


def _normalize_indices(idx, shape, mode):
    """Returns (index arrays as intp, wrapped and moded; valid mask or None when all valid)."""
    out = []
    valid = None
    for i, d in zip(idx, shape):
        i = np.asarray(i)
        if i.dtype == np.uint64:
            i = np.minimum(i, _INTP_MAX)  # huge unsigned values stay out of bounds, not negative
        i = i.astype(np.intp, copy=False)
        if mode == "wrap":
            i = np.mod(i, d) if d else np.zeros_like(i)
            out.append(i)
            continue
        if i.size and i.min() < 0:
            i = np.where(i < 0, i + d, i)
        if i.size and (i.min() < 0 or i.max() >= d):
            if mode in ("fill", "drop", "promise_in_bounds"):
                ok = (i >= 0) & (i < d)
                valid = ok if valid is None else valid & ok
            i = np.clip(i, 0, max(d - 1, 0))
        out.append(i)
    return out, valid


# ---- helpers of the transformation rules -------------------------------------------------------

def _const(value, shape, dt):
    """A concrete constant array (a known value in every transformation)."""
    return wrap(np.full(shape, value, dtype=dt), False)


def _read_back(a, idx, mode, fill=0):
    """Gathers ``a`` at the positions a scatter in ``mode`` writes: out-of-bounds indices that
    the scatter drops read ``fill`` (so dropped updates get no cotangent)."""
    if mode in ("clip", "wrap"):
        return gather_p.bind(a, *idx, mode=mode, fill_value=None)
    return gather_p.bind(a, *idx, mode="fill", fill_value=fill)


def _adjoint_scatter_mode(gather_mode):
    # Gathers with "promise_in_bounds" clamp, so clamping is their exact adjoint.
    return {"fill": "drop", "drop": "drop", "wrap": "wrap"}.get(gather_mode, "clip")


def _keep(mask, t):
    """``t`` where ``mask`` holds, else 0 (``mask`` broadcasts against ``t``); linear in ``t``."""
    return choose_p.bind(mask, _const(0, (), t.dtype), t, mode="clip")


def _batch_at(x, d, size, pos):
    """``x`` with its batch axis (``d``; None: unbatched, broadcast to ``size``) at ``pos``."""
    if d is not None:
        return R.move_axis(x, d, pos)
    shape = tuple(x.shape)
    return shape_lax.broadcast_in_dim(
        x, shape[:pos] + (size,) + shape[pos:],
        tuple(range(pos)) + tuple(range(pos + 1, len(shape) + 1)))


def _batch_index_shape(idx, dims):
    """Per-example broadcast shape of the index arrays (their batch axes removed)."""
    shapes = [tuple(i.shape) if d is None else tuple(i.shape[:d]) + tuple(i.shape[d + 1:])
              for i, d in zip(idx, dims)]
    return broadcast_shapes("gather", *shapes) if shapes else ()


def _batched_indices(idx, dims, size, nb):
    """Index arrays broadcasting to ``(size, *B)`` (``nb = len(B)``) with an iota over the batch
    prepended: batched ones get their batch axis first and unit dims up to rank ``nb + 1``."""
    out = [shape_lax.iota(dtypes.int64, (size,) + (1,) * nb, 0)]
    for i, d in zip(idx, dims):
        if d is not None:
            i = R.move_axis(i, d, 0)
            pad = nb + 1 - i.ndim
            if pad:
                i = shape_lax.reshape(i, (size,) + (1,) * pad + tuple(i.shape[1:]))
        out.append(i)
    return out


# ---- gather ------------------------------------------------------------------------------------

gather_p = Primitive("gather", family="indexing")


def _gather_abstract_eval(x, *idx, mode, fill_value):
    batch = _check_indices("gather", x, idx)
    return ShapedArray(batch + tuple(x.shape[len(idx):]), x.dtype, x.weak_type)


def _gather_impl(x, *idx, mode, fill_value):
    x = np.asarray(x)
    k = len(idx)
    if k == 0:
        return x
    batch = np.broadcast_shapes(*[np.shape(i) for i in idx])
    rest = x.shape[k:]
    if 0 in x.shape[:k]:
        # No index is valid on an empty axis: the result is all fill (or zeros for clip/wrap).
        fill = fill_value if mode in ("fill", "drop") else 0
        return np.full(batch + rest, casting.astype(fill, x.dtype), dtype=x.dtype)
    norm, valid = _normalize_indices(idx, x.shape, mode)
    out = x[tuple(norm)]
    if valid is not None and mode in ("fill", "drop"):
        fill = casting.astype(fill_value, x.dtype)
        mask = np.broadcast_to(valid, batch).reshape(batch + (1,) * len(rest))
        out = np.where(mask, out, fill)
    return out


gather_p.abstract_eval = _gather_abstract_eval
gather_p.impl = _gather_impl
gather_p.weak_type = lambda x_weak, *idx_weak, **params: x_weak


def _gather_jvp(primals, tangents, *, mode, fill_value):
    x, *idx = primals
    ans = gather_p.bind(x, *idx, mode=mode, fill_value=fill_value)
    t = tangents[0]
    if type(t) is Zero:
        return ans, Zero(tangent_aval(ans.aval))
    # Filled elements are constants: their tangent is 0 (not the fill value).
    return ans, gather_p.bind(t, *idx, mode=mode,
                              fill_value=0 if mode in ("fill", "drop") else None)


def _gather_transpose(ct, x, *idx, mode, fill_value):
    rest = [None] * len(idx)
    if type(ct) is Zero:
        return [None] + rest
    zeros = _const(0, x.aval.shape, ct.dtype)
    return [scatter_p.bind(zeros, ct, *idx, op="add", mode=_adjoint_scatter_mode(mode),
                           unique_indices=False)] + rest


def _gather_batch(args, dims, *, mode, fill_value):
    x, *idx = args
    dx, *didx = dims
    params = dict(mode=mode, fill_value=fill_value)
    nb = len(_batch_index_shape(idx, didx))
    if all(d is None for d in didx):
        # Only x is batched: put its batch axis right behind the indexed ones; it becomes a
        # window axis of the gather, landing right after the index batch dims.
        return gather_p.bind(R.move_axis(x, dx, len(idx)), *idx, **params), nb
    size = R.batch_size(args, dims)
    full = _batched_indices(idx, didx, size, nb)
    if dx is None:
        return gather_p.bind(x, *full[1:], **params), 0
    # Both batched: the batch becomes one more (leading, always in-bounds) indexed axis.
    return gather_p.bind(R.move_axis(x, dx, 0), *full, **params), 0


def _index_shards(idx, nb, d, size):
    """Placements of the index arrays (broadcasting to a rank-``nb`` B) for B's dim ``d`` of
    ``size`` split: the ones that have it split alike, the broadcast ones replicated."""
    out = []
    for a in idx:
        k = d - (nb - len(a.shape))
        out.append(RS.Shard(k) if k >= 0 and a.shape[k] == size else RS.R)
    return tuple(out)


def _gather_sharding(in_avals, out_avals, *, mode, fill_value):
    x, idx = in_avals[0], in_avals[1:]
    k, out = len(idx), out_avals[0]
    nb = len(out.shape) - (len(x.shape) - k)
    combos = [((RS.Shard(d),), (RS.R,) + _index_shards(idx, nb, d, out.shape[d]))
              for d in range(nb) if out.shape[d] > 1]
    combos += [((RS.Shard(nb + j - k),), (RS.Shard(j),) + (RS.R,) * k)
               for j in range(k, len(x.shape)) if x.shape[j] > 1]
    ops = ["max", "min"]
    if x.dtype.kind != "b" and (mode not in ("fill", "drop") or fill_value == 0):
        ops.append("sum")
    return combos + [((RS.Partial(o),), (RS.Partial(o),) + (RS.R,) * k) for o in ops]


gather_p.jvp = _gather_jvp
gather_p.transpose = _gather_transpose
gather_p.batch = _gather_batch
gather_p.is_linear = True
gather_p.sharding = _gather_sharding


def gather(x, *indices, mode="clip", fill_value=None):
    """Gathers ``x[indices[0][b], ..., indices[k-1][b], ...]`` for every ``b`` in the broadcast
    shape ``B`` of the index arrays (see the module docstring for ``mode``).

    Args:
        x: operand of shape ``(d0, ..., d{k-1}, *rest)``.
        *indices: k integer arrays (Arrays/Tracers) broadcasting to ``B``.
        mode: "clip", "wrap", "fill", "drop" or "promise_in_bounds".
        fill_value: Python scalar for mode "fill"/"drop" (default: ``default_fill_value``).
    Returns:
        Array of shape ``(*B, *rest)`` and the dtype (and weak type) of ``x``.
    """
    if mode in ("fill", "drop"):
        fill_value = default_fill_value(x.dtype) if fill_value is None else fill_value
    else:
        fill_value = None
    return gather_p.bind(x, *indices, mode=mode, fill_value=fill_value)


# ---- scatter -----------------------------------------------------------------------------------

scatter_p = Primitive("scatter", family="indexing")


def _scatter_abstract_eval(x, updates, *idx, op, mode, unique_indices):
    batch = _check_indices("scatter", x, idx)
    want = batch + tuple(x.shape[len(idx):])
    if tuple(updates.shape) != want:
        raise ValueError(f"scatter: updates of shape {tuple(updates.shape)} for an indexed shape "
                         f"{want}")
    if updates.dtype != x.dtype:
        raise TypeError(f"scatter: updates dtype {updates.dtype} differs from operand dtype "
                        f"{x.dtype}")
    return x


_UFUNCS = {"add": np.add, "multiply": np.multiply, "min": np.minimum, "max": np.maximum}


def _scatter_impl(x, updates, *idx, op, mode, unique_indices):
    x = np.asarray(x)
    updates = np.asarray(updates)
    k = len(idx)
    if k == 0:
        return updates.copy() if op == "set" else _UFUNCS[op](x, updates)
    out = np.array(x, copy=True)
    batch = np.broadcast_shapes(*[np.shape(i) for i in idx])
    if 0 in x.shape or 0 in batch:   # nothing to update (x of shape (1, 0) included)
        return out
    mode = "drop" if mode in ("fill", "promise_in_bounds") else mode
    norm, valid = _normalize_indices(idx, x.shape, mode)
    if valid is not None or (op == "set" and not unique_indices):
        norm = [i if i.shape == batch else np.broadcast_to(i, batch) for i in norm]
        if valid is not None:
            valid = np.broadcast_to(valid, batch)
            norm = [i[valid] for i in norm]
            updates = updates[valid]
        else:
            norm = [i.reshape(-1) for i in norm]
            # the count spelled out: -1 is ambiguous when a window dim is empty
            updates = updates.reshape((norm[0].size,) + updates.shape[len(batch):])
    if op == "set":
        if not unique_indices and len(norm[0]) > 1:
            # NumPy does not promise which duplicate wins; we keep the last one explicitly.
            flat = np.ravel_multi_index(tuple(norm), x.shape[:k])
            order = np.argsort(flat, kind="stable")   # equal targets stay in update order
            runs = flat[order]
            last = np.ones(len(runs), dtype=bool)
            last[:-1] = runs[1:] != runs[:-1]
            keep = order[last]
            norm = [i[keep] for i in norm]
            updates = updates[keep]
        out[tuple(norm)] = updates
    else:
        _UFUNCS[op].at(out, tuple(norm), updates)
    return out


scatter_p.abstract_eval = _scatter_abstract_eval
scatter_p.impl = _scatter_impl
scatter_p.weak_type = lambda x_weak, *rest, **params: x_weak


def _scatter_add_into_zeros(shape, v, idx, mode, unique_indices):
    return scatter_p.bind(_const(0, shape, v.dtype), v, *idx, op="add", mode=mode,
                          unique_indices=unique_indices)


def _scatter_jvp_linear(ans, x, u, idx, tx, tu, op, mode, unique_indices):
    # "set" and "add" are linear in (x, updates) jointly: the same scatter of the tangents (the
    # same indices, so "last update wins" picks the same update as in the primal).
    if op == "add" and type(tu) is Zero:
        return tx
    return scatter_p.bind(R.instantiate(tx), R.instantiate(tu), *idx, op=op, mode=mode,
                          unique_indices=unique_indices)


def _other_products(u, prod, idx, shape, mode, unique_indices):
    """For each update ``u_k`` (written to element ``p_k``): the product ``E_k`` of the OTHER
    updates written to ``p_k`` (1 when ``p_k`` is not duplicated); ``prod`` is the product of
    all updates per element.

    No logs and no division by zero: ``E_k = prod / u_k`` for a nonzero ``u_k``; for a zero
    ``u_k`` it is ``Q`` (the product of the nonzero updates at ``p_k``) when ``u_k`` is the
    only zero there, else 0 -- written as ``Q * (S0 - u_k)`` when there are two zeros (``S0``
    = sum of the zero updates at ``p_k``; value 0) so that the derivative of ``E_k`` is exact
    too, which makes second derivatives exact for any number of zero updates. (``prod / u_k``
    can overflow where the product of the other updates would not: the price of needing no
    sort of the indices.)
    """
    snp = R.snp()
    params = dict(mode=mode, unique_indices=unique_indices)
    zero = snp.equal(u, 0)
    safe = snp.where(zero, 1, u)
    zeros_at = scatter_p.bind(_const(0, shape, dtypes.int32),
                              convert_element_type(zero, dtypes.int32, False), *idx, op="add",
                              **params)
    nonzero_prod = scatter_p.bind(_const(1, shape, u.dtype), safe, *idx, op="multiply",
                                  **params)
    zero_sum = _scatter_add_into_zeros(shape, _keep(zero, u), idx, mode, unique_indices)
    z = _read_back(zeros_at, idx, mode)
    second = snp.where(snp.equal(z, 2), snp.subtract(_read_back(zero_sum, idx, mode), u), 0)
    when_zero = snp.multiply(_read_back(nonzero_prod, idx, mode),
                             snp.where(snp.equal(z, 1), 1, second))
    return snp.where(zero, when_zero, snp.divide(_read_back(prod, idx, mode), safe))


def _scatter_jvp_multiply(ans, x, u, idx, tx, tu, op, mode, unique_indices):
    # out[p] = x[p] * prod_k u_k  =>  dout[p] = dx[p] * prod_k u_k + x[p] * sum_k du_k * (product
    # of the updates at p other than u_k): correct with duplicates and zeros (no division by x
    # or by a zero update).
    snp = R.snp()
    shape = tuple(x.shape)
    params = dict(mode=mode, unique_indices=unique_indices)
    out = Zero(tangent_aval(ans.aval))
    if type(tx) is not Zero or not unique_indices:
        prod = scatter_p.bind(_const(1, shape, u.dtype), u, *idx, op="multiply", **params)
    if type(tx) is not Zero:
        out = snp.multiply(tx, prod)
    if type(tu) is not Zero:
        coeff = _read_back(x, idx, mode)
        if not unique_indices:
            coeff = snp.multiply(coeff, _other_products(u, prod, idx, shape, mode,
                                                        unique_indices))
        du = _scatter_add_into_zeros(shape, snp.multiply(coeff, tu), idx, mode, unique_indices)
        out = R.add_tangents(out, du)
    return out


def _same(a, b):
    snp = R.snp()
    return snp.logical_or(snp.equal(a, b), snp.logical_and(snp.isnan(a), snp.isnan(b)))


def _scatter_jvp_extremum(ans, x, u, idx, tx, tu, op, mode, unique_indices):
    # The tangent of each output element is the mean of the tangents of the contributors that
    # equal it (x[p] and/or updates): ties share it equally, as in reduce_max / reduce_min.
    snp = R.snp()
    shape, dt = tuple(x.shape), x.dtype
    from_x = _same(x, ans)
    from_u = _same(u, _read_back(ans, idx, mode))
    count = snp.add(convert_element_type(from_x, dt, False),
                    _scatter_add_into_zeros(shape, convert_element_type(from_u, dt, False),
                                            idx, mode, unique_indices))
    out = Zero(tangent_aval(ans.aval))
    if type(tx) is not Zero:
        out = _keep(from_x, tx)
    if type(tu) is not Zero:
        out = R.add_tangents(out, _scatter_add_into_zeros(shape, _keep(from_u, tu), idx, mode,
                                                          unique_indices))
    return snp.multiply(out, snp.reciprocal(count))


_SCATTER_JVPS = {"set": _scatter_jvp_linear, "add": _scatter_jvp_linear,
                 "multiply": _scatter_jvp_multiply, "min": _scatter_jvp_extremum,
                 "max": _scatter_jvp_extremum}


def _scatter_jvp(primals, tangents, *, op, mode, unique_indices):
    x, u, *idx = primals
    tx, tu = tangents[:2]
    ans = scatter_p.bind(x, u, *idx, op=op, mode=mode, unique_indices=unique_indices)
    if type(tx) is Zero and type(tu) is Zero:
        return ans, Zero(tangent_aval(ans.aval))
    t = _SCATTER_JVPS[op](ans, x, u, idx, tx, tu, op, mode, unique_indices)
    return ans, R.to_tangent_dtype(t, ans.aval)


def _last_writer(x_aval, u_aval, idx, mode, unique_indices):
    """(mask over x's indexed positions: no update lands there, mask over the updates: this
    update is the one a "set" scatter keeps), both shaped to broadcast against x / updates."""
    k = len(idx)
    lead, rest = tuple(x_aval.shape[:k]), tuple(x_aval.shape[k:])
    batch = tuple(u_aval.shape[:len(u_aval.shape) - len(rest)])
    n = 1
    for d in batch:
        n *= d
    ids = shape_lax.reshape(shape_lax.iota(dtypes.int64, (n,), 0), batch)
    owner = scatter_p.bind(_const(-1, lead, dtypes.int64), ids, *idx, op="set", mode=mode,
                           unique_indices=unique_indices)
    snp = R.snp()
    untouched = snp.less(owner, 0)
    kept = snp.equal(_read_back(owner, idx, mode, fill=-1), ids)
    ones = (1,) * len(rest)
    return (shape_lax.reshape(untouched, lead + ones), shape_lax.reshape(kept, batch + ones))


def _scatter_transpose(ct, x, u, *idx, op, mode, unique_indices):
    if op not in ("set", "add"):
        raise TypeError(f"scatter: op {op!r} is not linear, so it has no transpose "
                                  "(its JVP rule emits only 'add' / 'set' scatters)")
    rest = [None] * len(idx)
    if type(ct) is Zero:
        return [None, None] + rest
    if op == "add":
        ct_x = ct if is_undefined(x) else None
        ct_u = _read_back(ct, idx, mode) if is_undefined(u) else None
        return [ct_x, ct_u] + rest
    untouched, kept = _last_writer(x.aval, u.aval, idx, mode, unique_indices)
    ct_x = _keep(untouched, ct) if is_undefined(x) else None
    ct_u = _keep(kept, _read_back(ct, idx, mode)) if is_undefined(u) else None
    return [ct_x, ct_u] + rest


def _scatter_batch(args, dims, *, op, mode, unique_indices):
    x, u, *idx = args
    dx, du, *didx = dims
    params = dict(op=op, mode=mode, unique_indices=unique_indices)
    size = R.batch_size(args, dims)
    nb = len(_batch_index_shape(idx, didx))
    if all(d is None for d in didx):
        # Indices shared by all examples: the batch is a window axis right behind the indexed
        # axes of x (and behind the index batch dims of the updates).
        x = _batch_at(x, dx, size, len(idx))
        u = _batch_at(u, du, size, nb)
        return scatter_p.bind(x, u, *idx, **params), len(idx)
    # Per-example indices: the batch becomes one more leading index (an iota), so examples
    # never collide and each keeps its own duplicate order.
    full = _batched_indices(idx, didx, size, nb)
    return scatter_p.bind(_batch_at(x, dx, size, 0), _batch_at(u, du, size, 0), *full,
                          **params), 0


# the pending reduction a scatter op passes (None: not expressible)
_SCATTER_PENDING = {"set": "sum", "add": "sum", "multiply": "prod", "min": "min", "max": "max"}


def _scatter_sharding(in_avals, out_avals, *, op, mode, unique_indices):
    x, u, idx = in_avals[0], in_avals[1], in_avals[2:]
    k = len(idx)
    nb = len(u.shape) - (len(x.shape) - k)
    P, Rep = RS.Partial, RS.R
    combos = [((RS.Shard(j),), (RS.Shard(j), RS.Shard(nb + j - k)) + (Rep,) * k)
              for j in range(k, len(x.shape)) if x.shape[j] > 1]
    pend = _SCATTER_PENDING[op]
    if pend == "sum" and x.dtype.kind == "b":   # bool addition is logical or
        return combos
    combos.append(((P(pend),), (P(pend), P(pend)) + (Rep,) * k))
    if op != "set":   # which duplicate a "set" keeps is decided across all updates
        combos += [((P(pend),), (P(pend), RS.Shard(d)) + _index_shards(idx, nb, d, u.shape[d]))
                   for d in range(nb) if u.shape[d] > 1]
    return combos


scatter_p.jvp = _scatter_jvp
scatter_p.transpose = _scatter_transpose
scatter_p.batch = _scatter_batch
scatter_p.is_linear = True
scatter_p.sharding = _scatter_sharding


def scatter(x, updates, *indices, op="set", mode="drop", unique_indices=False):
    """Returns ``x`` with ``x[indices...] <op>= updates`` applied functionally (module docstring).

    Args:
        x: operand of shape ``(d0, ..., d{k-1}, *rest)``.
        updates: shape ``(*B, *rest)``, the dtype of ``x``.
        *indices: k integer arrays broadcasting to ``B``.
        op: "set", "add", "multiply", "min" or "max".
        mode: "drop", "fill" (= drop), "clip", "wrap" or "promise_in_bounds".
        unique_indices: a promise that no index repeats (lets "set" skip de-duplication).
    Returns:
        Array of the shape, dtype and weak type of ``x``.
    """
    return scatter_p.bind(x, updates, *indices, op=op, mode=mode,
                          unique_indices=bool(unique_indices))


# ---- argwhere ----------------------------------------------------------------------------------

argwhere_p = Primitive("argwhere", family="indexing")


def _argwhere_abstract_eval(x, *, size, fill_value):
    if size is None:
        raise ConcretizationError(
            f"argwhere: the number of nonzero elements of a traced {x.str_short()} depends on "
            "its values; pass a static size= (and fill_value=) to get a fixed-shape result")
    return ShapedArray((size, len(x.shape)), dtypes.int64, False)


def _argwhere_impl(x, *, size, fill_value):
    out = np.argwhere(np.asarray(x)).astype(np.int64, copy=False)
    if size is None:
        return out
    if out.shape[0] >= size:
        return np.ascontiguousarray(out[:size])
    pad = np.full((size - out.shape[0], out.shape[1]), fill_value, dtype=np.int64)
    return np.concatenate([out, pad])


argwhere_p.abstract_eval = _argwhere_abstract_eval
argwhere_p.impl = _argwhere_impl


def _argwhere_batch(args, dims, *, size, fill_value):
    # Per example: the nonzero elements are ranked in C order by a cumsum, and each one with
    # rank < size scatters its flat position to slot rank (the others go out of bounds and are
    # dropped); flat positions then become coordinates. One scatter for the whole batch.
    snp = R.snp()
    x = R.move_axis(args[0], dims[0], 0)
    n, shape = x.shape[0], tuple(x.shape[1:])
    total = 1
    for d in shape:
        total *= d
    if total == 0 or size == 0 or not shape:
        if not shape:  # 0-d examples: one row (with no columns) per nonzero example
            return _const(0, (n, size, 0), dtypes.int64), 0
        return _const(fill_value, (n, size, len(shape)), dtypes.int64), 0
    nz = x if dtypes.is_bool(x.dtype) else snp.not_equal(x, 0)
    nz = shape_lax.reshape(nz, (n, total))
    rank = snp.cumsum(convert_element_type(nz, dtypes.int64, False), axis=1)
    slot = snp.where(nz, snp.subtract(rank, 1), size)
    flat = shape_lax.iota(dtypes.int64, (n, total), 1)
    rows = shape_lax.iota(dtypes.int64, (n, 1), 0)
    pos = scatter_p.bind(_const(-1, (n, size), dtypes.int64), flat, rows, slot, op="set",
                         mode="drop", unique_indices=True)
    missing = snp.less(pos, 0)
    coords, stride = [], total
    for d in shape:
        stride //= d
        c = snp.remainder(snp.floor_divide(pos, stride), d)
        coords.append(shape_lax.reshape(snp.where(missing, fill_value, c), (n, size, 1)))
    out = coords[0] if len(coords) == 1 else shape_lax.concatenate(coords, 2)
    return convert_element_type(out, dtypes.int64, False), 0


R.defjvp_zero(argwhere_p)
argwhere_p.batch = _argwhere_batch
argwhere_p.sharding = RS.replicated_only


# ---- choose ------------------------------------------------------------------------------------

choose_p = Primitive("choose", family="indexing")


def _choose_abstract_eval(which, *choices, mode):
    if not (dtypes.is_integer(which.dtype) or dtypes.is_bool(which.dtype)):
        raise TypeError(f"choose: the index array must be integer or bool, got {which.dtype}")
    if any(c.dtype != choices[0].dtype for c in choices):
        raise TypeError("choose: all choices must have one dtype, got "
                        f"{', '.join(str(c.dtype) for c in choices)}")
    shape = broadcast_shapes("choose", which.shape, *[c.shape for c in choices])
    return ShapedArray(shape, choices[0].dtype, all(c.weak_type for c in choices))


def _choose_impl(which, *choices, mode):
    which = np.asarray(which)
    n = len(choices)
    if which.dtype == np.bool_:
        which = which.astype(np.intp)
    elif which.dtype == np.uint64:
        which = np.minimum(which, _INTP_MAX)
    which = which.astype(np.intp, copy=False)
    which = np.mod(which, n) if mode == "wrap" else np.clip(which, 0, n - 1)
    shape = np.broadcast_shapes(which.shape, *[np.shape(c) for c in choices])
    dt = np.asarray(choices[0]).dtype
    if n == 2:
        return np.where(np.broadcast_to(which, shape) == 1, choices[1], choices[0]).astype(dt)
    stacked = np.stack([np.broadcast_to(c, shape) for c in choices])
    return np.take_along_axis(stacked, np.broadcast_to(which, shape)[None], 0)[0]


choose_p.abstract_eval = _choose_abstract_eval
choose_p.impl = _choose_impl
choose_p.weak_type = lambda which_weak, *weak, **params: all(weak)


def _choose_jvp(primals, tangents, *, mode):
    which, *choices = primals
    ans = choose_p.bind(which, *choices, mode=mode)
    if all(type(t) is Zero for t in tangents[1:]):
        return ans, Zero(tangent_aval(ans.aval))
    return ans, choose_p.bind(which, *[R.instantiate(t) for t in tangents[1:]], mode=mode)


def _choose_transpose(ct, which, *choices, mode):
    n = len(choices)
    out = [None] * (n + 1)
    if type(ct) is Zero:
        return out
    # The chosen operand per element, normalised by the primitive itself (clip / wrap, bool).
    picked = choose_p.bind(which, *[_const(i, (), dtypes.int32) for i in range(n)], mode=mode)
    snp = R.snp()
    for i, c in enumerate(choices):
        if is_undefined(c):
            part = ct if n == 1 else _keep(snp.equal(picked, i), ct)
            out[i + 1] = R.unbroadcast(part, c.aval)
    return out


choose_p.jvp = _choose_jvp
choose_p.transpose = _choose_transpose
R.batch_elementwise(choose_p)
choose_p.is_linear = True
choose_p.sharding = RS.elementwise(selectors=1)
