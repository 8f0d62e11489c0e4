"""Collectives of SPMD programs whose mesh spans processes, on MPI.

The same interface as the in-process communicator (src/collectives/runtime/inprocess.py): the
partitioner, shard_map and the collective primitives do not know which runtime moves the bytes.
A process may own one or several devices of such a mesh (``STARLING_NUM_CPU_DEVICES`` per
process: a "hybrid" mesh); ``run_spmd`` runs each local device in its worker thread. The group
of a collective (the devices sharing all mesh coordinates but the collective's axes, in mesh
order) is served by one of three paths (src/distributed/hierarchical.py, ``GroupLayout``):

* inside one process: the in-process runtime (its rendezvous, bit-identical results);
* one device of each of its processes: the MPI calls below, made by that device's thread;
* several devices of some process and devices of others: hierarchical (the process's devices
  meet in process, one leader thread per process makes the MPI calls; see hierarchical.py).

A group spanning processes has a ProcessGroup whose MPI communicator is made once per group of
devices with ``Create_group`` (only the group's processes take part; with several devices per
process, several groups share the same processes and each gets its own communicator, so that
only one thread of a process ever calls into a given communicator) and cached; a world
reconfiguration after a failure (src/distributed/elastic.py) drops the cache (a group made
again is a new incarnation on the arrival board), and a mesh that still holds a failed
process's device is refused.

Mapping (one device per process): all_reduce -> Allreduce; all_gather -> Allgatherv (uneven
pieces: their lengths are exchanged first) along the gathered axis; reduce_scatter ->
Reduce_scatter with torch.chunk counts; all_to_all -> Alltoall of the block shapes (length,
concat-axis size), then Alltoallv; ppermute -> Isend / Irecv pairs; broadcast -> Bcast. With a
timeout each is nonblocking (the size exchange and the data one timed operation), without it
blocking. NumPy buffers are passed to MPI directly (no pickling); a non-leading axis is moved to
the front first. Low-precision floats (float16, bfloat16, float8, float4) are reduced in float32
and rounded once, as the in-process runtime does; sums of 8- and 16-bit integers are made in 32
bits and wrapped back (Open MPI's AVX ops saturate them: ``mpi_types.mpi_reduction``). Every
call goes through ``guarded``
(src/distributed/failures.py): a dead peer or a timeout becomes RankFailure / CollectiveTimeout
(naming the ranks that never arrived), and the flight
recorder logs it; the collective hooks (src/distributed/hooks.py) run around it.
"""
from __future__ import annotations

import threading

import numpy as np

from ..arrays import device as _device
from ..collectives.runtime.context import collective_timeout
from ..collectives.runtime.inprocess import (InProcessComm, all_to_all_params, finish_reduce,
                                             gather_params)
from ..core.placements import chunk_bounds
from . import arrival, hierarchical, runtime
from .failures import guarded
from .hooks import run_post, run_pre
from .mpi_types import mpi_reduction, mpi_view, result_buffer
from .requests import Chain, InThread, Requests

_GROUPS: dict = {}    # devices of a mesh group -> its ProcessGroup
_CREATING: dict = {}  # group uid -> (creation in flight, its arrival track)
_MAKING: dict = {}    # devices of a mesh group -> the lock its (one) creator holds
_MAKING_LOCK = threading.Lock()


def drop_group_cache() -> None:
    """Forgets the mesh groups and the group creations in flight (after the world was
    reconfigured: they may hold failed processes, their keys are world ranks of the old
    numbering, and creations still pending on the old parent communicator fail)."""
    _GROUPS.clear()
    _CREATING.clear()
    _MAKING.clear()
    hierarchical.drop_layouts()


def _contig(x):
    x = np.asarray(x)
    return x if x.flags.c_contiguous else np.array(x, order="C")


def _vec(arr, counts, displs):
    """mpi4py's vector message spec ``[buffer, counts, displacements, datatype]``."""
    buf, dtype = mpi_view(arr)
    return [buf, [int(c) for c in counts], [int(d) for d in displs], dtype]


