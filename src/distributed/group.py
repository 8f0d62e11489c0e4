"""Process groups and the eager collectives with PyTorch's ``torch.distributed`` names.

Each process passes its own Array; results are new Arrays (Starling's arrays are immutable, so
``all_reduce(x)`` returns the reduction instead of writing into ``x``). ``async_op=True``
returns a ``Work``: ``wait()`` gives the result, ``is_completed()`` polls, ``exception()`` tells
what went wrong. Every call runs through ``failures.guarded``, or, blocking without a timeout
under Open MPI, through its native counterpart (src/distributed/native_calls.py): a dead peer
raises ``RankFailure``, a hung one ``CollectiveTimeout`` (``set_timeout`` / ``timeout=``); after
a failure the survivors call ``group.reconfigure()`` (src/distributed/elastic.py). The
collective hooks (``register_collective_hooks``, src/distributed/hooks.py) run around every
call. Blocking calls without a timeout check first that every member passes the same shape,
dtype and arguments (src/distributed/agreement.py); a member whose own arguments are invalid
(an unknown op, a dim 0 the group size does not divide, an unsupported dtype) raises its error
after taking part in that check, so the others raise a ValueError naming it instead of waiting.
A ``group=`` that is no group raises on that member only (there is no group to tell).
Calls under a timeout or ``async_op`` run MPI's nonblocking collectives, whose algorithms may
combine the members' values in another order than the blocking ones: a float sum may then
differ in its last bits from the blocking call's (every member still gets the same bits).

Groups: ``world_group()``, ``new_group(ranks)`` (processes outside ``ranks`` get
``NON_GROUP_MEMBER``), ``split_group(color, key)`` (MPI_Comm_split; ``color=None`` gives
``NON_GROUP_MEMBER``). A backend registry maps names to implementations (``register_backend``;
third-party runtimes register through the ``starling.distributed.backends`` entry point group);
``get_backend_impl(group)`` returns the one serving a group (MPI today).
"""
from __future__ import annotations

import weakref
from functools import partial

import numpy as np

from ..arrays.array import wrap
from ..arrays.convert import operand
from ..collectives.runtime.context import set_collective_timeout
from ..core import dtypes
from ..collectives.runtime.inprocess import finish_reduce
from . import arrival, flight_recorder, native_calls, runtime
from .agreement import check, header_comm, recv_checked, refuse, send_with_header
from .callspec import call_spec
from .failures import (call_mode, complete, detect_failures, guarded, keep_until_done,
                       mpi_error, poll_until, timed_out)
from .hooks import run_post, run_pre
from .mpi_types import mpi_reduction, mpi_view, result_buffer

_OPS = ("sum", "avg", "max", "min", "prod")


class _NonGroupMember:
    """Returned to processes that are not members of a new group (as PyTorch's
    ``GroupMember.NON_GROUP_MEMBER``)."""

    def __repr__(self):
        return "NON_GROUP_MEMBER"

    def __bool__(self):
        return False


NON_GROUP_MEMBER = _NonGroupMember()


