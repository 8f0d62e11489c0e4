"""Collectives of groups holding several devices of some process and devices of other processes
(hybrid meshes: e.g. 2 processes x 2 local devices = a 4-device mesh), on MPI.

A group's devices are in mesh order (``mesh.group``), which may interleave processes; its
*layout* (``GroupLayout``) lists its processes in order of first appearance (their ranks in the
group's MPI communicator) and, for each, its members' ranks in the group. A collective runs in
three steps:

1. the members of this process meet at an in-process rendezvous (the in-process runtime's,
   src/collectives/runtime/inprocess.py: same agreement checks, timeouts naming the devices
   that did not arrive, flight-recorder entries);
2. the first of them (the *leader*) combines their inputs and runs one MPI collective on the
   group's communicator with the leaders of the other processes (the only thread of this
   process calling into that communicator, through ``failures.guarded``: a dead peer raises
   RankFailure, a timeout CollectiveTimeout naming the ranks that never arrived);
3. every member takes its own result, a private buffer; a failure of the leader reaches the
   other members as the same kind of error.

Mapping (the data of each process travels in "process-major" order: the processes in layout
order, each with its members in group order):

* all_reduce: the local inputs are reduced (in the accumulation dtype, as the in-process
  runtime does), then Allreduce between processes; the order of the additions is (local members)
  then (processes), so float sums may differ from the in-process runtime's rank-order sum by
  rounding; max / min and integer results are identical.
* all_gather: Allgatherv of the members' piece lengths (tiled pieces may be uneven), then of the
  pieces; they are put back in group order.
* reduce_scatter: the local inputs are reduced, their chunks reordered process-major, then
  Reduce_scatter with one count per process; each member keeps its chunk.
* all_to_all: Allgatherv of the members' input shapes (tiled blocks may be uneven), then
  Alltoallv of the chunks between processes; chunks between members of one process are not
  sent.
* ppermute: messages between processes only, one per (source device, destination device) pair,
  tagged ``(source rank * group size + destination rank) mod 32768`` (both sides post them in
  the same order, so pairs that share a tag still match); pairs within the process are copies.
* broadcast: Bcast from the root device's process.

Each collective is called by ``MPIComm._route`` (src/distributed/mpi_comm.py) on every device of
a "hier" group as ``name(mc, ctx, lay, x, axes, *params)``: ``mc`` the MPIComm, ``ctx`` the
device's SpmdContext, ``lay`` its group's GroupLayout, ``x`` its input (a NumPy array), ``axes``
the group's mesh axes (a tuple of names). It returns the device's result, a private NumPy
array. Errors: CollectiveMismatch (this process's members called different collectives,
params, dtypes or shapes), CollectiveTimeout (naming who did not arrive) and RankFailure (a dead
peer process).
"""
from __future__ import annotations

import math

import numpy as np

from ..collectives.runtime.inprocess import (all_to_all_params, finish_reduce, gather_params,
                                             reduce_ufunc)
from ..core.placements import chunk_bounds
from . import runtime
from .hooks import run_post, run_pre
from .mpi_types import mpi_reduction, mpi_view, result_buffer
from .requests import Chain, Requests

_TAGS = 32768   # MPI guarantees tags up to 32767


class GroupLayout:
    """How the devices ``devs`` of a group (mesh order) lie across processes, seen from the
    process ``me_process``.

    Attributes:
        devs, size: the group's devices and their number.
        procs: its processes (world ranks) in order of first appearance: their ranks in the
            group's communicator.
        members: for each process of ``procs``, its devices' ranks in the group, ascending.
        order: ``members`` concatenated: the group ranks in process-major order.
        me: this process's position in ``procs``; ``local``: its devices of the group.
        proc_of: group rank -> position of its process in ``procs``.
        kind: "local" (one process), "flat" (one device of each process) or "hier".
    """

    __slots__ = ("devs", "size", "procs", "members", "order", "me", "local", "proc_of", "kind")

    def __init__(self, devs, me_process):
        self.devs = tuple(devs)
        self.size = len(devs)
        self.procs = tuple(dict.fromkeys(d.process_index for d in devs))
        self.members = [[r for r, d in enumerate(devs) if d.process_index == p]
                        for p in self.procs]
        self.order = [r for m in self.members for r in m]
        self.me = self.procs.index(me_process)
        self.local = tuple(devs[r] for r in self.members[self.me])
        self.proc_of = {r: k for k, m in enumerate(self.members) for r in m}
        if len(self.procs) == 1:
            self.kind = "local"
        elif all(len(m) == 1 for m in self.members):
            self.kind = "flat"
        else:
            self.kind = "hier"