class MPIComm:
    """The communicator of one SPMD run over a multi-process mesh (each process may own
    several of its devices; see the module docstring).

    ``timeout``: seconds each collective waits, or None for the mesh's / the default setting
    (``starling.distributed.set_timeout``), read at every call.
    """

    def __init__(self, mesh, timeout=None):
        self.mesh = mesh
        self.timeout = timeout
        failed = [d for d in mesh.flat_devices if d.process_index is None]
        if failed:
            raise ValueError(
                f"the mesh {mesh} holds devices of failed processes {failed}; rebuild it over "
                "the survivors with starling.distributed.surviving_mesh(mesh) or make_mesh over "
                "starling.devices()")
        # the rendezvous of this process's devices (groups inside the process, and the local
        # step of hierarchical ones)
        self.local_comm = InProcessComm(mesh, timeout)

    def abort(self, reason):
        """Breaks the pending rendezvous of this process's devices (a device failed)."""
        self.local_comm.abort(reason)

    def device_done(self, device):
        """Marks ``device``'s computation as returned (see InProcessComm.device_done)."""
        self.local_comm.device_done(device)

    def _timeout(self):
        return self.timeout if self.timeout is not None else collective_timeout(self.mesh)

    # ---- groups ----------------------------------------------------------------------------------
    def process_group(self, lay, axes):
        """The ProcessGroup of the mesh group laid out as ``lay`` (a GroupLayout): an MPI
        communicator over its processes in layout order, made on first use by one thread of
        each of them and cached."""
        group = _GROUPS.get(lay.devs)
        if group is not None:
            return group
        with _MAKING_LOCK:
            lock = _MAKING.setdefault(lay.devs, threading.Lock())
        with lock:   # this process's other devices of the group wait for the one making it
            group = _GROUPS.get(lay.devs)
            if group is None:
                from .group import ProcessGroup
                key = lay.procs
                # named by job ranks, which reconfigurations keep: the members of a group made
                # again agree on how many times it was made (its arrival track's incarnation);
                # with several devices per process, several groups share the processes: their
                # devices tell them apart
                uid = f"spmd{[runtime.job_rank(k) for k in key]}"
                if len(_device.devices()) != runtime.get_world_size():
                    uid += "@" + ",".join(str(d.id) for d in lay.devs)
                comm = create_group_comm(key, uid, self._timeout())
                group = ProcessGroup(comm, key, name=f"mesh{tuple(axes)}", uid=uid,
                                     messages=False)
                _GROUPS[lay.devs] = group
        return group

    def group_comm(self, ctx, axes):
        """(ProcessGroup of this device's group over ``axes``, its MPI communicator, my rank
        in the group) for a group holding one device of each of its processes."""
        group = self.process_group(hierarchical.layout(ctx, axes), axes)
        return group, group.comm, ctx.group(axes)[1]

    def guard(self, op, group, start, x, params, blocking=None):
        """Runs the collective on ``group`` (``start()``: its nonblocking form, a request;
        ``blocking()``: the blocking one, used without a timeout) through ``guarded``."""
        guarded(op, group.comm, self._timeout(), start, shapes=np.shape(x),
                dtype=np.asarray(x).dtype, params=params, blocking=blocking)

    def _run(self, op, group, start, x, params, blocking=None):
        """``guard`` after the pre hooks; the caller passes its result through ``run_post``."""
        run_pre(op, group, x)
        self.guard(op, group, start, x, params, blocking)

    def _route(self, name, ctx, axes, *args):
        """The result of collective ``name`` when the group is not one device of each of its
        processes: inside this process (the in-process runtime) or hierarchical; else None."""
        lay = hierarchical.layout(ctx, axes)
        if lay.kind == "local":
            return getattr(self.local_comm, name)(ctx, *args[:1], axes, *args[1:])
        if lay.kind == "hier":
            return getattr(hierarchical, name)(self, ctx, lay, args[0], axes, *args[1:])
        return None

    # ---- collectives -----------------------------------------------------------------------------
    def all_reduce(self, ctx, x, axes, op):
        routed = self._route("all_reduce", ctx, axes, x, op)
        if routed is not None:
            return routed
        group, comm, _ = self.group_comm(ctx, axes)
        x = _contig(x)
        acc, mop = mpi_reduction(op, x.dtype, "all_reduce")
        send = x.astype(acc) if acc != x.dtype else x
        out = result_buffer(send.shape, send.dtype)
        self._run("all_reduce", group,
                  lambda: comm.Iallreduce(mpi_view(send), mpi_view(out), op=mop),
                  x, {"op": op, "axes": list(axes)},
                  lambda: comm.Allreduce(mpi_view(send), mpi_view(out), op=mop))
        return run_post("all_reduce", group, finish_reduce(out, op, comm.Get_size(), x.dtype))

    def all_gather(self, ctx, x, axes, axis, tiled):
        routed = self._route("all_gather", ctx, axes, x, axis, tiled)
        if routed is not None:
            return routed
        group, comm, _ = self.group_comm(ctx, axes)
        x = np.asarray(x)
        front = _contig(np.moveaxis(x, axis, 0) if tiled else x[None])
        n = comm.Get_size()
        row = int(np.prod(front.shape[1:], dtype=np.int64))
        mine = np.array([front.shape[0]], np.int64)
        lead = np.ones(n, np.int64)
        got = {}

        def gather(call):
            out = got["out"] = result_buffer((int(lead.sum()),) + front.shape[1:], x.dtype)
            counts = [int(c) * row for c in lead]
            displs = list(np.cumsum([0] + counts[:-1]))
            return call(mpi_view(front), _vec(out, counts, displs))

        # tiled pieces may be uneven: exchange their lengths first, in the same timed call
        def start():
            if not tiled:
                return gather(comm.Iallgatherv)
            return Chain(lambda: comm.Iallgather(mpi_view(mine), mpi_view(lead)),
                         lambda: gather(comm.Iallgatherv))

        def blocking():
            if tiled:
                comm.Allgather(mpi_view(mine), mpi_view(lead))
            gather(comm.Allgatherv)

        self._run("all_gather", group, start, x,
                  dict(gather_params(axis, tiled), axes=list(axes)), blocking)
        return run_post("all_gather", group, np.moveaxis(got["out"], 0, axis))

    def reduce_scatter(self, ctx, x, axes, op, dim, tiled):
        routed = self._route("reduce_scatter", ctx, axes, x, op, dim, tiled)
        if routed is not None:
            return routed
        group, comm, rank = self.group_comm(ctx, axes)
        n = comm.Get_size()
        x = np.asarray(x)
        front = _contig(np.moveaxis(x, dim, 0))
        acc, mop = mpi_reduction(op, x.dtype, "reduce_scatter")
        send = front.astype(acc) if acc != x.dtype else front
        row = int(np.prod(front.shape[1:], dtype=np.int64))
        if tiled:
            sizes = [b - a for a, b in (chunk_bounds(front.shape[0], n, r) for r in range(n))]
        else:
            sizes = [1] * n
        out = result_buffer((sizes[rank],) + front.shape[1:], acc)
        counts = [s * row for s in sizes]
        self._run("reduce_scatter", group,
                  lambda: comm.Ireduce_scatter(mpi_view(send), mpi_view(out), counts, op=mop),
                  x, {"op": op, "dim": dim, "tiled": tiled, "axes": list(axes)},
                  lambda: comm.Reduce_scatter(mpi_view(send), mpi_view(out), counts, op=mop))
        out = finish_reduce(out, op, n, x.dtype)
        return run_post("reduce_scatter", group, np.moveaxis(out, 0, dim) if tiled else out[0])

    def all_to_all(self, ctx, x, axes, split_axis, concat_axis, tiled):
        routed = self._route("all_to_all", ctx, axes, x, split_axis, concat_axis, tiled)
        if routed is not None:
            return routed
        group, comm, rank = self.group_comm(ctx, axes)
        n = comm.Get_size()
        x = np.asarray(x)
        front = _contig(np.moveaxis(x, split_axis, 0))
        row = int(np.prod(front.shape[1:], dtype=np.int64))
        if tiled:
            bounds = [chunk_bounds(front.shape[0], n, r) for r in range(n)]
        else:
            bounds = [(r, r + 1) for r in range(n)]
        # tiled blocks may be uneven along the split axis and the concat axis: each member
        # tells each other the length of the block it sends and its concat-axis size
        tail = list(front.shape[1:])
        cdim = None
        if tiled and concat_axis != split_axis:
            cdim = concat_axis if concat_axis < split_axis else concat_axis - 1
        send_meta = np.array([[b - a, tail[cdim] if cdim is not None else 0]
                              for a, b in bounds], np.int64)
        recv_meta = np.empty((n, 2), np.int64)
        got = {}

        def shape_from(k):
            t = list(tail)
            if cdim is not None:
                t[cdim] = int(recv_meta[k, 1])
            return (int(recv_meta[k, 0]),) + tuple(t)

        def exchange(call):
            recv_counts = [int(np.prod(shape_from(k), dtype=np.int64)) for k in range(n)]
            out = got["out"] = result_buffer((sum(recv_counts),), x.dtype)
            return call(_vec(front, [int(c) * row for c in send_meta[:, 0]],
                             [a * row for a, _ in bounds]),
                        _vec(out, recv_counts, list(np.cumsum([0] + recv_counts[:-1]))))

        def blocking():
            comm.Alltoall(mpi_view(send_meta), mpi_view(recv_meta))
            exchange(comm.Alltoallv)

        # the block shapes are exchanged first, in the same timed call
        self._run("all_to_all", group,
                  lambda: Chain(lambda: comm.Ialltoall(mpi_view(send_meta), mpi_view(recv_meta)),
                                lambda: exchange(comm.Ialltoallv)),
                  x, dict(all_to_all_params(split_axis, concat_axis, tiled), axes=list(axes)),
                  blocking)
        pieces, start = [], 0
        for k in range(n):
            shape = shape_from(k)
            size = int(np.prod(shape, dtype=np.int64))
            pieces.append(got["out"][start:start + size].reshape(shape))
            start += size
        if not tiled:   # each piece is one slice of the split axis: stack at concat_axis
            res = np.stack([np.take(p, 0, axis=0) for p in pieces], concat_axis)
        else:
            res = np.concatenate([np.moveaxis(p, 0, split_axis) for p in pieces], concat_axis)
        return run_post("all_to_all", group, res)

    def ppermute(self, ctx, x, axes, perm):
        routed = self._route("ppermute", ctx, axes, x, perm)
        if routed is not None:
            return routed
        group, comm, rank = self.group_comm(ctx, axes)
        x = _contig(x)
        out = np.zeros_like(x)
        dst = next((d for s, d in perm if s == rank), None)
        src = next((s for s, d in perm if d == rank), None)

        def start():
            reqs = []
            if src is not None:
                reqs.append(comm.Irecv(mpi_view(out), source=src, tag=7))
            if dst is not None:
                reqs.append(comm.Isend(mpi_view(x), dest=dst, tag=7))
            return Requests(reqs)
        self._run("ppermute", group, start, x,
                  {"perm": [list(p) for p in perm], "axes": list(axes)})
        return run_post("ppermute", group, out)

    def broadcast(self, ctx, x, axes, root):
        routed = self._route("broadcast", ctx, axes, x, root)
        if routed is not None:
            return routed
        group, comm, rank = self.group_comm(ctx, axes)
        buf = _contig(x).copy()
        self._run("broadcast", group, lambda: comm.Ibcast(mpi_view(buf), root=root), buf,
                  {"root": root, "axes": list(axes)},
                  lambda: comm.Bcast(mpi_view(buf), root=root))
        return run_post("broadcast", group, buf)


