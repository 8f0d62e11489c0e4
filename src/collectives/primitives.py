"""The collectives family: functional collective primitives over named mesh / vmap axes.

Every collective takes ``axes``, a tuple of axis names (major to minor), and runs among the
devices that share all coordinates but those axes (their *group*; a device's rank is its linear
index along ``axes``). They appear inside ``shard_map`` bodies and partitioned programs (run by
a runtime through the SPMD context: src/collectives/runtime/), and under
``vmap(..., axis_name=)`` (where the batch rules reduce / gather along the batch).

=============  ====================================  ============================================
primitive      params                                per device
=============  ====================================  ============================================
all_reduce     axes, op (sum/max/min/prod)           the reduction of the group's values
pvary          axes                                  identity (marks an invariant value varying)
all_gather     axes, axis, tiled, axis_size,         the group's values stacked at ``axis``
               out_size                              (tiled: concatenated along it)
shard_slice    axes, axis, tiled, axis_size, size    this rank's chunk of a value along ``axis``
reduce_scatter axes, op, dim, tiled, axis_size,      this rank's chunk of the reduction
               size
all_to_all     axes, split_axis, concat_axis,        chunk ``r`` of every member, concatenated
               tiled, axis_size, split_size,         along ``concat_axis`` (MPI's Alltoall)
               concat_size
ppermute       axes, perm ((src, dst) rank pairs)    the value of the rank sending to this one;
                                                     zeros when none does
axis_index     axes                                  this device's rank (int32 scalar)
=============  ====================================  ============================================

Chunks follow ``torch.chunk`` sizes (src/core/placements.py); ``size`` / ``out_size`` give the
local extent explicitly, so uneven layouts have static shapes per device.

Differentiation follows the replication typing of shard_map bodies (src/collectives/vma.py):
each value is *varying* over some mesh axes and *invariant* over the others. ``all_reduce``
(psum) and ``all_gather`` produce values invariant over their axes; ``pvary`` turns an invariant
value varying. Transposes: psum <-> pvary, all_gather <-> shard_slice (an invariant value's
cotangent is held whole by every device), reduce_scatter -> all_gather, all_to_all -> the
inverse all_to_all, ppermute -> the inverse permutation. Maximum / minimum use the minimum-norm
subgradient at ties (split evenly among the tied members), as Starling's reductions do.
"""
from __future__ import annotations

import numpy as np

from ..arrays.array import wrap
from ..arrays.ops import rules as R
from ..core import dtypes
from ..core.ad_util import Zero, tangent_aval
from ..core.avals import ShapedArray
from ..core.placements import chunk_bounds
from ..core.primitive import Primitive
from .runtime.context import current_spmd



def _ctx(op, axes):
    ctx = current_spmd()
    if ctx is None:
        raise ValueError(
            f"{op}: collective over axes {axes} outside shard_map: collectives run inside a "
            "shard_map body (or vmap with axis_name=); use starling.shard_map(f, mesh, in_specs, "
            "out_specs)")
    for a in axes:
        if a not in ctx.mesh.axis_names:
            raise ValueError(f"{op}: axis {a!r} is not an axis of the mesh {dict(ctx.mesh.shape)}")
    return ctx


def _declare(name, multiple_results=False):
    p = Primitive(name, multiple_results=multiple_results, family="collectives")
    p.meta["collective"] = True
    # ordered effects: every device runs the same collectives in the same order, so passes never
    # fold, merge, drop or reorder them
    p.meta["effectful"] = True
    p.meta["named_axes"] = lambda params: params["axes"]
    return p


def _same(x, **params):
    return x


def _split_axes(axes, name):
    """(axes before ``name``, axes after it) in ``axes``."""
    i = axes.index(name)
    return axes[:i], axes[i + 1:]


def _snp():
    return R.snp()


# ---- all_reduce (psum / pmax / pmin / pprod) ------------------------------------------------

all_reduce_p = _declare("all_reduce")