class ProcessGroup:
    """A set of processes with an MPI communicator.

    Attributes:
        comm: the mpi4py communicator (errors returned, not fatal).
        ranks: the members' world ranks in group order (after a world ``reconfigure()`` the
            new numbering; a member that failed shows as None until this group is
            reconfigured too).
        name, backend, timeout: as given; ``timeout`` overrides the default of ``set_timeout``.
        uid: the job-wide id of the group (arrival board, flight recorder): ``uid`` as given
            (default ``name``), ``~n`` appended for the n-th remake (e.g. by ``reconfigure()``).
        pre_hooks, post_hooks: this group's collective hooks (``register_collective_hooks``).
    ``rank()``: this process's rank in the group; ``size()``; ``reconfigure()``: drop failed
    members (see src/distributed/elastic.py).
    """

    def __init__(self, comm, ranks=None, name="group", backend="mpi", uid=None, messages=True):
        self.comm = comm
        # the header communicator of send / recv (agreement.py), made now by every member;
        # ``messages`` False: a group that exchanges no messages (an SPMD mesh's)
        self._messages = messages
        self._header_comm = header_comm(comm) if messages else None
        self.name = name
        self.backend = backend
        self.timeout = None
        self.pre_hooks, self.post_hooks = [], []
        self._ranks = None if ranks is None else (runtime.world_epoch(), [int(r) for r in ranks])
        # the job-wide id every member computes alike; a communicator from create_group_comm
        # comes with its arrival track
        self._base_uid = name if uid is None else uid
        # (the arrival track of ``comm``: the flight recorder files the group's calls there)
        self.track = arrival.track_of(comm) or self._new_track(comm)
        self.uid = self.track.uid
        self._splits = 0
        _LIVE.add(self)

    def _new_track(self, comm):
        return arrival.attach(comm, arrival.new_track(self._base_uid, self.ranks))

    def replace_comm(self, comm):
        """Makes ``comm`` (the shrunk communicator, errors returned) this group's, in place: a
        new incarnation of the group, with its own arrival track (``uid~n``)."""
        self.comm = comm
        self._ranks = None
        self.track = self._new_track(comm)
        self.uid = self.track.uid
        if self._messages:
            with detect_failures("reconfigure", comm):
                self._header_comm = header_comm(comm)

    @property
    def ranks(self) -> list:
        epoch = runtime.world_epoch()
        if self._ranks is None or self._ranks[0] != epoch:
            self._ranks = (epoch, _world_ranks(self.comm))
        return list(self._ranks[1])

    def rank(self) -> int:
        return self.comm.Get_rank()

    def size(self) -> int:
        return self.comm.Get_size()

    def reconfigure(self):
        """Revokes this group's communicator and shrinks it to the surviving members, in place
        (ULFM ``MPI_Comm_revoke`` + ``MPI_Comm_shrink``); every surviving member calls it. For
        the world group, ``starling.devices()``, ``get_rank()`` and ``get_world_size()`` follow.

        Returns:
            The world ranks (numbered as before the call) of the members that left.
        Raises:
            RankFailure: another member failed during the shrink's own communication (call
                again).
        """
        from .elastic import reconfigure
        return reconfigure(self)

    def __repr__(self):
        return f"ProcessGroup({self.name}, ranks={self.ranks})"


# Every live group, so that a world reconfiguration can revoke them (src/distributed/elastic.py).
_LIVE = weakref.WeakSet()


def _world_ranks(comm) -> list:
    """World ranks (current numbering) of the members of ``comm``; None for failed processes no
    longer in the world."""
    MPI = runtime.mpi()
    mine, world = comm.Get_group(), runtime.world_comm().Get_group()
    try:
        out = MPI.Group.Translate_ranks(mine, list(range(mine.Get_size())), world)
    finally:
        mine.Free()
        world.Free()
    return [None if r == MPI.UNDEFINED else int(r) for r in out]


def _group(group):
    g = runtime.world_group() if group is None else group
    if g is NON_GROUP_MEMBER:
        raise ValueError("this process is not a member of the group (NON_GROUP_MEMBER)")
    if not isinstance(g, ProcessGroup):
        raise TypeError(f"group must be a ProcessGroup, got {g!r}")
    return g


def _check_seconds(op, seconds):
    """``seconds`` if it is a positive number or None; else ValueError (bools, NaN, 0 and
    negative numbers included)."""
    if seconds is not None and (isinstance(seconds, bool) or not isinstance(seconds, (int, float))
                                or not seconds > 0):
        raise ValueError(f"{op}: timeout seconds must be positive or None (a number), got "
                         f"{seconds!r}")
    return seconds


def _timeout(group, timeout):
    if timeout is not None:
        return _check_seconds("timeout", timeout)
    return group.timeout if group.timeout is not None else runtime.default_timeout()


