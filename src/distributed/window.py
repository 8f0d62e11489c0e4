"""One-sided communication (MPI RMA): a window onto a buffer owned by each member of a group.

``Window(array, group)`` (collective) gives every member a buffer initialized from its own
``array``; any member then reads and writes any member's buffer without the owner taking part:
``put``, ``get``, ``accumulate`` (sum / max / min / replace, element-wise atomic). Offsets and
sizes count elements of the target's buffer, flattened in C order.

When accesses complete (MPI's two synchronization modes):

* passive target: ``with win.lock(rank, exclusive=True):`` opens an access epoch on ``rank``
  (exclusive, or shared with other readers); puts and accumulates to it complete when the block
  ends, ``get`` returns its value at once. The target does nothing (it may be computing).
  An access outside any epoch locks its target just for itself (exclusive for ``put``, shared
  for ``get`` / ``accumulate``) and is complete when the call returns.
* active target: ``win.fence()`` (collective) starts a fence epoch; accesses issued until the
  next ``fence()`` complete at it, on every member. ``get`` needs ``async_op=True`` there (a
  Work whose ``wait()`` gives the value after the next fence). ``fence(end=True)`` closes the
  fence epochs so passive-target access can follow.

``array()`` returns the local buffer as a new immutable Array (after a fence, or under the
window's own lock: remote accesses that completed are in it). Creating the window, fences and
``free()`` are collectives of the group: timed (``timeout=`` / ``set_timeout``) and recorded
by the flight recorder. Low-precision floats MPI has no type for (float16, bfloat16, float8,
float4) move as raw bytes: put / get / accumulate with op "replace" work, reductions do not.
"""
from __future__ import annotations

import contextlib
import math

import numpy as np

from ..arrays.array import wrap
from ..arrays.convert import operand
from ..collectives.runtime.context import CollectiveError
from . import flight_recorder, runtime
from .codec import _DTYPES
from .failures import complete
from .hooks import run_post, run_pre
from .group import _PENDING, Work, _group, _timeout, peer_rank
from .mpi_types import mpi_reduction, mpi_view
from .objects import all_gather_object
from .requests import InThread

_ACC_OPS = ("sum", "max", "min", "replace")