def _all_reduce_impl(x, *, axes, op):
    ctx = _ctx(f"p{op}" if op != "prod" else "pprod", axes)
    return ctx.comm.all_reduce(ctx, np.asarray(x), axes, op)


def _reduce_along(x, d, op):
    from ..arrays.ops.reductions import (reduce_max_p, reduce_min_p, reduce_prod_p,
                                         reduce_sum_p)
    prim = {"sum": reduce_sum_p, "max": reduce_max_p, "min": reduce_min_p,
            "prod": reduce_prod_p}[op]
    return prim.bind(x, axes=(d,))


def _all_reduce_jvp(primals, tangents, *, axes, op):
    (x,), (t,) = primals, tangents
    out = all_reduce_p.bind(x, axes=axes, op=op)
    if type(t) is Zero:
        return out, Zero(tangent_aval(out.aval))
    snp = _snp()
    if op == "sum":
        return out, all_reduce_p.bind(t, axes=axes, op="sum")
    if op in ("max", "min"):
        # minimum-norm subgradient: the tied members share the derivative evenly
        hit = snp.equal(x, out)
        count = all_reduce_p.bind(hit.astype(t.dtype), axes=axes, op="sum")
        num = all_reduce_p.bind(snp.where(hit, t, snp.zeros_like(t)), axes=axes, op="sum")
        return out, num / count
    # prod: sum over members of t_j * prod_{k != j} x_k, exact with zeros (prefix/suffix products)
    n = _group_size(axes)
    xs = all_gather_p.bind(x, axes=axes, axis=0, tiled=False, axis_size=n, out_size=None)
    ts = all_gather_p.bind(t, axes=axes, axis=0, tiled=False, axis_size=n, out_size=None)
    ones = snp.ones_like(xs[:1])
    before = snp.cumprod(snp.concatenate([ones, xs[:-1]], 0), axis=0)
    after = snp.flip(snp.cumprod(snp.flip(snp.concatenate([xs[1:], ones], 0), 0), axis=0), 0)
    return out, snp.sum(ts * before * after, axis=0).astype(t.dtype)


def _all_reduce_transpose(ct, x, *, axes, op):
    if op != "sum":
        raise TypeError(f"all_reduce({op}) is not linear: it has no transpose")
    if type(ct) is Zero:
        return [Zero(ct.aval)]
    return [pvary_p.bind(ct, axes=axes)]


def _all_reduce_batch_named(vals, dims, name, size, *, axes, op):
    (x,), (d,) = vals, dims
    if d is None:   # the same value on every member of the batch
        x = {"sum": lambda v: v * size, "prod": lambda v: v ** size}.get(op, lambda v: v)(x)
        x = x.astype(vals[0].dtype)
    else:
        x = _reduce_along(x, d, op)
    rest = tuple(a for a in axes if a != name)
    if rest:
        x = all_reduce_p.bind(x, axes=rest, op=op)
    return x, None


def _all_reduce_batch(args, dims, *, axes, op):
    return all_reduce_p.bind(args[0], axes=axes, op=op), dims[0]


all_reduce_p.impl = _all_reduce_impl
all_reduce_p.abstract_eval = _same
all_reduce_p.weak_type = lambda w, **p: w
all_reduce_p.jvp = _all_reduce_jvp
all_reduce_p.transpose = _all_reduce_transpose
all_reduce_p.batch = _all_reduce_batch
all_reduce_p.meta["batch_named"] = _all_reduce_batch_named
all_reduce_p.meta["linear_when"] = lambda params: params["op"] == "sum"


# ---- pvary: invariant -> varying (identity on data) -----------------------------------------

pvary_p = _declare("pvary")


def _pvary_impl(x, *, axes):
    return x


def _pvary_transpose(ct, x, *, axes):
    if type(ct) is Zero:
        return [Zero(ct.aval)]
    return [all_reduce_p.bind(ct, axes=axes, op="sum")]


