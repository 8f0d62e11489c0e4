"""Redistribution: changing an array's layout, and its cost.

``plan(shape, src, dst)`` turns a change of NamedSharding into steps, each touching one mesh
axis, in an order that keeps every intermediate a valid layout (a dim split by several axes is
split major to minor, so minor axes are gathered first and added last):

=================  =============================  ============================================
from -> to         step                           bytes moved per device (cost model)
=================  =============================  ============================================
Shard -> Replicate all_gather (tiled)             (k - 1) x local piece
Partial -> Repl.   all_reduce                     2 x local piece
Partial -> Shard   reduce_scatter (tiled)         1 x local piece
Shard(i)->Shard(j) all_to_all                     1 x local piece
Replicate -> Shard shard_slice (local)            0
Replicate->Partial keep the value at rank 0,      0
                   the op's identity elsewhere
                   (-0.0 / 0 for sum, 1 for prod;
                   max/min/avg keep all)
=================  =============================  ============================================

``apply_local`` performs the steps on one device's piece by binding the collective primitives:
eagerly inside a device's computation (``redistribute``), or under staging when the partitioner
builds a per-device program. Shard sizes follow ``torch.chunk`` (uneven allowed): every step
carries the device's exact local sizes.
"""
from __future__ import annotations


import numpy as np

from . import log as sharding_log
from .log import logger
from ..arrays.array import wrap
from ..core import dtypes
from ..core.placements import Replicate, chunk_bounds, partial_fill
from .runtime.inprocess import accumulation_dtype
from .primitives import (all_gather_p, all_reduce_p, all_to_all_p, axis_index_p,
                         reduce_scatter_p, shard_slice_p)
from .sharding import NamedSharding, PartitionSpec, as_sharding, from_placements



class Step:
    """One redistribution step on mesh axis ``axis``: ``kind`` in gather / reduce /
    reduce_scatter / all_to_all / slice / partial, with ``dim`` (and ``dim2`` for all_to_all: the
    dim gathered), ``op`` for reductions, and ``after``: the layout once it is done."""

    __slots__ = ("kind", "axis", "dim", "dim2", "op", "after")

    def __init__(self, kind, axis, after, dim=None, dim2=None, op=None):
        self.kind, self.axis, self.after = kind, axis, after
        self.dim, self.dim2, self.op = dim, dim2, op

    def __repr__(self):
        extra = "".join(f" {k}={getattr(self, k)}" for k in ("dim", "dim2", "op")
                        if getattr(self, k) is not None)
        return f"Step({self.kind} over {self.axis!r}{extra})"


def _spec_dims(s, ndim):
    return [list(s.spec.axes(i)) for i in range(ndim)]


def _make(mesh, dims, partial):
    return NamedSharding(mesh, PartitionSpec(*[tuple(d) if d else None for d in dims]), partial)


def plan(ndim, src: NamedSharding, dst: NamedSharding) -> list:
    """The steps taking layout ``src`` to ``dst`` (same mesh) for an array of rank ``ndim``."""
    if src == dst:
        return []
    if src.mesh != dst.mesh:
        raise ValueError(f"redistribute: the layouts are on different meshes {src.mesh} and "
                         f"{dst.mesh}; move the data with device_put to a new sharding")
    mesh = src.mesh
    cur = _spec_dims(src, ndim)
    want = _spec_dims(dst, ndim)
    partial = dict(src.partial)
    dst_partial = dict(dst.partial)
    steps = []

    def emit(kind, axis, **kw):
        steps.append(Step(kind, axis, _make(mesh, cur, partial), **kw))

    def keep(d):   # length of the common prefix of cur[d] and want[d]
        n = 0
        while n < len(cur[d]) and n < len(want[d]) and cur[d][n] == want[d][n]:
            n += 1
        return n

    # 1. gather the axes that must leave a dim (minor first); all_to_all when the axis is the next
    #    one another dim needs
    for d in range(ndim):
        k = keep(d)
        while len(cur[d]) > k:
            a = cur[d].pop()
            j = next((j for j in range(ndim) if j != d and cur[j] == want[j][:len(cur[j])]
                      and len(want[j]) > len(cur[j]) and want[j][len(cur[j])] == a), None)
            if j is not None:
                cur[j].append(a)
                emit("all_to_all", a, dim=j, dim2=d)
            else:
                emit("gather", a, dim=d)
    # 2. pending reductions: keep, scatter into the dim that wants the axis next, or reduce.
    #    The value reduces the innermost axis first (gather_pieces), so an axis can only be
    #    reduced, or a new pending reduction laid out over it (its identity must sit under
    #    the inner reductions), once every inner axis whose op does not commute with its own is
    #    reduced: those are reduced too (step 4 lays them out again), innermost first.
    order = [a for a in mesh.axis_names if a in partial]
    drop = {a for a in order if dst_partial.get(a) != partial[a]}
    for i, a in enumerate(mesh.axis_names):
        ops = {partial[a]} if a in drop else set()
        if a in dst_partial and dst_partial[a] != partial.get(a):
            ops.add(dst_partial[a])
        inner = [b for b in order if mesh.axis_names.index(b) > i]
        drop |= {b for b in inner for op in ops if not _commute(op, partial[b])}
    for a in reversed(order):
        if a not in drop:
            continue
        op = partial.pop(a)
        j = next((j for j in range(ndim) if cur[j] == want[j][:len(cur[j])]
                  and len(want[j]) > len(cur[j]) and want[j][len(cur[j])] == a), None)
        if j is not None and op != "avg":
            cur[j].append(a)
            emit("reduce_scatter", a, dim=j, op=op)
        else:
            emit("reduce", a, op=op)
    # 3. split dims further (major to minor)
    for d in range(ndim):
        while len(cur[d]) < len(want[d]):
            a = want[d][len(cur[d])]
            cur[d].append(a)
            emit("slice", a, dim=d)
    # 4. new pending reductions
    for a, op in dst_partial.items():
        if partial.get(a) != op:
            partial[a] = op
            emit("partial", a, op=op)
    return steps


