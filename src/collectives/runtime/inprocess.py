"""The in-process runtime: the devices of this process, one worker thread each.

``run_spmd(mesh, fn)`` runs ``fn(ctx)`` on every local device of ``mesh`` at once, each in its
device's worker thread with its SpmdContext; NumPy, BLAS and the cpp kernels release the GIL,
so N devices use N cores. Collectives meet at a *rendezvous* (one per group and sequence
number): every member deposits its buffer, a barrier releases them, and each computes its own
result from the deposits (no copies of the inputs are made; arrays are immutable).

All-reduce of large buffers splits the work: member r reduces chunk r of every deposit, in rank
order (the same rounding on every member), and writes it into every member's output; a second
barrier ends the operation. Results are private buffers: one device's compiled program may reuse
its buffers in place without touching another device's.

A failure in one device's computation aborts the run: the peers waiting in a collective get a
CollectiveError, and ``run_spmd`` raises the original exception. Devices that run different
sequences of collectives (a device-dependent trip count around a ``psum``, a different
collective at the same point) cannot deadlock either: a rendezvous that a finished device never
joined, or that two different operations meet at, fails with a CollectiveMismatch naming both.
"""
from __future__ import annotations

import contextlib
import itertools
import math
import queue
import threading
from concurrent.futures import FIRST_EXCEPTION, Future, wait

import numpy as np

from ...core import dtypes
from ...core.placements import chunk_bounds
from ...lowering.runtime.native import empty as pooled_empty
from . import flight_recorder
from .context import (CollectiveError, CollectiveMismatch, CollectiveTimeout, SpmdContext,
                      collective_timeout, reset_spmd, set_spmd)

_PARALLEL_MIN = 1 << 16   # elements: below, every member reduces the whole buffer itself
_BLOCK_BYTES = 512 << 10  # a block reduced and copied while it is in the core's cache
_STUCK_GRACE = 0.5        # seconds run_spmd still waits for a device stuck past a timeout


def reduce_ufunc(op):
    """The NumPy ufunc that combines two partial values of reduce op ``op``."""
    return {"sum": np.add, "avg": np.add, "max": np.maximum, "min": np.minimum,
            "prod": np.multiply}[op]


def accumulation_dtype(dt, op=None):
    """The dtype members' values of ``dt`` are combined in by reduce op ``op``: low-precision
    floats in float32 (rounded once), as Starling's reductions do; for "avg" also integers and
    booleans in (u)int64, so the sum before the division cannot wrap around (the mean of
    int8 values 100 and 120 is 110, not -18)."""
    dt = np.dtype(dt)
    if dt in (dtypes.float16, dtypes.bfloat16) or dt in dtypes.LOW_PRECISION_FLOATS \
            or dt in dtypes.SCALE_FLOATS:
        return np.dtype(np.float32)
    if op == "avg" and dt.kind in "biu":
        return np.dtype(np.uint64 if dt.kind == "u" else np.int64)
    return dt


def finish_reduce(acc, op, n, dt):
    """``acc`` (the combination of ``n`` values) as the result of reduce op ``op`` in ``dt``."""
    if op == "avg":   # scale floats (float8_e8m0fnu) are no "inexact" dtype, but floats
        dt = np.dtype(dt)
        inexact = dtypes.is_inexact(dt) or dt in dtypes.SCALE_FLOATS
        acc = acc / n if inexact else acc // n
    return acc.astype(dt, copy=False) if acc.dtype != dt else acc


def _contiguous(x):
    # np.ascontiguousarray would turn a 0-d array into a 1-d one
    x = np.asarray(x)
    return x if x.flags.c_contiguous else np.array(x, order="C")


def _uneven_dims(uneven):
    return () if uneven is None else (uneven,) if isinstance(uneven, int) else tuple(uneven)