_LAYOUTS: dict = {}


def drop_layouts() -> None:
    """Forgets the cached layouts (the world was reconfigured)."""
    _LAYOUTS.clear()


def layout(ctx, axes) -> GroupLayout:
    """The GroupLayout of ``ctx``'s device's group over ``axes`` (cached per world epoch)."""
    devs, _ = ctx.group(axes)
    me = ctx.device.process_index
    # a reconfiguration renumbers the processes (the devices' process_index) in place
    key = (devs, me, runtime.world_epoch())
    lay = _LAYOUTS.get(key)
    if lay is None:
        if len(_LAYOUTS) > 4096:
            _LAYOUTS.clear()
        lay = _LAYOUTS[key] = GroupLayout(devs, me)
    return lay


def _contig(x):
    x = np.asarray(x)
    return x if x.flags.c_contiguous else np.array(x, order="C")


def _vec(arr, counts, displs=None):
    buf, dtype = mpi_view(arr)
    counts = [int(c) for c in counts]
    if displs is None:
        displs = [0] + list(np.cumsum(counts[:-1], dtype=np.int64)) if counts else []
    return [buf, counts, [int(d) for d in displs], dtype]


def _private(res, n):
    """``res`` for the first of ``n`` members, copies for the others."""
    return [res] + [res.copy() for _ in range(n - 1)]


def _flat_concat(parts, dtype):
    parts = [p.reshape(-1) for p in parts]
    if not parts:
        return np.empty(0, dtype)
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


def _collective(mc, ctx, lay, axes, name, x, work, uneven=None, **params):
    """Runs collective ``name`` of this device over the group ``lay``: hooks, the local
    rendezvous, ``work(group, slots, x)`` by the leader (one result per local member), and this
    member's result."""
    group = mc.process_group(lay, axes)
    run_pre(name, group, x)
    local = mc.local_comm
    with local.session(ctx, axes, x, x, name, uneven=uneven, local=lay.local,
                       **params) as (rv, rank):
        out = local.lead(rv, rank, name, lambda: work(group, list(rv.slots), x))
    return run_post(name, group, out)


# ---- the collectives ----------------------------------------------------------------------------

def all_reduce(mc, ctx, lay, x, axes, op):
    """The reduction by ``op`` ("sum", "avg", "max", "min" or "prod") of every member's ``x``
    (all of one shape and dtype): an array of ``x``'s shape and dtype, combined in
    ``accumulation_dtype`` (low-precision floats in float32, rounded once; averages of integers
    in 64 bits). Raises TypeError for "max" / "min" of complex values (MPI orders none)."""
    def work(group, slots, x):
        comm = group.comm
        acc, mop = mpi_reduction(op, x.dtype, "all_reduce")
        fn = reduce_ufunc(op)
        part = np.array(slots[0], dtype=acc, order="C")
        for s in slots[1:]:
            fn(part, s, out=part)
        out = result_buffer(part.shape, part.dtype)
        mc.guard("all_reduce", group,
                 lambda: comm.Iallreduce(mpi_view(part), mpi_view(out), op=mop),
                 x, {"op": op, "axes": list(axes)},
                 lambda: comm.Allreduce(mpi_view(part), mpi_view(out), op=mop))
        return _private(finish_reduce(out, op, lay.size, x.dtype), len(slots))
    return _collective(mc, ctx, lay, axes, "all_reduce", _contig(x), work, op=op)


def all_gather(mc, ctx, lay, x, axes, axis, tiled):
    """The members' ``x`` in group-rank order: concatenated along ``axis`` when ``tiled`` (the
    pieces may differ in length there: ``(..., sum_r L_r, ...)``), else stacked on a new axis
    ``axis`` of size ``lay.size``; ``x``'s dtype."""
    def work(group, slots, x):
        comm = group.comm
        fronts = [_contig(np.moveaxis(s, axis, 0) if tiled else s[None]) for s in slots]
        tail = fronts[0].shape[1:]
        row = math.prod(tail)
        send = _flat_concat(fronts, x.dtype)
        mine = np.array([f.shape[0] for f in fronts], np.int64)
        lead = np.ones(lay.size, np.int64)   # piece lengths, process-major
        n_members = [len(m) for m in lay.members]
        got = {}

        def sizes(call):
            return call(mpi_view(mine), _vec(lead, n_members))

        def gather(call):
            spans = np.cumsum([0] + n_members)
            per_proc = [int(lead[a:b].sum()) for a, b in zip(spans[:-1], spans[1:])]
            out = got["out"] = result_buffer((int(lead.sum()),) + tail, x.dtype)
            return call(mpi_view(send), _vec(out, [c * row for c in per_proc]))

        def start():
            if not tiled:
                return gather(comm.Iallgatherv)
            return Chain(lambda: sizes(comm.Iallgatherv), lambda: gather(comm.Iallgatherv))

        def blocking():
            if tiled:
                sizes(comm.Allgatherv)
            gather(comm.Allgatherv)

        mc.guard("all_gather", group, start, x,
                 dict(gather_params(axis, tiled), axes=list(axes)), blocking)
        pieces = np.split(got["out"], np.cumsum(lead)[:-1], axis=0)
        by_rank = [None] * lay.size
        for p, r in zip(pieces, lay.order):
            by_rank[r] = p
        res = np.concatenate(by_rank, 0)
        if axis != 0:
            res = np.ascontiguousarray(np.moveaxis(res, 0, axis))
        return _private(res, len(slots))
    x = np.asarray(x)
    return _collective(mc, ctx, lay, axes, "all_gather", x, work,
                       uneven=axis if tiled else None, axis=axis, tiled=tiled)


