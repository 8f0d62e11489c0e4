"""Collectives of SPMD programs whose mesh spans processes, on MPI.

The same interface as the in-process communicator (src/collectives/runtime/inprocess.py): the
partitioner, shard_map and the collective primitives do not know which runtime moves the bytes.
Each process owns one device of such a mesh; the group of a collective (the devices sharing all
mesh coordinates but the collective's axes) is a ProcessGroup whose MPI communicator is made
once per group with ``Create_group`` (only the group's members take part) and cached; a world
reconfiguration after a failure (src/distributed/elastic.py) drops the cache, and a mesh that
still holds a failed process's device is refused.

Mapping: all_reduce -> Allreduce; all_gather -> Allgatherv (uneven pieces) along the gathered
axis; reduce_scatter -> Reduce_scatter with torch.chunk counts; all_to_all -> Alltoallv;
ppermute -> Isend / Irecv pairs; broadcast -> Bcast. NumPy buffers are passed to MPI directly
(no pickling); a non-leading axis is moved to the front first. Low-precision floats (float16,
bfloat16, float8, float4) are reduced in float32 and rounded once, as the in-process runtime
does. Every call goes through ``guarded`` (src/distributed/failures.py): a dead peer or a timeout
becomes RankFailure / CollectiveTimeout, and the flight recorder logs it; the collective hooks
(src/distributed/hooks.py) run around it.
"""
from __future__ import annotations

import numpy as np

from ..collectives.runtime.inprocess import accumulation_dtype, finish_reduce
from ..core.placements import chunk_bounds
from . import runtime
from .failures import detect_failures, guarded
from .hooks import run_post, run_pre
from .mpi_types import mpi_op, mpi_view

_GROUPS: dict = {}


def drop_group_cache() -> None:
    """Forgets the mesh groups' communicators (after the world was reconfigured: they may hold
    failed processes, and their keys are world ranks of the old numbering)."""
    _GROUPS.clear()


def _contig(x):
    x = np.asarray(x)
    return x if x.flags.c_contiguous else np.array(x, order="C")


def _vec(arr, counts, displs):
    """mpi4py's vector message spec ``[buffer, counts, displacements, datatype]``."""
    buf, dtype = mpi_view(arr)
    return [buf, [int(c) for c in counts], [int(d) for d in displs], dtype]