def _sig(name, x, uneven=None, **params):
    """What the members of a collective must agree on: the operation, its parameters, the
    dtype and the shape (dims in ``uneven``, which may differ between members, shown as *)."""
    skip = _uneven_dims(uneven)
    shape = ",".join("*" if i in skip else str(n) for i, n in enumerate(np.shape(x)))
    args = ", ".join(f"{k}={v}" for k, v in params.items())
    return f"{name}({args}) of {np.dtype(x.dtype).name}[{shape}]"


def record_params(uneven=None, **params):
    """A collective's parameters as the flight recorder files them: JSON-safe, with the dims
    that may differ between members as ``free_dims`` (shared by every runtime, so that dumps
    of in-process and MPI runs read alike)."""
    out = {k: [list(p) for p in v] if k == "perm" else v for k, v in params.items()}
    if uneven is not None:
        out["free_dims"] = sorted(_uneven_dims(uneven))
    return out


def gather_params(axis, tiled) -> dict:
    """Flight-recorder params of an all_gather: tiled pieces may differ along ``axis``."""
    return record_params(axis if tiled else None, axis=axis, tiled=tiled)


def all_to_all_params(split_axis, concat_axis, tiled) -> dict:
    """Flight-recorder params of an all_to_all: tiled blocks may be uneven along both axes."""
    return record_params((split_axis, concat_axis) if tiled else None, split_axis=split_axis,
                         concat_axis=concat_axis, tiled=tiled)


class _Rendezvous:
    __slots__ = ("slots", "barrier", "left", "outs", "devs", "ops", "seq", "error", "failure",
                 "result")

    def __init__(self, devs, seq):
        n = len(devs)
        self.slots = [None] * n
        self.outs = [None] * n
        self.ops = [None] * n   # each member's operation signature (_sig)
        self.barrier = threading.Barrier(n)
        self.left = n
        self.devs, self.seq = devs, seq
        self.error = None   # why the rendezvous can never complete
        self.failure = None   # the exception a leader member hit working for all (``lead``)
        self.result = None    # what a leader member computed for all

    @property
    def op(self):
        return next(o for o in self.ops if o is not None)

    def who_called_what(self) -> str:
        by_op = {}
        for d, o in zip(self.devs, self.ops):
            if o is not None:
                by_op.setdefault(o, []).append(d)
        return "; ".join(f"{o} on {ds}" for o, ds in sorted(by_op.items()))

    def fail(self, message):
        if self.error is None:
            self.error = message
        self.barrier.abort()


def echo_failure(e):
    """The exception a member raises when the leader of its collective failed with ``e``: the
    same kind (a timeout names the same missing members, a failure the same ranks), else a
    CollectiveError saying why."""
    if isinstance(e, CollectiveError):
        try:
            out = type(e)(str(e))
        except Exception:
            out = CollectiveError(str(e))
        for k, v in vars(e).items():
            setattr(out, k, v)
        return out
    return CollectiveError(f"the member leading the collective failed: {e!r}")


def rv_error(e) -> bool:
    """True when ``e`` is a rendezvous disagreement (members called different collectives, or one
    finished without the others) rather than an abort caused by another device's error."""
    return isinstance(e, CollectiveMismatch)


_RUNS = itertools.count()


def participant(device) -> str:
    """A device's name in flight-recorder logs ("cpu3")."""
    return f"{device.platform}{device.id}"