def set_timeout(seconds, group=None):
    """Timeout (seconds; None waits forever) of the collectives of ``group``.

    A collective still waiting after it raises ``CollectiveTimeout`` naming the ranks that never
    entered it, and the flight recorder dumps every rank's history. ``timeout=`` of a single
    call overrides it.

    Args:
        seconds: a positive number, or None.
        group: a ProcessGroup (its eager collectives), a ``Mesh`` (its SPMD collectives: shard_map
            and compiled sharded programs, in-process or on MPI), or None: the default of every
            group and mesh without its own setting.
    Raises:
        ValueError: a non-positive timeout.
        TypeError: ``group`` is neither a ProcessGroup, a Mesh nor None.
    """
    _check_seconds("set_timeout", seconds)
    from ..collectives.mesh import Mesh
    if group is None:
        runtime.set_default_timeout(seconds)
    elif isinstance(group, Mesh):
        set_collective_timeout(seconds, group)
    else:
        _group(group).timeout = seconds


class Work:
    """A collective in flight (``async_op=True``). ``wait(timeout=None)`` finishes it and returns
    the result (``timeout``: seconds, else the group's; past it, CollectiveTimeout naming the
    ranks that never arrived); ``is_completed()``; ``exception()`` (None, or the error it ended
    with)."""

    def __init__(self, run, expire=None, drop=None):
        self._run = run
        self._expire = expire
        self._drop = drop   # called if the Work is dropped unfinished (its buffers kept alive)
        self._result = None
        self._error = None
        self._done = False

    def __del__(self):
        # dropped while MPI may still write its result buffer: that buffer must not return to
        # the pool (and be handed to another array) before the operation completes
        if not self._done and self._drop is not None:
            try:
                self._drop()
            except Exception:   # interpreter shutdown: MPI may be gone
                pass

    def _finish(self, block):
        if self._done:
            return True
        try:
            out = self._run(block)
        except BaseException as e:   # kept for exception() and re-raised by wait()
            self._error, self._done = e, True
            return True
        if out is _PENDING:
            return False
        self._result, self._done = out, True
        return True

    def is_completed(self) -> bool:
        return self._finish(False)

    def wait(self, timeout=None):
        _check_seconds("Work.wait", timeout)
        if timeout is None:
            self._finish(True)
        elif not poll_until(lambda: self._finish(False), timeout):
            if self._expire is not None:
                self._drop = None   # the timeout keeps the buffers alive now
                raise self._expire(timeout)
            from ..collectives.runtime.context import CollectiveTimeout
            raise CollectiveTimeout(f"Work.wait: not complete after {timeout} s")
        if self._error is not None:
            raise self._error
        return self._result

    result = wait

    def exception(self):
        self._finish(False)
        return self._error


_PENDING = object()


def _call(op, group, x, t, async_op, start, finish, blocking=None, params=None, native=None,
          **record):
    """Runs one eager collective under timeout ``t`` (``_timeout``'s: seconds or None):
    ``start()`` returns an MPI request, ``blocking()`` does the same with the blocking call
    (used when no timeout applies), ``finish()`` the result; the collective hooks run around it
    (src/distributed/hooks.py). ``params``: the op's arguments (flight recorder, agreement
    check); ``native``: ``native_calls.run``'s arguments after the input (arg, kind, send,
    out[, MPI op, root]) for the blocking call run from C++; ``record``: how a message is
    filed (``kind``, ``peer``, ``tag``)."""
    try:
        run_pre(op, group, x)
    except Exception as e:
        if not (record or async_op) and t is None:   # the calls the agreement check sees
            refuse(op, group, x, e)
        raise
    shapes, dtype = x.shape, x.dtype
    if record:   # a message: its two ends are matched by the header (agreement.py)
        guarded(op, group.comm, t, start, shapes=shapes, dtype=dtype, blocking=blocking,
                track=group.track, **record)
        return run_post(op, group, finish())
    # a rank calling it blocking would never match one calling it nonblocking: file the mode
    spec = call_spec(op, shapes, dtype, params, call_mode(t, blocking, async_op))
    if not async_op:
        if t is None and native is not None and native_calls.run(op, group, spec, x, *native):
            return run_post(op, group, finish())
        # the members' agreement is checked first (not under a timeout, nor for a Work whose
        # wait may time out: a collective given up on must stay one MPI operation, which the
        # late members still complete)
        guarded(op, group.comm, t, start, blocking=blocking, spec=spec, track=group.track,
                before=partial(check, spec, group))
        return run_post(op, group, finish())
    rec = flight_recorder.begin(op, group.comm, spec=spec, track=group.track)
    MPI = runtime.mpi()
    try:   # started (and recorded) now; Work.wait() bounds the wait by the timeout
        req = start()
    except MPI.Exception as e:
        raise mpi_error(rec, group.comm, e) from None

    def run(block):
        try:
            done = block or req.Test()
        except MPI.Exception as e:
            raise mpi_error(rec, group.comm, e) from None
        if not done:
            return _PENDING
        complete(rec, group.comm, t, req)
        return run_post(op, group, finish())
    return Work(run, lambda seconds: timed_out(rec, group.comm, seconds, req, keep=start),
                lambda: keep_until_done(req, start))