class Window:
    """A window onto one buffer per member of ``group`` (see module docstring).

    Args:
        array: this member's initial buffer (array-like; its shape and dtype may differ
            between members).
        group: a ProcessGroup (default: world).
        timeout: seconds the collective calls (creation, fences, ``free``) wait; default: the
            group's timeout.
    Raises:
        TypeError: a dtype Starling does not have.
        CollectiveTimeout / RankFailure: as every collective.
    """

    def __init__(self, array, group=None, timeout=None):
        g = _group(group)
        a = operand(array, "Window")
        buf = np.ascontiguousarray(np.asarray(a))
        self.group = g
        self.timeout = timeout
        self.weak_type = a.weak_type
        layouts = all_gather_object((list(buf.shape), buf.dtype.name), group=g,
                                    timeout=_timeout(g, timeout))
        self._shapes = [tuple(s) for s, _ in layouts]
        self._dtypes = [_DTYPES[d] for _, d in layouts]
        MPI = runtime.mpi()
        self._MPI = MPI
        itemsize = buf.dtype.itemsize

        def create():
            win = MPI.Win.Allocate(max(buf.nbytes, 1), itemsize, comm=g.comm)
            win.Set_errhandler(MPI.ERRORS_RETURN)
            local = np.frombuffer(win.tomemory(), buf.dtype, count=buf.size).reshape(buf.shape)
            local[...] = buf
            # a synchronizing fence: no member accesses a buffer before its owner filled it;
            # the second one ends the fence epoch, so lock epochs may follow
            win.Fence(MPI.MODE_NOPRECEDE)
            win.Fence(MPI.MODE_NOSUCCEED)
            return win, local

        self._broken = None
        self._win, self._local = self._collective("window_create", create, buf)
        self._fence_open = False
        self._locked = {}          # target -> exclusive
        self._inflight = []        # origin buffers MPI may still read (until completion)
        self._completed = {}       # target -> completions so far (unlock / flush / fence)
        self._fences = 0

    # ---- introspection ---------------------------------------------------------------------------
    @property
    def rank(self) -> int:
        """This process's rank in the window's group."""
        return self.group.rank()

    @property
    def size(self) -> int:
        return self.group.size()

    def shape_of(self, rank) -> tuple:
        """The shape of member ``rank``'s buffer."""
        return self._shapes[peer_rank(self.group, rank, "rank", "Window.shape_of")]

    def dtype_of(self, rank) -> np.dtype:
        """The dtype of member ``rank``'s buffer."""
        return self._dtypes[peer_rank(self.group, rank, "rank", "Window.dtype_of")]

    def __repr__(self):
        return (f"Window(rank {self.rank} of {self.size}, local {self._local.dtype}"
                f"{list(self._local.shape)})")

    # ---- collectives -----------------------------------------------------------------------------
    def _collective(self, op, fn, x):
        """Runs the blocking collective ``fn()`` as collective ``op`` of the group: in a helper
        thread under the timeout when there is one (so the caller can give up), else here; the
        collective hooks run around it."""
        out = {}

        def run():
            out["result"] = fn()

        run_pre(op, self.group, x)
        rec = flight_recorder.begin(op, self.group.comm, np.shape(x), np.asarray(x).dtype)
        try:
            complete(rec, self.group.comm, _timeout(self.group, self.timeout),
                     lambda: InThread(run, name=f"starling-{op}"), blocking=run)
        except CollectiveError as e:
            self._broken = e   # the blocking MPI call is still pending: the window is unusable
            raise
        return run_post(op, self.group, out.get("result"))

    def _check(self, op):
        if self._broken is not None:
            raise CollectiveError(f"Window.{op}: the window is unusable after a failed "
                                  f"collective ({self._broken})")
        if self._win is None:
            raise ValueError(f"Window.{op}: the window was freed")

    def fence(self, end=False):
        """Completes every access of the current fence epoch, on every member (collective),
        and starts the next epoch; ``end=True`` starts none (passive-target access may
        follow).

        Raises:
            ValueError: a ``lock`` block is open.
        """
        self._check("fence")
        if self._locked:
            raise ValueError(f"Window.fence: lock epochs on {sorted(self._locked)} are open; "
                             "end their `with win.lock(...)` blocks first")
        MPI = self._MPI
        assertion = MPI.MODE_NOSUCCEED if end else 0
        if not self._fence_open:
            assertion |= MPI.MODE_NOPRECEDE
        win = self._win
        self._collective("window_fence", lambda: win.Fence(assertion), np.zeros(()))
        self._fence_open = not end
        self._fences += 1
        self._inflight.clear()

    @contextlib.contextmanager
    def lock(self, rank, exclusive=True):
        """A passive-target access epoch on member ``rank`` (``with win.lock(r): ...``).

        Accesses to ``rank`` inside complete when the block ends (``get`` at once). Exclusive
        locks exclude every other lock on ``rank``; shared ones only exclusive locks.

        Raises:
            ValueError: ``rank`` out of range, already locked here, or inside a fence epoch.
        """
        self._check("lock")
        rank = peer_rank(self.group, rank, "rank", "Window.lock")
        if self._fence_open:
            raise ValueError("Window.lock: the window is in a fence epoch; call "
                             "win.fence(end=True) first")
        if rank in self._locked:
            raise ValueError(f"Window.lock: rank {rank} is already locked by this process")
        MPI = self._MPI
        self._win.Lock(rank, MPI.LOCK_EXCLUSIVE if exclusive else MPI.LOCK_SHARED)
        self._locked[rank] = exclusive
        try:
            yield self
        finally:
            del self._locked[rank]
            self._win.Unlock(rank)
            self._done(rank)

    def _done(self, rank):
        self._completed[rank] = self._completed.get(rank, 0) + 1
        if not self._locked:
            self._inflight.clear()

    def flush(self, rank):
        """Completes the accesses to ``rank`` issued in its ``lock`` block so far."""
        self._check("flush")
        if rank not in self._locked:
            raise ValueError(f"Window.flush: rank {rank} is not locked (flush works inside "
                             "`with win.lock(rank)`)")
        self._win.Flush(rank)
        self._done(rank)

    # ---- accesses --------------------------------------------------------------------------------
    @contextlib.contextmanager
    def _epoch(self, target, exclusive):
        """The access epoch an operation on ``target`` runs in (its own lock when none)."""
        if target in self._locked or self._fence_open:
            yield False
            return
        with self.lock(target, exclusive):
            yield True

    def _target(self, op, value, target, offset):
        self._check(op)
        target = peer_rank(self.group, target, "target", f"Window.{op}")
        dt, size = self._dtypes[target], math.prod(self._shapes[target])
        a = operand(value, f"Window.{op}")
        v = np.asarray(a)
        if v.dtype != dt:
            if not (a.weak_type or np.can_cast(v.dtype, dt, "same_kind")):
                raise TypeError(f"Window.{op}: a {v.dtype} value cannot be written into rank "
                                f"{target}'s {dt} buffer (cast it first)")
            v = v.astype(dt)
        _check_range(op, target, offset, v.size, size, self._shapes[target])
        v = np.ascontiguousarray(v)
        return target, v, [int(offset), v.size, mpi_view(v)[1]]

    def put(self, value, target, offset=0):
        """Writes ``value`` (flattened) into ``target``'s buffer from element ``offset``.

        Raises:
            ValueError: ``target`` out of range. IndexError: the values do not fit.
            TypeError: ``value``'s dtype does not cast to the target's (same kind).
        """
        target, v, spec = self._target("put", value, target, offset)
        with self._epoch(target, True):
            self._inflight.append(v)
            self._win.Put(mpi_view(v), target, target=spec)

    def accumulate(self, value, target, offset=0, op="sum"):
        """Combines ``value`` element-wise into ``target``'s buffer from element ``offset``
        with ``op`` ("sum", "max", "min" or "replace"); atomic per element, so members may
        accumulate into the same elements concurrently.

        Raises:
            ValueError: an unknown op, ``target`` out of range. IndexError: out of bounds.
            TypeError: a reduction MPI cannot do in place on the dtype: the ones collectives
                make in a wider dtype (``mpi_types.mpi_reduction``): float16, bfloat16, float8,
                and sums of 8- or 16-bit integers (Open MPI saturates those: int8 100 + 100
                gives 127 where NumPy wraps around to -56); max / min of complex values.

        Max / min are MPI's (MPI_MAX / MPI_MIN: one-sided accumulation takes no other ops): a
        NaN meeting a number may give either, where collectives give NaN as NumPy does.
        """
        if op not in _ACC_OPS:
            raise ValueError(f"Window.accumulate: op must be one of {_ACC_OPS}, got {op!r}")
        target, v, spec = self._target("accumulate", value, target, offset)
        MPI = self._MPI
        if op == "replace":
            mop = MPI.REPLACE
        else:
            # the target cannot be widened as a collective's result is
            acc, mop = mpi_reduction(op, v.dtype, "Window.accumulate", predefined=True)
            if acc != v.dtype:
                raise TypeError(f"Window.accumulate: MPI cannot compute {op!r} on {v.dtype} in "
                                f"place (it must be combined in {acc}: Open MPI has no "
                                "low-precision floats and saturates 8- and 16-bit integer "
                                f"sums); use a window of {acc}, or op='replace'")
        with self._epoch(target, False):
            self._inflight.append(v)
            self._win.Accumulate(mpi_view(v), target, target=spec, op=mop)

    def get(self, target, offset=0, shape=None, async_op=False):
        """The values of ``target``'s buffer from element ``offset``, as an Array of ``shape``
        (default: the target's shape when ``offset`` is 0, else the rest, flattened).

        Returns:
            An Array; with ``async_op=True`` a Work whose ``wait()`` returns it (the only form
            inside a fence epoch, where the value arrives at the next ``fence()``).
        Raises:
            ValueError: ``target`` out of range; a synchronous get inside a fence epoch.
            IndexError: the range does not fit in the target's buffer.
        """
        self._check("get")
        target = peer_rank(self.group, target, "target", "Window.get")
        tshape = self._shapes[target]
        size = math.prod(tshape)
        if shape is None:
            shape = tshape if offset == 0 else (size - int(offset),)
        shape = tuple(int(s) for s in np.atleast_1d(shape)) if np.ndim(shape) else \
            (int(shape),)
        out = np.empty(shape, self._dtypes[target])
        _check_range("get", target, offset, out.size, size, tshape)
        if self._fence_open and not async_op and target not in self._locked:
            raise ValueError("Window.get: inside a fence epoch the value arrives at the next "
                             "fence(); pass async_op=True and wait() after fence(), or use "
                             "`with win.lock(target)`")
        spec = [int(offset), out.size, mpi_view(out)[1]]
        with self._epoch(target, False) as own:
            self._win.Get(mpi_view(out), target, target=spec)
            if not own and target in self._locked and not async_op:
                self._win.Flush(target)
        if not async_op:
            return wrap(out, self.weak_type)
        return self._pending_get(target, out)

    def _pending_get(self, target, out):
        mark = (self._fences, self._completed.get(target, 0))
        result = wrap(out, self.weak_type)

        def run(block):
            if (self._fences, self._completed.get(target, 0)) != mark:
                return result
            if target in self._locked:
                if block:
                    self.flush(target)
                    return result
                return _PENDING
            if not self._fence_open:   # issued in its own lock epoch: already complete
                return result
            if block:
                raise ValueError("Window.get: the value arrives at the next fence(); call "
                                 "win.fence() before wait()")
            return _PENDING
        return Work(run)

    def array(self):
        """This member's buffer as a new immutable Array (what completed accesses wrote)."""
        self._check("array")
        if self._fence_open or self.rank in self._locked:
            return wrap(self._local.copy(), self.weak_type)
        with self.lock(self.rank, exclusive=False):
            self._win.Sync()
            return wrap(self._local.copy(), self.weak_type)

    def free(self):
        """Releases the window (collective). Later calls raise ValueError."""
        if self._win is None:
            return
        self._check("free")
        win = self._win
        self._collective("window_free", win.Free, np.zeros(()))
        self._win = None
        self._local = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self._win is not None and self._broken is None:
            self.free()
        return False


def _check_range(op, target, offset, n, size, shape):
    if isinstance(offset, bool) or not isinstance(offset, (int, np.integer)) or offset < 0 \
            or offset + n > size:
        raise IndexError(f"Window.{op}: elements [{offset}, {offset} + {n}) do not fit in rank "
                         f"{target}'s buffer of shape {shape} ({size} elements)")