class InProcessComm:
    """Collectives between the devices of one mesh inside this process (see module docstring).

    ``timeout`` (seconds, or None for the mesh's / default setting: ``collective_timeout``)
    bounds every wait; a collective that times out raises CollectiveTimeout naming the devices
    that did not arrive. Every collective is recorded by the flight recorder, which dumps one
    log per device when one times out or the members disagree.
    """

    def __init__(self, mesh, timeout=None):
        self.mesh = mesh
        self.timeout = timeout
        self._lock = threading.Lock()
        self._rvs = {}
        self._failed = None
        self._done = set()   # devices whose computation has returned
        self._run = next(_RUNS)
        self._names = {}

    # ---- rendezvous ----------------------------------------------------------------------------
    def _group_names(self, devs):
        names = self._names.get(devs)
        if names is None:
            members = [participant(d) for d in devs]
            names = self._names[devs] = (f"run{self._run}[{','.join(members)}]", members)
        return names

    @contextlib.contextmanager
    def session(self, ctx, axes, payload, x, name, uneven=None, local=None, **params):
        """One collective ``name`` of this device: meets the group (deposits ``payload``;
        ``name`` and ``params`` must agree across the members, the dims in ``uneven`` of ``x``
        may differ), yields (rendezvous, my rank) and records it in the flight recorder.

        ``local``: only these devices of the group meet (those of this process, when the group
        spans processes: src/distributed/hierarchical.py); the rank yielded is then the
        position among them, and the rendezvous is still named by the whole group."""
        devs, rank = ctx.group(axes)
        group, members = self._group_names(devs)
        entry = flight_recorder.record_start(
            name, members[rank], group, members, ctx.peek_seq(devs), np.shape(x), x.dtype,
            source="inprocess", params=dict(record_params(uneven, **params), axes=list(axes)))
        rv = None
        try:
            key, rv, rank = self._meet(ctx, axes, payload, _sig(name, x, uneven, **params),
                                       local)
        except CollectiveTimeout as e:
            flight_recorder.record_end(entry, "timeout", e)
            raise
        except CollectiveError as e:   # the members disagree, or a failure elsewhere aborted
            flight_recorder.record_end(entry, "error" if rv_error(e) else "aborted", e)
            raise
        try:
            yield rv, rank
            flight_recorder.record_end(entry, "completed")
        except CollectiveTimeout as e:
            flight_recorder.record_end(entry, "timeout", e)
            raise
        except BaseException as e:
            flight_recorder.record_end(entry, "error", e)
            raise
        finally:
            self._leave(key, rv)

    def _meet(self, ctx, axes, payload, op, local=None):
        devs, rank = ctx.group(axes)
        seq = ctx.next_seq(devs)
        key = (devs, seq)
        if local is not None:
            devs, rank = local, local.index(ctx.device)
        with self._lock:
            if self._failed is not None:
                raise CollectiveError(f"{op}: the SPMD run was aborted ({self._failed})")
            rv = self._rvs.get(key)
            if rv is None:
                rv = self._rvs[key] = _Rendezvous(devs, seq)
            rv.slots[rank] = payload
            rv.ops[rank] = op
            if any(o is not None and o != op for o in rv.ops):
                rv.fail(f"the devices of the group {list(devs)} disagree on its collective "
                        f"#{seq}: {rv.who_called_what()}; every device must run the same "
                        "collectives in the same order")
            else:
                self._check_finished(rv)
        self._wait(rv, devs, op)
        return key, rv, rank

    def _check_finished(self, rv):
        gone = [d for d, s in zip(rv.devs, rv.slots) if s is None and d in self._done]
        if gone:
            rv.fail(f"{rv.op} (collective #{rv.seq} of the group {list(rv.devs)}) can never "
                    f"complete: {gone} finished without calling it; every device must run the "
                    "same collectives in the same order (e.g. no device-dependent trip count "
                    "around a collective)")

    def device_done(self, device):
        """Marks ``device``'s computation as returned: rendezvous waiting for it fail."""
        with self._lock:
            self._done.add(device)
            for rv in list(self._rvs.values()):
                if device in rv.devs:
                    self._check_finished(rv)

    def lead(self, rv, rank, op, work):
        """The second half of a collective whose members' deposits one of them (the leader,
        rank 0) turns into everyone's results: the leader runs ``work()`` (a list, one result
        per member) while the others wait for it (without a timeout of their own: the leader's
        work has one); returns this member's result. An exception of the leader's reaches every
        member: the leader raises it, the others an equivalent one (``echo_failure``)."""
        if rank == 0:
            try:
                rv.result = work()
            except BaseException as e:
                rv.failure = e
                rv.barrier.abort()
                raise
        if len(rv.slots) > 1:
            self._wait(rv, rv.devs, op, timeout=None)
        return rv.result[rank]

    def _wait(self, rv, devs, op, timeout=False):
        if timeout is False:
            timeout = self.timeout if self.timeout is not None else collective_timeout(self.mesh)
        try:
            rv.barrier.wait(timeout)
        except threading.BrokenBarrierError:
            if rv.failure is not None:
                raise echo_failure(rv.failure) from None
            if rv.error is not None:
                raise CollectiveMismatch(f"{rv.error}; {flight_recorder.dumps_note()}") \
                    from None
            if self._failed is not None:
                raise CollectiveError(f"{op}: the SPMD run was aborted ({self._failed})") from None
            missing = [d for d, s in zip(devs, rv.slots) if s is None]
            raise CollectiveTimeout(f"{op}: timed out after {timeout} s waiting for {missing} "
                                    f"(group {list(devs)}); {flight_recorder.dumps_note()}",
                                    missing) from None

    def _leave(self, key, rv):
        with self._lock:
            rv.left -= 1
            if rv.left == 0:
                self._rvs.pop(key, None)

    def abort(self, reason):
        """Breaks every pending rendezvous: peers blocked in collectives raise CollectiveError."""
        with self._lock:
            if self._failed is None:
                self._failed = reason
            rvs = list(self._rvs.values())
        for rv in rvs:
            rv.barrier.abort()

    # ---- collectives (NumPy buffers in, a new NumPy buffer out) --------------------------------
    def all_reduce(self, ctx, x, axes, op):
        devs, _ = ctx.group(axes)
        n = len(devs)
        x = _contiguous(x)
        if n == 1:
            return finish_reduce(x.copy(), op, 1, x.dtype)
        out = pooled_empty(x.shape, x.dtype)
        with self.session(ctx, axes, (x, out), x, "all_reduce", op=op) as (rv, rank):
            fn = reduce_ufunc(op)
            acc_dt = accumulation_dtype(x.dtype, op)
            flat = [s[0].reshape(-1) for s in rv.slots]
            if x.size < _PARALLEL_MIN:
                self._reduce(out.reshape(-1), flat, 0, x.size, fn, acc_dt, op, n)
            else:
                # each member reduces one chunk into every member's output, a block at a time
                # so that the copies to the others read the block from cache: memory traffic
                # is the inputs read once and the outputs written once
                lo, hi = chunk_bounds(x.size, n, rank)
                mine = out.reshape(-1)
                others = [o.reshape(-1) for _, o in rv.slots if o is not out]
                step = max(1, _BLOCK_BYTES // x.itemsize)
                for s in range(lo, hi, step):
                    e = min(s + step, hi)
                    part = self._reduce(mine[s:e], flat, s, e, fn, acc_dt, op, n)
                    for o in others:
                        o[s:e] = part
                self._wait(rv, devs, "all_reduce")
        return out

    @staticmethod
    def _reduce(dst, flat, lo, hi, fn, acc_dt, op, n):
        """Writes the combination of ``flat[i][lo:hi]`` into ``dst``; returns ``dst``."""
        if acc_dt == dst.dtype and op != "avg":
            # straight into the output: one pass per operand, no accumulator copy
            fn(flat[0][lo:hi], flat[1][lo:hi], out=dst)
            for f in flat[2:]:
                fn(dst, f[lo:hi], out=dst)
            return dst
        acc = np.array(flat[0][lo:hi], dtype=acc_dt)
        for f in flat[1:]:
            fn(acc, f[lo:hi], out=acc)
        dst[...] = finish_reduce(acc, op, n, dst.dtype)
        return dst

    def all_gather(self, ctx, x, axes, axis, tiled):
        devs, _ = ctx.group(axes)
        if len(devs) == 1:
            return np.array(x) if tiled else np.expand_dims(x, axis).copy()
        x = np.asarray(x)
        with self.session(ctx, axes, x, x, "all_gather", uneven=axis if tiled else None,
                           axis=axis, tiled=tiled) as (rv, _):
            parts = list(rv.slots)
            return np.concatenate(parts, axis) if tiled else np.stack(parts, axis)

    def reduce_scatter(self, ctx, x, axes, op, dim, tiled):
        devs, rank = ctx.group(axes)
        n = len(devs)
        x = np.asarray(x)
        if n == 1:
            out = x if tiled else np.take(x, 0, axis=dim)
            return finish_reduce(np.array(out), op, 1, x.dtype)
        with self.session(ctx, axes, x, x, "reduce_scatter", op=op, dim=dim,
                           tiled=tiled) as (rv, rank):
            if tiled:
                lo, hi = chunk_bounds(x.shape[dim], n, rank)
                idx = (slice(None),) * dim + (slice(lo, hi),)
            else:
                idx = (slice(None),) * dim + (rank,)
            fn = reduce_ufunc(op)
            acc = np.array(rv.slots[0][idx], dtype=accumulation_dtype(x.dtype, op))
            for s in rv.slots[1:]:
                fn(acc, s[idx], out=acc)
            return finish_reduce(acc, op, n, x.dtype)

    def all_to_all(self, ctx, x, axes, split_axis, concat_axis, tiled):
        devs, rank = ctx.group(axes)
        n = len(devs)
        x = np.asarray(x)
        if n == 1:
            return np.array(x) if tiled else np.array(x)
        with self.session(ctx, axes, x, x, "all_to_all",
                           uneven=(split_axis, concat_axis) if tiled else None,
                           split_axis=split_axis, concat_axis=concat_axis,
                           tiled=tiled) as (rv, rank):
            if tiled:
                pieces = []
                for s in rv.slots:
                    lo, hi = chunk_bounds(s.shape[split_axis], n, rank)
                    pieces.append(s[(slice(None),) * split_axis + (slice(lo, hi),)])
                return np.concatenate(pieces, concat_axis)
            pieces = [np.take(s, rank, axis=split_axis) for s in rv.slots]
            return np.stack(pieces, concat_axis)

    def ppermute(self, ctx, x, axes, perm):
        devs, rank = ctx.group(axes)
        x = np.asarray(x)
        if len(devs) == 1:
            src = next((s for s, d in perm if d == rank), None)
            return np.zeros_like(x) if src is None else np.array(x)
        with self.session(ctx, axes, x, x, "ppermute", perm=perm) as (rv, rank):
            src = next((s for s, d in perm if d == rank), None)
            if src is None:
                return np.zeros_like(x)
            return np.array(rv.slots[src])

    def broadcast(self, ctx, x, axes, root):
        devs, rank = ctx.group(axes)
        if len(devs) == 1:
            return np.array(x)
        x = np.asarray(x)
        with self.session(ctx, axes, x, x, "broadcast", root=root) as (rv, rank):
            return np.array(rv.slots[root])


# ---- device worker threads ---------------------------------------------------------------------

class _Worker(threading.Thread):
    def __init__(self, device):
        super().__init__(name=f"starling-{device}", daemon=True)
        self.q = queue.SimpleQueue()

    def run(self):
        from ...lowering.runtime import threads as _threads
        _threads.enter_device_thread()
        while True:
            fn, fut = self.q.get()
            if not fut.set_running_or_notify_cancel():
                continue
            try:
                fut.set_result(fn())
            except BaseException as e:   # delivered to the caller of run_spmd
                fut.set_exception(e)


_WORKERS: dict = {}
_WORKERS_LOCK = threading.Lock()
_ENQUEUE_LOCK = threading.Lock()


def _worker(device):
    w = _WORKERS.get(device)
    if w is None:
        with _WORKERS_LOCK:
            w = _WORKERS.get(device)
            if w is None:
                if not _WORKERS:
                    # SPMD runs allocate every device's (immutable) results anew each call:
                    # keep freed blocks for reuse (src/lowering/runtime/malloc.py)
                    from ...lowering.runtime.malloc import keep_freed_memory
                    keep_freed_memory()
                w = _WORKERS[device] = _Worker(device)
                w.start()
    return w


def _no_remote(mesh):
    raise RuntimeError(f"the mesh {mesh} spans processes: call starling.distributed.initialize() "
                       "(under mpirun / python -m starling.launch) first")


# The communicator of meshes spanning processes; starling.distributed installs its MPI one.
REMOTE_COMM = [_no_remote]


def in_device_thread() -> bool:
    """True when called from one of the in-process runtime's device worker threads."""
    return isinstance(threading.current_thread(), _Worker)


def run_spmd(mesh, fn, comm=None, devices=None):
    """Runs ``fn(ctx)`` for every local device of ``mesh`` concurrently; returns the results in
    the order of ``devices`` (default: ``mesh.local_devices``).

    Raises:
        the first exception any device's computation raised (the others are aborted).
    """
    devices = mesh.local_devices if devices is None else devices
    if comm is None:
        comm = REMOTE_COMM[0](mesh) if mesh.is_multi_process else InProcessComm(mesh)
    ctxs = [SpmdContext(mesh, d, comm) for d in devices]

    def call(ctx):
        token = set_spmd(ctx)
        try:
            return fn(ctx)
        finally:
            reset_spmd(token)

    if len(ctxs) == 1 or in_device_thread():
        if len(ctxs) > 1:
            raise RuntimeError("SPMD execution over several devices was started from inside a "
                               "device's computation (e.g. a sharded operation inside a "
                               "shard_map body); compute on the local blocks instead")
        return [call(ctxs[0])]
    futs = []
    device_done = getattr(comm, "device_done", None)
    # Runs started by several threads at once are queued on every device in the same order
    # (the whole run under one lock): otherwise device 0 could run A then B while device 1
    # runs B then A, each waiting in a collective for the other.
    with _ENQUEUE_LOCK:
        for ctx in ctxs:
            fut = Future()
            if device_done is not None:
                fut.add_done_callback(lambda f, d=ctx.device, cb=device_done:
                                      cb(d) if f.exception() is None else None)
            _worker(ctx.device).q.put((lambda c=ctx: call(c), fut))
            futs.append(fut)
    # A failing device aborts the others at once (they may be blocked in a collective with it).
    done, pending = wait(futs, return_when=FIRST_EXCEPTION)
    if pending:
        failed = [f for f in done if f.exception() is not None]
        if failed:
            comm.abort(repr(failed[0].exception()))
        # A timeout means some device is stuck outside the collectives, where nothing can
        # interrupt it: report after a grace period instead of hanging with it. (Its worker
        # finishes the stuck call later; work queued for it meanwhile waits its turn.)
        stuck = any(isinstance(f.exception(), CollectiveTimeout) for f in failed)
        wait(pending, timeout=_STUCK_GRACE if stuck else None)
    errors = [f.exception() for f in futs if f.done() and f.exception() is not None]
    if errors:
        comm.abort(repr(errors[0]))
        # the cause, not its echo: a device's own error, else a timeout, else an abort
        primary = ([e for e in errors if not isinstance(e, CollectiveError)]
                   or [e for e in errors if isinstance(e, CollectiveTimeout)] or errors)
        raise primary[0]
    return [f.result() for f in futs]


def group_size(mesh, axes) -> int:
    """Number of devices in a group over mesh axes ``axes``: the product of their sizes."""
    return math.prod(mesh.shape[a] for a in axes)