_CHECKED_DTYPES: set = set()   # dtypes of NumPy operands found valid (checked once each)


def _buf(x, op, t, async_op):
    """(weak_type, C-contiguous NumPy buffer) of operand ``x`` of a collective under timeout
    ``t``.

    A NumPy array is read in place when the operation is surely over before the caller gets
    control back (blocking, no timeout), so a large buffer is not copied first. Otherwise it
    is copied, as ``operand`` does: the caller mutating it while a Work is in flight, or while a
    timed-out collective (which MPI cannot cancel) still reads it, cannot change what is sent.
    """
    if type(x) is np.ndarray and not async_op and t is None:
        if x.dtype not in _CHECKED_DTYPES:
            try:
                dtypes.canonicalize(x.dtype)
            except TypeError as e:
                raise TypeError(f"{op}: {e}") from None
            _CHECKED_DTYPES.add(x.dtype)
        weak, b = False, x
    else:
        a = operand(x, op)
        weak, b = a.weak_type, np.asarray(a)
    return weak, (b if b.flags.c_contiguous else np.array(b, order="C"))


def all_reduce(x, op="sum", group=None, async_op=False, timeout=None):
    """The reduction of every group member's ``x`` (same shape and dtype everywhere).

    Args:
        op: "sum", "avg", "max", "min" or "prod".
    Returns:
        The result Array (or a Work when ``async_op``).
    Raises:
        ValueError: an unknown op, or another member's invalid arguments (module docstring).
        TypeError: an unsupported dtype; "max" / "min" of complex values.
        RankFailure / CollectiveTimeout: see module docstring.
    """
    g = _group(group)
    try:
        t = _timeout(g, timeout)
        _check_op("all_reduce", op)
        weak, b = _buf(x, "all_reduce", t, async_op)
        acc, mop = mpi_reduction(op, b.dtype, "all_reduce")
    except (TypeError, ValueError) as e:
        raise _invalid("all_reduce", g, x, timeout, async_op, e) from None
    out = native_calls.replay("all_reduce", g, b, op, t, async_op)
    if out is not None:
        return _reduced(out, op, g, b.dtype, weak)
    send = b.astype(acc) if acc != b.dtype else b
    out = result_buffer(send.shape, send.dtype)
    return _call("all_reduce", g, b, t, async_op,
                 lambda: g.comm.Iallreduce(mpi_view(send), mpi_view(out), op=mop),
                 lambda: _reduced(out, op, g, b.dtype, weak),
                 lambda: g.comm.Allreduce(mpi_view(send), mpi_view(out), op=mop),
                 params={"op": op}, native=(op, native_calls.ALLREDUCE, send, out, mop))


def _check_op(what, op):
    if op not in _OPS:
        raise ValueError(f"{what}: op must be one of {_OPS}, got {op!r}")