def _pvary_batch_named(vals, dims, name, size, *, axes):
    rest = tuple(a for a in axes if a != name)
    x = vals[0] if not rest else pvary_p.bind(vals[0], axes=rest)
    return x, dims[0]


pvary_p.impl = _pvary_impl
pvary_p.abstract_eval = _same
pvary_p.weak_type = lambda w, **p: w
R.deflinear(pvary_p, _pvary_transpose)
pvary_p.batch = lambda args, dims, *, axes: (pvary_p.bind(args[0], axes=axes), dims[0])
pvary_p.meta["batch_named"] = _pvary_batch_named


# ---- all_gather -------------------------------------------------------------------------------

all_gather_p = _declare("all_gather")


def _gathered_shape(shape, axis, tiled, n, out_size):
    shape = list(shape)
    if tiled:
        shape[axis] = shape[axis] * n if out_size is None else out_size
    else:
        shape.insert(axis, n)
    return tuple(shape)


def _all_gather_impl(x, *, axes, axis, tiled, axis_size, out_size):
    ctx = _ctx("all_gather", axes)
    out = ctx.comm.all_gather(ctx, np.asarray(x), axes, axis, tiled)
    want = _gathered_shape(np.shape(x), axis, tiled, axis_size, out_size)
    if out.shape != want:
        raise ValueError(f"all_gather over {axes}: the group's pieces {np.shape(x)} gathered to "
                         f"{out.shape}, expected {want} (members disagree on shapes)")
    return out


def _all_gather_abstract(x, *, axes, axis, tiled, axis_size, out_size):
    return x.update(shape=_gathered_shape(x.shape, axis, tiled, axis_size, out_size))


def _all_gather_transpose(ct, x, *, axes, axis, tiled, axis_size, out_size):
    if type(ct) is Zero:
        return [Zero(tangent_aval(x.aval))]
    size = x.aval.shape[axis] if tiled else None
    return [shard_slice_p.bind(ct, axes=axes, axis=axis, tiled=tiled, axis_size=axis_size,
                               size=size)]


def _all_gather_batch(args, dims, *, axes, axis, tiled, axis_size, out_size):
    x, d = args[0], dims[0]
    # the operand's logical axis ``axis`` sits at ``axis`` or ``axis + 1`` of the batched value
    phys = axis + (1 if d <= axis else 0)
    out = all_gather_p.bind(x, axes=axes, axis=phys, tiled=tiled, axis_size=axis_size,
                            out_size=out_size)
    return out, (d if d < phys else d + (0 if tiled else 1))


def _all_gather_batch_named(vals, dims, name, size, *, axes, axis, tiled, axis_size, out_size):
    snp = _snp()
    x, d = vals[0], dims[0]
    x = R.bdim_to_front(x, d, size)             # (size, *local)
    before, after = _split_axes(axes, name)
    n_before = _group_size(before) if before else 1
    n_after = _group_size(after) if after else 1
    if after:   # gather the minor axes first: (size, ..., n_after [at axis+1], ...)
        x = all_gather_p.bind(x, axes=after, axis=axis + 1, tiled=False, axis_size=n_after,
                              out_size=None)
    else:
        x = snp.expand_dims(x, axis + 1)
    # batch (this vmap's rank) becomes the major part of the gathered dim
    x = R.move_axis(x, 0, axis)                  # (..., size, n_after, ...) at axis, axis+1
    shape = list(x.shape)
    x = snp.reshape(x, shape[:axis] + [size * n_after] + shape[axis + 2:])
    if before:
        x = all_gather_p.bind(x, axes=before, axis=axis, tiled=False, axis_size=n_before,
                              out_size=None)
        shape = list(x.shape)
        x = snp.reshape(x, shape[:axis] + [shape[axis] * shape[axis + 1]] + shape[axis + 2:])
    if tiled:   # merge the gathered dim with the operand's own dim ``axis``
        shape = list(x.shape)
        x = snp.reshape(x, shape[:axis] + [shape[axis] * shape[axis + 1]] + shape[axis + 2:])
        if out_size is not None and x.shape[axis] != out_size:
            raise ValueError("all_gather: uneven pieces are not supported under vmap")
    return x, None