class MPIComm:
    """The communicator of one SPMD run over a multi-process mesh (one device per process)."""

    def __init__(self, mesh, timeout=None):
        self.mesh = mesh
        self.timeout = runtime.default_timeout() if timeout is None else timeout
        failed = [d for d in mesh.flat_devices if d.process_index is None]
        if failed:
            raise ValueError(
                f"the mesh {mesh} holds devices of failed processes {failed}; rebuild it over "
                "the survivors with starling.distributed.surviving_mesh(mesh) or make_mesh over "
                "starling.devices()")
        local = mesh.local_devices
        if len(local) != 1:
            raise ValueError(
                f"a mesh spanning processes must hold exactly one device of each process; this "
                f"process owns {len(local)} of its devices {list(local)}. Use one device per "
                "process (num_cpu_devices=1) or a mesh over one device per process")

    def abort(self, reason):   # SPMD runs in this process have one device: nothing to unblock
        pass

    # ---- groups ----------------------------------------------------------------------------------
    def group_comm(self, ctx, axes):
        """(ProcessGroup of this device's group over ``axes``, my rank in it)."""
        devs, rank = ctx.group(axes)
        key = tuple(d.process_index for d in devs)
        group = _GROUPS.get(key)
        if group is None:
            from .group import ProcessGroup
            world = runtime.world_comm()
            wg = world.Get_group()
            g = wg.Incl(list(key))
            try:
                with detect_failures("mesh group", world):
                    comm = world.Create_group(g, tag=hash(key) & 0x7FFF)
            finally:
                g.Free()
                wg.Free()
            comm.Set_errhandler(runtime.mpi().ERRORS_RETURN)
            group = _GROUPS[key] = ProcessGroup(comm, key, name=f"mesh{tuple(axes)}")
        return group, rank

    def _run(self, op, group, x, start, blocking=None):
        """Runs the collective on ``group`` (``start()``: its nonblocking form, an MPI request;
        ``blocking()``: the blocking form, used without a timeout) with the hooks' pre half; the
        caller passes its result through ``run_post``."""
        run_pre(op, group, x)
        guarded(op, group.comm, self.timeout, start, shapes=np.shape(x),
                dtype=getattr(x, "dtype", None), blocking=blocking)

    def _exchange_sizes(self, op, group, send, alltoall):
        """The members' int64 sizes: an all-gather of ``send`` (one int), or an all-to-all of it
        (one int per member); guarded like the collective they size."""
        comm = group.comm
        send = np.asarray(send, dtype=np.int64).reshape(-1)
        out = np.empty(comm.Get_size(), np.int64)
        name = "Alltoall" if alltoall else "Allgather"
        guarded(op, comm, self.timeout,
                lambda: getattr(comm, "I" + name.lower())(mpi_view(send), mpi_view(out)),
                shapes=send.shape, dtype=send.dtype,
                blocking=lambda: getattr(comm, name)(mpi_view(send), mpi_view(out)))
        return [int(v) for v in out]

    # ---- collectives ---------------------------------------------------------------------------
    def all_reduce(self, ctx, x, axes, op):
        group, _ = self.group_comm(ctx, axes)
        comm = group.comm
        x = _contig(x)
        acc = accumulation_dtype(x.dtype)
        send = x.astype(acc) if acc != x.dtype else x
        out = np.empty_like(send)
        mop = mpi_op("sum" if op == "avg" else op, send.dtype)
        self._run("all_reduce", group, x,
                  lambda: comm.Iallreduce(mpi_view(send), mpi_view(out), op=mop),
                  lambda: comm.Allreduce(mpi_view(send), mpi_view(out), op=mop))
        return run_post("all_reduce", group, finish_reduce(out, op, comm.Get_size(), x.dtype))

    def all_gather(self, ctx, x, axes, axis, tiled):
        group, _ = self.group_comm(ctx, axes)
        comm = group.comm
        x = np.asarray(x)
        front = _contig(np.moveaxis(x, axis, 0) if tiled else x[None])
        n = comm.Get_size()
        lead = self._exchange_sizes("all_gather (sizes)", group, [front.shape[0]], False) \
            if tiled else [1] * n
        row = int(np.prod(front.shape[1:], dtype=np.int64))
        out = np.empty((sum(lead),) + front.shape[1:], x.dtype)
        counts = [c * row for c in lead]
        displs = list(np.cumsum([0] + counts[:-1]))
        self._run("all_gather", group, x,
                  lambda: comm.Iallgatherv(mpi_view(front), _vec(out, counts, displs)),
                  lambda: comm.Allgatherv(mpi_view(front), _vec(out, counts, displs)))
        return run_post("all_gather", group, np.moveaxis(out, 0, axis))

    def reduce_scatter(self, ctx, x, axes, op, dim, tiled):
        group, rank = self.group_comm(ctx, axes)
        comm = group.comm
        n = comm.Get_size()
        x = np.asarray(x)
        front = _contig(np.moveaxis(x, dim, 0))
        acc = accumulation_dtype(x.dtype)
        send = front.astype(acc) if acc != x.dtype else front
        row = int(np.prod(front.shape[1:], dtype=np.int64))
        if tiled:
            sizes = [b - a for a, b in (chunk_bounds(front.shape[0], n, r) for r in range(n))]
        else:
            sizes = [1] * n
        out = np.empty((sizes[rank],) + front.shape[1:], acc)
        counts = [s * row for s in sizes]
        mop = mpi_op("sum" if op == "avg" else op, acc)
        self._run("reduce_scatter", group, x,
                  lambda: comm.Ireduce_scatter(mpi_view(send), mpi_view(out), counts, op=mop),
                  lambda: comm.Reduce_scatter(mpi_view(send), mpi_view(out), counts, op=mop))
        out = finish_reduce(out, op, n, x.dtype)
        return run_post("reduce_scatter", group, np.moveaxis(out, 0, dim) if tiled else out[0])

    def all_to_all(self, ctx, x, axes, split_axis, concat_axis, tiled):
        group, rank = self.group_comm(ctx, axes)
        comm = group.comm
        n = comm.Get_size()
        x = np.asarray(x)
        front = _contig(np.moveaxis(x, split_axis, 0))
        row = int(np.prod(front.shape[1:], dtype=np.int64))
        if tiled:
            bounds = [chunk_bounds(front.shape[0], n, r) for r in range(n)]
        else:
            bounds = [(r, r + 1) for r in range(n)]
        send_counts = [(b - a) * row for a, b in bounds]
        send_displs = [a * row for a, _ in bounds]
        recv_lead = self._exchange_sizes("all_to_all (sizes)", group,
                                         [b - a for a, b in bounds], True)
        recv_counts = [c * row for c in recv_lead]
        recv_displs = list(np.cumsum([0] + recv_counts[:-1]))
        out = np.empty((sum(recv_lead),) + front.shape[1:], x.dtype)
        self._run("all_to_all", group, x,
                  lambda: comm.Ialltoallv(_vec(front, send_counts, send_displs),
                                          _vec(out, recv_counts, recv_displs)),
                  lambda: comm.Alltoallv(_vec(front, send_counts, send_displs),
                                         _vec(out, recv_counts, recv_displs)))
        pieces = np.split(out, np.cumsum(recv_lead)[:-1], axis=0)
        if not tiled:   # each piece is one slice of the split axis: stack at concat_axis
            res = np.stack([np.take(p, 0, axis=0) for p in pieces], concat_axis)
        else:
            res = np.concatenate([np.moveaxis(p, 0, split_axis) for p in pieces], concat_axis)
        return run_post("all_to_all", group, res)

    def ppermute(self, ctx, x, axes, perm):
        group, rank = self.group_comm(ctx, axes)
        comm = group.comm
        MPI = runtime.mpi()
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
            return _Requests(MPI, reqs)
        self._run("ppermute", group, x, start)
        return run_post("ppermute", group, out)

    def broadcast(self, ctx, x, axes, root):
        group, rank = self.group_comm(ctx, axes)
        comm = group.comm
        buf = _contig(x).copy()
        self._run("broadcast", group, buf, lambda: comm.Ibcast(mpi_view(buf), root=root),
                  lambda: comm.Bcast(mpi_view(buf), root=root))
        return run_post("broadcast", group, buf)


class _Requests:
    """Several MPI requests waited on as one (``Test`` / ``Wait`` like an MPI.Request)."""

    def __init__(self, MPI, reqs):
        self.MPI, self.reqs = MPI, reqs

    def Test(self):
        return self.MPI.Request.Testall(self.reqs) if self.reqs else True

    def Wait(self):
        if self.reqs:
            self.MPI.Request.Waitall(self.reqs)

    def Cancel(self):
        for r in self.reqs:
            try:
                r.Cancel()
            except Exception:
                pass