def _invalid(op, g, x, timeout, async_op, error):
    """``error``, an error in the arguments of this member's collective ``op`` (input ``x``)
    of group ``g``, to raise once the other members know: a call the agreement check sees
    (no timeout, not ``async_op``) takes part in it with the error (agreement.refuse), so
    that theirs raise a ValueError naming it instead of waiting for this member forever. An
    invalid ``timeout`` counts as the group's default (what the others' calls without one
    use)."""
    try:
        t = _timeout(g, timeout)
    except (TypeError, ValueError):
        t = _timeout(g, None)
    if t is None and not async_op:
        refuse(op, g, x, error, "invalid_arguments")
    return error


def _divisible(op, b, n):
    if b.ndim == 0 or b.shape[0] % n:
        raise ValueError(f"{op}: dim 0 of shape {b.shape} must be divisible by the group "
                         f"size {n}")


def _reduced(out, op, g, dtype, weak):
    """The Array of a reduction's result buffer ``out`` (see ``finish_reduce``)."""
    return wrap(finish_reduce(out, op, g.size() if op == "avg" else 1, dtype), weak)


def all_gather(x, group=None, async_op=False, timeout=None):
    """Every member's ``x`` (same shape everywhere), as a list of Arrays in group rank order."""
    g = _group(group)
    try:
        t = _timeout(g, timeout)
        weak, b = _buf(x, "all_gather", t, async_op)
    except (TypeError, ValueError) as e:
        raise _invalid("all_gather", g, x, timeout, async_op, e) from None
    out = native_calls.replay("all_gather", g, b, None, t, async_op)
    if out is not None:
        return [wrap(row, weak) for row in out]
    out = result_buffer((g.size(),) + b.shape, b.dtype)
    return _call("all_gather", g, b, t, async_op,
                 lambda: g.comm.Iallgather(mpi_view(b), mpi_view(out)),
                 lambda: [wrap(row, weak) for row in out],
                 lambda: g.comm.Allgather(mpi_view(b), mpi_view(out)),
                 native=(None, native_calls.ALLGATHER, b, out))