all_gather_p.impl = _all_gather_impl
all_gather_p.abstract_eval = _all_gather_abstract
all_gather_p.weak_type = lambda w, **p: w
R.deflinear(all_gather_p, _all_gather_transpose)
all_gather_p.batch = _all_gather_batch
all_gather_p.meta["batch_named"] = _all_gather_batch_named


# ---- shard_slice: this rank's chunk (the transpose of all_gather) ----------------------------

shard_slice_p = _declare("shard_slice")


def _slice_shape(shape, axis, tiled, n, size):
    shape = list(shape)
    if tiled:
        shape[axis] = shape[axis] // n if size is None else size
    else:
        del shape[axis]
    return tuple(shape)


def _shard_slice_impl(x, *, axes, axis, tiled, axis_size, size):
    ctx = _ctx("shard_slice", axes)
    r = ctx.axis_index(axes)
    x = np.asarray(x)
    if not tiled:
        return np.take(x, r, axis=axis)
    lo, hi = chunk_bounds(x.shape[axis], axis_size, r)
    want = _slice_shape(x.shape, axis, True, axis_size, size)[axis]
    if hi - lo != want:
        raise ValueError(f"shard_slice over {axes}: rank {r} holds {hi - lo} of {x.shape[axis]} "
                         f"elements along axis {axis}, the program expects {want}")
    return np.array(x[(slice(None),) * axis + (slice(lo, hi),)])


def _shard_slice_abstract(x, *, axes, axis, tiled, axis_size, size):
    return x.update(shape=_slice_shape(x.shape, axis, tiled, axis_size, size))


def _shard_slice_transpose(ct, x, *, axes, axis, tiled, axis_size, size):
    if type(ct) is Zero:
        return [Zero(tangent_aval(x.aval))]
    out_size = x.aval.shape[axis] if tiled else None
    return [all_gather_p.bind(ct, axes=axes, axis=axis, tiled=tiled, axis_size=axis_size,
                              out_size=out_size)]


def _shard_slice_batch(args, dims, *, axes, axis, tiled, axis_size, size):
    x, d = args[0], dims[0]
    phys = axis + (1 if d <= axis else 0)
    out = shard_slice_p.bind(x, axes=axes, axis=phys, tiled=tiled, axis_size=axis_size,
                             size=size)
    return out, (d if (d < phys or tiled) else d - 1)


def _shard_slice_named(vals, dims, name, vsize, **params):
    snp = _snp()
    axes, axis, tiled = params["axes"], params["axis"], params["tiled"]
    x, d = vals[0], dims[0]
    before, after = _split_axes(axes, name)
    if before or after:
        raise ValueError(f"shard_slice: under vmap(axis_name={name!r}) the axes {axes} must be "
                         "just the vmap axis")
    if not tiled:   # chunk r is x[r] along axis: the axis becomes the batch
        if d is None:
            return x, axis
        return _diag_take(R.move_axis(x, d, 0), axis + 1), 0
    n = x.shape[axis + (0 if d is None or d > axis else 1)] // vsize
    if d is None:
        shape = list(x.shape)
        x = snp.reshape(x, shape[:axis] + [vsize, n] + shape[axis + 1:])
        return x, axis
    x = R.move_axis(x, d, 0)
    shape = list(x.shape)
    x = snp.reshape(x, shape[:axis + 1] + [vsize, n] + shape[axis + 2:])
    return _diag_take(x, axis + 1), 0


def _diag_take(x, k):
    """``out[i, ...] = x[i, ..., i (at dim k), ...]`` (batch at 0)."""
    snp = _snp()
    n = x.shape[0]
    idx = snp.arange(n).reshape((n,) + (1,) * (x.ndim - 1))
    picked = snp.take_along_axis(x, snp.broadcast_to(idx, x.shape[:k] + (1,) + x.shape[k + 1:]),
                                 axis=k)
    return snp.squeeze(picked, axis=k)