def _bounds(length, n, r, tiled):
    return chunk_bounds(length, n, r) if tiled else (r, r + 1)


def reduce_scatter(mc, ctx, lay, x, axes, op, dim, tiled):
    """This member's part of the reduction by ``op`` of every member's ``x``: with ``tiled``,
    chunk ``rank`` of dim ``dim`` (``chunk_bounds``: torch.chunk's split, so chunks may be
    uneven or empty); else ``x.shape[dim]`` must be the group size and the result is index
    ``rank`` of the reduced ``dim`` (that dim removed). ``x``'s dtype; TypeError as
    ``all_reduce``."""
    def work(group, slots, x):
        comm = group.comm
        n = lay.size
        acc, mop = mpi_reduction(op, x.dtype, "reduce_scatter")
        fn = reduce_ufunc(op)
        part = np.array(np.moveaxis(slots[0], dim, 0), dtype=acc, order="C")
        for s in slots[1:]:
            fn(part, np.moveaxis(s, dim, 0), out=part)
        bounds = [_bounds(part.shape[0], n, r, tiled) for r in range(n)]
        send = _contig(np.concatenate([part[a:b] for a, b in (bounds[r] for r in lay.order)], 0))
        row = math.prod(part.shape[1:])
        lens = [[bounds[r][1] - bounds[r][0] for r in m] for m in lay.members]
        out = result_buffer((sum(lens[lay.me]),) + part.shape[1:], acc)
        counts = [sum(ls) * row for ls in lens]
        mc.guard("reduce_scatter", group,
                 lambda: comm.Ireduce_scatter(mpi_view(send), mpi_view(out), counts, op=mop),
                 x, {"op": op, "dim": dim, "tiled": tiled, "axes": list(axes)},
                 lambda: comm.Reduce_scatter(mpi_view(send), mpi_view(out), counts, op=mop))
        res, start = [], 0
        for ln in lens[lay.me]:
            piece = finish_reduce(out[start:start + ln], op, n, x.dtype)
            start += ln
            piece = np.moveaxis(piece, 0, dim) if tiled else piece[0]
            res.append(np.array(piece, order="C"))   # a private buffer each
        return res
    x = np.asarray(x)
    return _collective(mc, ctx, lay, axes, "reduce_scatter", x, work, op=op, dim=dim,
                       tiled=tiled)