def create_group_comm(ranks, uid, timeout):
    """The communicator of the world ranks ``ranks`` (group id ``uid``), made collectively by
    them (each calls this; the others do not).

    ``Create_group`` blocks until every member calls it and has no nonblocking form, so it runs
    in a helper thread under the collective's timeout; it counts as collective #0 of the group
    on the arrival board, so a timeout names the members that never came. A creation that timed
    out keeps going and is waited for by the next call with the same ``uid``.

    Raises:
        CollectiveTimeout: a member did not call it within ``timeout`` seconds.
    """
    ranks = [int(r) for r in ranks]
    pending, track = _CREATING.get(uid, (None, None))
    if pending is None:
        parent = runtime.parent_comm()
        MPI = runtime.mpi()

        def create():
            world = parent.Get_group()
            g = world.Incl(ranks)
            comm = parent.Create_group(g, tag=arrival.stable_hash(uid) & 0x7FFF)
            g.Free()
            world.Free()
            comm.Set_errhandler(MPI.ERRORS_RETURN)
            return comm
        pending = InThread(create, name=f"starling-create-{uid}")
        track = arrival.new_track(uid, ranks)
        _CREATING[uid] = (pending, track)
    guarded("create_group", runtime.world_comm(), timeout, pending, shapes=(len(ranks),),
            dtype="int64", track=track, seq=0, params={"ranks": ranks})
    del _CREATING[uid]
    arrival.attach(pending.result, track)
    return pending.result