shard_slice_p.impl = _shard_slice_impl
shard_slice_p.abstract_eval = _shard_slice_abstract
shard_slice_p.weak_type = lambda w, **p: w
R.deflinear(shard_slice_p, _shard_slice_transpose)
shard_slice_p.batch = _shard_slice_batch
shard_slice_p.meta["batch_named"] = _shard_slice_named


# ---- reduce_scatter (psum_scatter) -----------------------------------------------------------

reduce_scatter_p = _declare("reduce_scatter")


def _reduce_scatter_impl(x, *, axes, op, dim, tiled, axis_size, size):
    ctx = _ctx("psum_scatter", axes)
    out = ctx.comm.reduce_scatter(ctx, np.asarray(x), axes, op, dim, tiled)
    want = _slice_shape(np.shape(x), dim, tiled, axis_size, size)
    if out.shape != want:
        raise ValueError(f"psum_scatter over {axes}: rank {ctx.axis_index(axes)} got a piece of "
                         f"shape {out.shape}, the program expects {want}")
    return out


def _reduce_scatter_abstract(x, *, axes, op, dim, tiled, axis_size, size):
    return x.update(shape=_slice_shape(x.shape, dim, tiled, axis_size, size))


def _reduce_scatter_transpose(ct, x, *, axes, op, dim, tiled, axis_size, size):
    if op != "sum":
        raise TypeError(f"reduce_scatter({op}) is not linear: it has no transpose")
    if type(ct) is Zero:
        return [Zero(tangent_aval(x.aval))]
    out_size = x.aval.shape[dim] if tiled else None
    return [all_gather_p.bind(ct, axes=axes, axis=dim, tiled=tiled, axis_size=axis_size,
                              out_size=out_size)]


def _reduce_scatter_jvp(primals, tangents, **params):
    if params["op"] != "sum":
        raise TypeError(f"psum_scatter: only op='sum' is differentiable, got {params['op']!r}")
    (x,), (t,) = primals, tangents
    out = reduce_scatter_p.bind(x, **params)
    if type(t) is Zero:
        return out, Zero(tangent_aval(out.aval))
    return out, reduce_scatter_p.bind(t, **params)


def _reduce_scatter_batch(args, dims, **params):
    x, d = args[0], dims[0]
    dim = params["dim"]
    phys = dim + (1 if d <= dim else 0)
    out = reduce_scatter_p.bind(x, **dict(params, dim=phys))
    return out, (d if (d < phys or params["tiled"]) else d - 1)


def _reduce_scatter_batch_named(vals, dims, name, vsize, **params):
    axes = params["axes"]
    if tuple(axes) != (name,):
        raise ValueError(f"psum_scatter: under vmap(axis_name={name!r}) the axes {axes} must be "
                         "just the vmap axis")
    x, d = vals[0], dims[0]
    summed = _reduce_along(x, d, params["op"]) if d is not None else \
        {"sum": lambda v: v * vsize}.get(params["op"], lambda v: v)(x).astype(x.dtype)
    slice_params = dict(axes=axes, axis=params["dim"], tiled=params["tiled"],
                        axis_size=params["axis_size"], size=params["size"])
    return _shard_slice_named([summed], [None], name, vsize, **slice_params)


reduce_scatter_p.impl = _reduce_scatter_impl
reduce_scatter_p.abstract_eval = _reduce_scatter_abstract
reduce_scatter_p.weak_type = lambda w, **p: w
reduce_scatter_p.jvp = _reduce_scatter_jvp
reduce_scatter_p.transpose = _reduce_scatter_transpose
reduce_scatter_p.batch = _reduce_scatter_batch
reduce_scatter_p.meta["batch_named"] = _reduce_scatter_batch_named
reduce_scatter_p.meta["linear_when"] = lambda params: params["op"] == "sum"


# ---- all_to_all --------------------------------------------------------------------------------