def reduce_scatter(x, op="sum", group=None, async_op=False, timeout=None):
    """Member ``r`` gets block ``r`` (along dim 0) of the reduction of everyone's ``x``; dim 0
    must be divisible by the group size (PyTorch's ``reduce_scatter_tensor``).

    Raises:
        ValueError: dim 0 not divisible, or an unknown op.
    """
    g = _group(group)
    n = g.size()
    try:
        t = _timeout(g, timeout)
        _check_op("reduce_scatter", op)
        weak, b = _buf(x, "reduce_scatter", t, async_op)
        _divisible("reduce_scatter", b, n)
        acc, mop = mpi_reduction(op, b.dtype, "reduce_scatter")
    except (TypeError, ValueError) as e:
        raise _invalid("reduce_scatter", g, x, timeout, async_op, e) from None
    out = native_calls.replay("reduce_scatter", g, b, op, t, async_op)
    if out is not None:
        return _reduced(out, op, g, b.dtype, weak)
    send = b.astype(acc) if acc != b.dtype else b
    out = result_buffer((b.shape[0] // n,) + b.shape[1:], acc)
    return _call("reduce_scatter", g, b, t, async_op,
                 lambda: g.comm.Ireduce_scatter_block(mpi_view(send), mpi_view(out), op=mop),
                 lambda: _reduced(out, op, g, b.dtype, weak),
                 lambda: g.comm.Reduce_scatter_block(mpi_view(send), mpi_view(out), op=mop),
                 params={"op": op},
                 native=(op, native_calls.REDUCE_SCATTER_BLOCK, send, out, mop))


def all_to_all(x, group=None, async_op=False, timeout=None):
    """Member ``r`` gets block ``r`` (along dim 0) of every member's ``x``, concatenated in rank
    order (``all_to_all_single``); dim 0 must be divisible by the group size."""
    g = _group(group)
    try:
        t = _timeout(g, timeout)
        weak, b = _buf(x, "all_to_all", t, async_op)
        _divisible("all_to_all", b, g.size())
    except (TypeError, ValueError) as e:
        raise _invalid("all_to_all", g, x, timeout, async_op, e) from None
    out = native_calls.replay("all_to_all", g, b, None, t, async_op)
    if out is not None:
        return wrap(out, weak)
    out = result_buffer(b.shape, b.dtype)
    return _call("all_to_all", g, b, t, async_op,
                 lambda: g.comm.Ialltoall(mpi_view(b), mpi_view(out)),
                 lambda: wrap(out, weak),
                 lambda: g.comm.Alltoall(mpi_view(b), mpi_view(out)),
                 native=(None, native_calls.ALLTOALL, b, out))


def broadcast(x, src=0, group=None, async_op=False, timeout=None):
    """Member ``src``'s ``x`` on every member (others pass an array of the same shape/dtype).

    Raises:
        ValueError: ``src`` is not a rank of the group (an int in ``[0, size)``).
    """
    g = _group(group)
    try:
        t = _timeout(g, timeout)
        src = peer_rank(g, src, "src", "broadcast")
        weak, b = _buf(x, "broadcast", t, async_op)
    except (TypeError, ValueError) as e:
        raise _invalid("broadcast", g, x, timeout, async_op, e) from None
    out = native_calls.replay("broadcast", g, b, src, t, async_op)
    if out is not None:
        return wrap(out, weak)
    out = b.copy()
    return _call("broadcast", g, b, t, async_op,
                 lambda: g.comm.Ibcast(mpi_view(out), root=src),
                 lambda: wrap(out, weak),
                 lambda: g.comm.Bcast(mpi_view(out), root=src),
                 params={"src": src}, native=(src, native_calls.BCAST, b, out, None, src))


def peer_rank(g, rank, what, op, other=False):
    """``rank`` checked as a member of ``g`` (the peer of a message).

    Args:
        other: the peer must be another process (point-to-point messages: a message to itself
            would complete only while MPI buffers it and deadlock beyond, as torch refuses it).
    Raises:
        ValueError: not an int in ``[0, g.size())``, or (``other``) the caller's own rank.
    """
    if isinstance(rank, bool) or not isinstance(rank, (int, np.integer)) \
            or not 0 <= rank < g.size():
        raise ValueError(f"{op}: {what} must be a rank of the group in [0, {g.size()}), "
                         f"got {rank!r}")
    if other and int(rank) == g.rank():
        raise ValueError(f"{op}: {what} {int(rank)} is this process's own rank; a message "
                         "must go to another member of the group")
    return int(rank)


def send(x, dst, group=None, tag=0, timeout=None):
    """Sends ``x`` to member ``dst`` (blocks until the message is handed to MPI). A small
    message to a peer that just died may still complete (MPI buffered it); the failure then
    shows in the next operation involving that peer.

    Raises:
        ValueError: ``dst`` is not a rank of the group, or is the caller's own.
    """
    g = _group(group)
    dst = peer_rank(g, dst, "dst", "send", other=True)
    t = _timeout(g, timeout)
    weak, b = _buf(x, "send", t, False)
    _call("send", g, b, t, False,
          lambda: send_with_header(g, b, dst, tag,
                                   lambda: g.comm.Isend(mpi_view(b), dest=dst, tag=tag)),
          lambda: None, kind="send", peer=dst, tag=tag)


def recv(like, src, group=None, tag=0, timeout=None):
    """Receives an array shaped like ``like`` (an Array, or ``(shape, dtype)``) from ``src``.

    Raises:
        ValueError: ``src`` is not a rank of the group, or is the caller's own.
    """
    g = _group(group)
    src = peer_rank(g, src, "src", "recv", other=True)
    if isinstance(like, tuple):
        shape, dtype = like
        out = np.empty(shape, dtype)
    else:
        out = np.empty_like(np.asarray(operand(like, "recv")))
    _call("recv", g, out, _timeout(g, timeout), False,
          lambda: recv_checked(g, out, src, tag,
                               lambda: g.comm.Irecv(mpi_view(out), source=src, tag=tag)),
          lambda: None, kind="recv", peer=src, tag=tag)
    return wrap(out)


def barrier(group=None, timeout=None):
    """Waits until every member arrives.

    Raises:
        ValueError: another member called a different collective at this point (checked as
            every collective is: without a timeout).
    """
    g = _group(group)
    x = np.zeros(())
    try:
        t = _timeout(g, timeout)
    except (TypeError, ValueError) as e:
        raise _invalid("barrier", g, x, timeout, False, e) from None
    # without a timeout the agreement check runs first, and its all-reduce completes on no
    # member before every member entered it: that check is the barrier (a separate
    # MPI_Barrier would only repeat it; skipping the check let a barrier on one rank and an
    # all_reduce on another wait for each other forever)
    _call("barrier", g, x, t, False, lambda: g.comm.Ibarrier(), lambda: None, lambda: None)


_NEW_GROUPS = [0]


def new_group(ranks, timeout=None):
    """A group of the given world ranks. Every process calls it, in the same order as its other
    ``new_group`` calls (as in PyTorch); non-members get ``NON_GROUP_MEMBER``.

    Args:
        ranks: distinct world ranks, in group order.
        timeout: the group's default collective timeout (also bounds its creation).
    Raises:
        ValueError: duplicate or out-of-range ranks.
        CollectiveTimeout: a member did not come to create it within the timeout.
    """
    ranks = [int(r) for r in ranks]
    world = runtime.world_comm()
    if len(set(ranks)) != len(ranks) or any(not 0 <= r < world.Get_size() for r in ranks):
        raise ValueError(f"new_group: ranks must be distinct world ranks in "
                         f"[0, {world.Get_size()}), got {ranks}")
    uid = f"new_group{_NEW_GROUPS[0]}{ranks}"
    _NEW_GROUPS[0] += 1
    if runtime.get_rank() not in ranks:
        return NON_GROUP_MEMBER
    from .mpi_comm import create_group_comm
    t = timeout if timeout is not None else runtime.default_timeout()
    comm = create_group_comm(ranks, uid, t)
    g = ProcessGroup(comm, ranks, name=f"group{ranks}", uid=uid)
    g.timeout = timeout
    return g


def split_group(color, key=None, group=None):
    """Splits ``group`` (default: world) by ``color`` (MPI_Comm_split, collective over the
    group): members with equal colors form a new group ordered by ``key`` (default: rank);
    ``color=None`` gives ``NON_GROUP_MEMBER``."""
    g = _group(group)
    MPI = runtime.mpi()
    c = MPI.UNDEFINED if color is None else int(color)
    g._splits += 1
    with detect_failures("split_group", g.comm):
        comm = g.comm.Split(c, g.rank() if key is None else int(key))
    if comm == MPI.COMM_NULL:
        return NON_GROUP_MEMBER
    comm.Set_errhandler(MPI.ERRORS_RETURN)
    ranks = _world_ranks(comm)
    return ProcessGroup(comm, ranks, name=f"split{color}",
                        uid=f"{g.uid}/split{g._splits}[{color}]{ranks}")


# ---- backends ------------------------------------------------------------------------------------

_BACKENDS = {}


class MPIBackend:
    """The MPI implementation (mpi4py + Open MPI) serving groups and multi-process meshes."""

    name = "mpi"

    def comm_for_mesh(self, mesh, timeout=None):
        from .mpi_comm import MPIComm
        return MPIComm(mesh, timeout)


def register_backend(name, factory):
    """Makes a runtime available under ``name`` (``factory()`` returns the backend object)."""
    _BACKENDS[name] = factory


def _load_entry_points():
    from importlib.metadata import entry_points
    for ep in entry_points(group="starling.distributed.backends"):
        if ep.name not in _BACKENDS:
            _BACKENDS[ep.name] = ep.load()


def get_backend_impl(group=None):
    """The backend object serving ``group`` (default: world).

    Raises:
        ValueError: the group's backend is not registered.
    """
    g = _group(group)
    if g.backend not in _BACKENDS:
        _load_entry_points()
    try:
        return _BACKENDS[g.backend]()
    except KeyError:
        raise ValueError(f"get_backend_impl: no backend {g.backend!r}; registered: "
                         f"{sorted(_BACKENDS)}") from None


register_backend("mpi", MPIBackend)