def all_to_all(mc, ctx, lay, x, axes, split_axis, concat_axis, tiled):
    """Member ``r`` receives chunk ``r`` along ``split_axis`` of every member's ``x`` (MPI's
    Alltoall), in group-rank order: concatenated along ``concat_axis`` when ``tiled`` (chunks
    by ``chunk_bounds``, possibly uneven), else the split axis (of size ``lay.size``) is
    indexed away and the pieces are stacked on a new axis ``concat_axis``; ``x``'s dtype."""
    def work(group, slots, x):
        comm = group.comm
        n, nd, me = lay.size, x.ndim, lay.me
        fronts = [_contig(np.moveaxis(s, split_axis, 0)) for s in slots]
        mine = np.array([f.shape for f in fronts], np.int64).reshape(-1)
        shapes = np.empty(n * nd, np.int64)   # every member's front shape, process-major
        got = {}

        def sizes(call):
            return call(mpi_view(mine), _vec(shapes, [len(m) * nd for m in lay.members]))

        def exchange(call):
            sh = shapes.reshape(n, nd)
            front = {r: tuple(int(v) for v in sh[i]) for i, r in enumerate(lay.order)}
            send, send_counts = [], []
            for k, dst in enumerate(lay.members):
                c = 0
                if k != me:
                    for f in fronts:
                        row = math.prod(f.shape[1:])
                        for r in dst:
                            a, b = _bounds(f.shape[0], n, r, tiled)
                            send.append(f[a:b])
                            c += (b - a) * row
                send_counts.append(c)
            recv_shapes, recv_counts = [], []
            for k, src in enumerate(lay.members):
                c = 0
                if k != me:
                    for s in src:
                        for r in lay.members[me]:
                            a, b = _bounds(front[s][0], n, r, tiled)
                            recv_shapes.append((s, r, (b - a,) + front[s][1:]))
                            c += math.prod((b - a,) + front[s][1:])
                recv_counts.append(c)
            out = result_buffer((sum(recv_counts),), x.dtype)
            got["out"], got["shapes"] = out, recv_shapes
            return call(_vec(_flat_concat(send, x.dtype), send_counts), _vec(out, recv_counts))

        def blocking():
            sizes(comm.Allgatherv)
            exchange(comm.Alltoallv)

        mc.guard("all_to_all", group,
                 lambda: Chain(lambda: sizes(comm.Iallgatherv),
                               lambda: exchange(comm.Ialltoallv)),
                 x, dict(all_to_all_params(split_axis, concat_axis, tiled), axes=list(axes)),
                 blocking)
        pieces, start = {}, 0
        for s, r, shape in got["shapes"]:
            size = math.prod(shape)
            pieces[s, r] = got["out"][start:start + size].reshape(shape)
            start += size
        for j, s in enumerate(lay.members[me]):
            for r in lay.members[me]:
                a, b = _bounds(fronts[j].shape[0], n, r, tiled)
                pieces[s, r] = fronts[j][a:b]
        res = []
        for r in lay.members[me]:
            ps = [pieces[s, r] for s in range(n)]
            if tiled:
                res.append(np.concatenate([np.moveaxis(p, 0, split_axis) for p in ps],
                                          concat_axis))
            else:
                res.append(np.stack([p[0] for p in ps], concat_axis))
        return res
    x = np.asarray(x)
    return _collective(mc, ctx, lay, axes, "all_to_all", x, work,
                       uneven=(split_axis, concat_axis) if tiled else None,
                       split_axis=split_axis, concat_axis=concat_axis, tiled=tiled)


def ppermute(mc, ctx, lay, x, axes, perm):
    """The ``x`` of the member that ``perm`` (pairs ``(source rank, destination rank)`` of the
    group, each rank at most once per side) sends to this one, or zeros of ``x``'s shape and
    dtype when none does. Pairs within this process are copies, the others MPI messages."""
    def work(group, slots, x):
        comm = group.comm
        n = lay.size
        at = {r: j for j, r in enumerate(lay.members[lay.me])}   # group rank -> local index
        outs = [None] * len(slots)
        recvs, sends = [], []
        for s, d in sorted((int(s), int(d)) for s, d in perm):
            tag = (s * n + d) % _TAGS
            if s in at and d in at:
                outs[at[d]] = np.array(slots[at[s]])
            elif d in at:
                outs[at[d]] = np.empty_like(slots[at[d]])
                recvs.append((outs[at[d]], lay.proc_of[s], tag))
            elif s in at:
                sends.append((slots[at[s]], lay.proc_of[d], tag))
        outs = [np.zeros_like(x) if o is None else o for o in outs]

        def start():
            return Requests([comm.Irecv(mpi_view(b), source=k, tag=t) for b, k, t in recvs]
                            + [comm.Isend(mpi_view(b), dest=k, tag=t) for b, k, t in sends])
        mc.guard("ppermute", group, start, x, {"perm": [list(p) for p in perm],
                                                "axes": list(axes)})
        return outs
    return _collective(mc, ctx, lay, axes, "ppermute", _contig(x), work, perm=perm)


def broadcast(mc, ctx, lay, x, axes, root):
    """A private copy of the ``x`` of group rank ``root`` (the other members' ``x`` give only
    the shape and dtype of the buffer received)."""
    def work(group, slots, x):
        comm = group.comm
        k = lay.proc_of[root]
        if k == lay.me:
            buf = np.array(slots[lay.members[lay.me].index(root)], order="C")
        else:
            buf = np.empty_like(x)
        mc.guard("broadcast", group, lambda: comm.Ibcast(mpi_view(buf), root=k), buf,
                 {"root": root, "axes": list(axes)}, lambda: comm.Bcast(mpi_view(buf), root=k))
        return _private(buf, len(slots))
    return _collective(mc, ctx, lay, axes, "broadcast", _contig(x), work, root=root)