all_to_all_p = _declare("all_to_all")


def _a2a_shape(shape, split_axis, concat_axis, tiled, n, split_size, concat_size):
    shape = list(shape)
    if tiled:   # split first: when split_axis == concat_axis the chunks are concatenated back
        s = shape[split_axis]
        shape[split_axis] = s // n if split_size is None else split_size
        c = shape[concat_axis]
        shape[concat_axis] = c * n if concat_size is None else concat_size
        return tuple(shape)
    del shape[split_axis]
    shape.insert(concat_axis, n)
    return tuple(shape)


def _all_to_all_impl(x, *, axes, split_axis, concat_axis, tiled, axis_size, split_size,
                     concat_size):
    ctx = _ctx("all_to_all", axes)
    out = ctx.comm.all_to_all(ctx, np.asarray(x), axes, split_axis, concat_axis, tiled)
    want = _a2a_shape(np.shape(x), split_axis, concat_axis, tiled, axis_size, split_size,
                      concat_size)
    if out.shape != want:
        raise ValueError(f"all_to_all over {axes}: got a piece of shape {out.shape}, the program "
                         f"expects {want}")
    return out


def _all_to_all_abstract(x, *, axes, split_axis, concat_axis, tiled, axis_size, split_size,
                         concat_size):
    return x.update(shape=_a2a_shape(x.shape, split_axis, concat_axis, tiled, axis_size,
                                     split_size, concat_size))


def _all_to_all_transpose(ct, x, *, axes, split_axis, concat_axis, tiled, axis_size,
                          split_size, concat_size):
    if type(ct) is Zero:
        return [Zero(tangent_aval(x.aval))]
    shape = x.aval.shape
    # the inverse exchange: its chunks are this one's pieces (one dim when the axes coincide)
    chunk = shape[concat_axis] if concat_axis != split_axis else split_size
    return [all_to_all_p.bind(ct, axes=axes, split_axis=concat_axis, concat_axis=split_axis,
                              tiled=tiled, axis_size=axis_size,
                              split_size=chunk if tiled else None,
                              concat_size=shape[split_axis] if tiled else None)]


def _all_to_all_batch(args, dims, **params):
    x, d = args[0], dims[0]
    if not params["tiled"]:
        x = R.move_axis(x, d, 0)
        out = all_to_all_p.bind(x, **dict(params, split_axis=params["split_axis"] + 1,
                                          concat_axis=params["concat_axis"] + 1))
        return out, 0
    s, c = params["split_axis"], params["concat_axis"]
    out = all_to_all_p.bind(x, **dict(params, split_axis=s + (1 if d <= s else 0),
                                      concat_axis=c + (1 if d <= c else 0)))
    return out, d