def _commute(op1, op2) -> bool:
    """Whether reductions ``op1`` and ``op2`` over two mesh axes can be applied in either order."""
    return op1 == op2 or {op1, op2} <= {"sum", "avg"}


def step_cost(step, local_bytes, k) -> float:
    """Bytes a device moves for ``step`` over an axis of ``k`` devices (piece of
    ``local_bytes``)."""
    return {"gather": (k - 1) * local_bytes, "reduce": 2.0 * local_bytes * (k - 1) / k,
            "reduce_scatter": local_bytes * (k - 1) / k,
            "all_to_all": local_bytes * (k - 1) / k}.get(step.kind, 0.0)


def cost(aval, src, dst) -> float:
    """Bytes moved per device to take an ``aval`` array from layout ``src`` to ``dst``."""
    if src == dst:
        return 0.0
    total, cur = 0.0, src
    dev = src.mesh.flat_devices[0]
    for st in plan(len(aval.shape), src, dst):
        piece = int(np.prod(cur.local_shape(aval.shape, dev))) * aval.dtype.itemsize
        total += step_cost(st, piece, src.mesh.shape[st.axis])
        cur = st.after
    return total


def apply_local(x, shape, src, dst, device):
    """``device``'s piece of the array (global ``shape``) laid out by ``dst``, from its piece ``x``
    under ``src``: binds the collective primitives (works eagerly in a device's computation and
    under staging)."""
    from .. import numpy as snp
    for st in plan(len(shape), src, dst):
        axes = (st.axis,)
        k = src.mesh.shape[st.axis]
        local = st.after.local_shape(shape, device)
        if st.kind == "gather":
            x = all_gather_p.bind(x, axes=axes, axis=st.dim, tiled=True, axis_size=k,
                                  out_size=local[st.dim])
        elif st.kind == "all_to_all":
            x = all_to_all_p.bind(x, axes=axes, split_axis=st.dim, concat_axis=st.dim2,
                                  tiled=True, axis_size=k, split_size=local[st.dim],
                                  concat_size=local[st.dim2])
        elif st.kind == "slice":
            x = shard_slice_p.bind(x, axes=axes, axis=st.dim, tiled=True, axis_size=k,
                                   size=local[st.dim])
        elif st.kind == "reduce_scatter":
            x = reduce_scatter_p.bind(x, axes=axes, op=st.op, dim=st.dim, tiled=True,
                                      axis_size=k, size=local[st.dim])
        elif st.kind == "reduce":
            if st.op == "avg":
                # summed wide (int64, float32 for 16-bit floats): the sum may not fit x's dtype
                wide = accumulation_dtype(x.dtype, "avg")
                total = all_reduce_p.bind(x.astype(wide) if wide != x.dtype else x, axes=axes,
                                          op="sum")
                x = (total / k if dtypes.is_inexact(x.dtype) else total // k).astype(x.dtype)
            else:
                x = all_reduce_p.bind(x, axes=axes, op=st.op)
        elif st.kind == "partial" and partial_fill(st.op, x.dtype) is not None:
            first = axis_index_p.bind(axes=axes) == 0
            x = snp.where(first, x, snp.full_like(x, partial_fill(st.op, x.dtype)))
    return x


def local_starts(shape, sharding) -> list:
    """The global index where the calling device's piece of a ``shape`` array laid out by
    ``sharding`` starts, per dim: 0 for dims not split, else an int64 scalar computed from
    ``axis_index`` and the ``torch.chunk`` sizes (binds collectives: call it in a device's
    computation or while staging a per-device program, where devices with equal local shapes
    share one program but not one start)."""
    from .. import numpy as snp
    mesh = sharding.mesh
    out = []
    for d, n in enumerate(shape):
        start, size = 0, n
        for a in sharding.spec.axes(d):   # major to minor, as NamedSharding.shard_bounds
            k = mesh.shape[a]
            r = snp.astype(axis_index_p.bind(axes=(a,)), snp.int64)
            c = (size + (k - 1)) // k
            lo = snp.minimum(r * c, size)
            hi = snp.minimum(lo + c, size)
            start, size = start + lo, hi - lo
        out.append(start)
    return out


# ---- eager redistribution of sharded arrays ------------------------------------------------------

def as_layout(x, sharding):
    """``x`` (an Array, array-like or sharded array) as a sharded array laid out by
    ``sharding``."""
    from .sharded_array import ShardedArray, distribute_sharding
    if isinstance(x, ShardedArray):
        return x if x._sharding == sharding else _redistribute(x, sharding)
    return distribute_sharding(x, sharding)


def _redistribute(x, dst):
    from .runtime.inprocess import run_spmd
    from .sharded_array import make_sharded
    src = x._sharding
    if src.mesh != dst.mesh:
        # another mesh: through the whole value (a copy per device of the new mesh)
        return make_sharded(x.aval, dst, _split_global(x, dst))
    mesh = src.mesh
    shape = tuple(x.shape)
    pos = {d: i for i, d in enumerate(mesh.flat_devices)}
    if sharding_log.enabled():
        logger.info("redistribute %s: %s -> %s: %s", x.aval.str_short(), list(src.placements),
                    list(dst.placements), plan(len(shape), src, dst))

    def device(ctx):
        piece = wrap(x._shards[pos[ctx.device]], x._weak)
        out = apply_local(piece, shape, src, dst, ctx.device)
        return np.asarray(out._buf)

    outs = run_spmd(mesh, device)
    pieces = [None] * mesh.size
    for dev, o in zip(mesh.local_devices, outs):
        pieces[pos[dev]] = o
    return make_sharded(x.aval, dst, pieces)


def _split_global(x, dst):
    from .sharded_array import split_pieces
    return split_pieces(np.asarray(x._gather()), dst)


def redistribute(x, placements=None, *, mesh=None):
    """``x`` with another layout (DTensor's ``redistribute``, JAX's ``device_put`` to a
    sharding).

    Args:
        x: a sharded array (or an Array / array-like, distributed from scratch).
        placements: one Placement per mesh axis, a PartitionSpec, or a NamedSharding.
        mesh: the target mesh (default: ``x``'s mesh, else the current mesh).
    Raises:
        ValueError: placements that do not fit the mesh or the array's rank (the message names
            the mesh axes and the shape). TypeError: malformed placements.
    """
    from .sharded_array import ShardedArray, distribute_sharding
    from ..arrays.convert import operand
    x = operand(x, "redistribute")
    if isinstance(placements, list):
        placements = tuple(placements)
    if mesh is None and isinstance(x, ShardedArray):
        mesh = x.mesh
    if placements is None:
        placements = (Replicate(),) * (mesh.ndim if mesh is not None else 1)
    op = f"redistribute({x.aval.str_short()})"
    target = as_sharding(placements, op, ndim=x.ndim, mesh=mesh)
    if target is None:
        raise TypeError(f"redistribute: placements must be Placements, a PartitionSpec or a "
                        f"NamedSharding, got {placements!r}")
    if not isinstance(target, NamedSharding):
        return distribute_sharding(x, target)
    target.check_shape(x.shape, op)
    return as_layout(x, target)


def gather_remote(sharding, aval, shards):
    """Reading the whole value of an array whose pieces live in other processes would need every
    process to take part: an error naming the collective way to do it."""
    missing = sum(s is None for s in shards)
    raise RuntimeError(
        f"this {aval.str_short()} array is spread over processes ({missing} of its "
        f"{len(shards)} pieces live in other processes), so its whole value is not here; use "
        "starling.distributed.process_allgather(x) on every process, or x.addressable_shards "
        "for this process's pieces")


__all__ = ["plan", "cost", "apply_local", "redistribute", "as_layout", "from_placements",
           "chunk_bounds"]