def _all_to_all_batch_named(vals, dims, name, vsize, **params):
    snp = _snp()
    axes = params["axes"]
    if tuple(axes) != (name,):
        raise ValueError(f"all_to_all: under vmap(axis_name={name!r}) the axes {axes} must be "
                         "just the vmap axis")
    x = R.bdim_to_front(vals[0], dims[0], vsize)     # (src j, *local)
    s, c, tiled = params["split_axis"], params["concat_axis"], params["tiled"]
    shape = list(x.shape)
    if tiled:   # split local axis s into (vsize, chunk): the vsize part is the destination
        x = snp.reshape(x, shape[:s + 1] + [vsize, shape[s + 1] // vsize] + shape[s + 2:])
        x = R.move_axis(x, s + 1, 0)                  # (dst i, src j, ..., chunk, ...)
        # concatenate sources along c: bring src next to c (local axes shifted by 2)
        x = R.move_axis(x, 1, c + 1)
        shape = list(x.shape)
        x = snp.reshape(x, shape[:c + 1] + [shape[c + 1] * shape[c + 2]] + shape[c + 3:])
        return x, 0
    x = R.move_axis(x, s + 1, 0)                      # (dst i, src j, *rest)
    return R.move_axis(x, 1, c + 1), 0


all_to_all_p.impl = _all_to_all_impl
all_to_all_p.abstract_eval = _all_to_all_abstract
all_to_all_p.weak_type = lambda w, **p: w
R.deflinear(all_to_all_p, _all_to_all_transpose)
all_to_all_p.batch = _all_to_all_batch
all_to_all_p.meta["batch_named"] = _all_to_all_batch_named


# ---- ppermute ----------------------------------------------------------------------------------

ppermute_p = _declare("ppermute")


def _ppermute_impl(x, *, axes, perm):
    ctx = _ctx("ppermute", axes)
    return ctx.comm.ppermute(ctx, np.asarray(x), axes, perm)


def _ppermute_transpose(ct, x, *, axes, perm):
    if type(ct) is Zero:
        return [Zero(tangent_aval(x.aval))]
    return [ppermute_p.bind(ct, axes=axes, perm=tuple((d, s) for s, d in perm))]


def _ppermute_batch_named(vals, dims, name, vsize, *, axes, perm):
    snp = _snp()
    if tuple(axes) != (name,):
        raise ValueError(f"ppermute: under vmap(axis_name={name!r}) the axes {axes} must be "
                         "just the vmap axis")
    x = R.bdim_to_front(vals[0], dims[0], vsize)
    src = np.full(vsize, 0, np.int64)
    has = np.zeros(vsize, bool)
    for s, d in perm:
        src[d], has[d] = s, True
    out = snp.take(x, wrap(src), axis=0)
    mask = wrap(has.reshape((vsize,) + (1,) * (x.ndim - 1)))
    return snp.where(mask, out, snp.zeros_like(out)), 0


ppermute_p.impl = _ppermute_impl
ppermute_p.abstract_eval = lambda x, **p: x
ppermute_p.weak_type = lambda w, **p: w
R.deflinear(ppermute_p, _ppermute_transpose)
ppermute_p.batch = lambda args, dims, **p: (ppermute_p.bind(args[0], **p), dims[0])
ppermute_p.meta["batch_named"] = _ppermute_batch_named


# ---- axis_index ----------------------------------------------------------------------------------

axis_index_p = _declare("axis_index")


def _axis_index_impl(*, axes):
    return np.int32(_ctx("axis_index", axes).axis_index(axes))


def _axis_index_batch_named(vals, dims, name, vsize, *, axes):
    snp = _snp()
    before, after = _split_axes(axes, name)
    from ..core.axis_env import axis_size
    n_after = axis_size(after) if after else 1
    idx = snp.arange(vsize, dtype=dtypes.int32) * np.int32(n_after)
    if after:
        idx = idx + axis_index_p.bind(axes=after)
    if before:
        idx = idx + axis_index_p.bind(axes=before) * np.int32(vsize * n_after)
    return idx, 0


axis_index_p.impl = _axis_index_impl
axis_index_p.abstract_eval = lambda *, axes: ShapedArray((), dtypes.int32)
R.defjvp_zero(axis_index_p)
# no operands, so never batched except over its own vmap axis (batch_named)
axis_index_p.batch = lambda args, dims, *, axes: (axis_index_p.bind(axes=axes), None)
axis_index_p.meta["batch_named"] = _axis_index_batch_named


def _group_size(axes):
    """Size of the group over ``axes``, from the axis environment (bound while tracing a
    shard_map body or a vmap with axis_name) or, while executing, from the SPMD context."""
    from ..core.axis_env import axis_size
    ctx = current_spmd()
    if ctx is not None and all(a in ctx.mesh.axis_names for a in axes):
        return ctx.mesh.axis_size(axes)
    return axis_size(axes)


COLLECTIVE_PRIMITIVES = (all_reduce_p, pvary_p, all_gather_p, shard_slice_p, reduce_scatter_p,
                         all_to_all_p, ppermute_p, axis_index_p)

__all__ = [p.name + "_p" for p in COLLECTIVE_PRIMITIVES]
