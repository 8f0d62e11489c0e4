"""Failures of collectives across processes: dead peers and timeouts are errors, never hangs.

Every MPI collective is started nonblocking and polled (``guarded``): completion returns; an
MPI error reporting a failed process (ULFM: ERR_PROC_FAILED, ERR_REVOKED) raises
``RankFailure(failed_ranks=...)``; a deadline passing raises ``CollectiveTimeout`` naming the
ranks that never entered the collective (read one-sidedly from the arrival board,
src/distributed/arrival.py). Both are recorded by the flight recorder
(src/distributed/flight_recorder.py), which dumps every rank's history.

A timed-out collective cannot be cancelled (MPI has no cancel for collectives): its request
and buffers are kept until it completes, which it does if the late ranks arrive; the group
stays usable as long as every rank eventually makes the same sequence of calls.
"""
from __future__ import annotations

import time

from ..collectives.runtime.context import CollectiveError, CollectiveTimeout
from . import flight_recorder as fr
from . import runtime


class RankFailure(CollectiveError):
    """A peer process died or became unreachable; ``failed_ranks`` lists their world ranks
    (as far as MPI could tell). Recover with ``group.reconfigure()``."""

    def __init__(self, message, failed_ranks=()):
        super().__init__(message)
        self.failed_ranks = tuple(failed_ranks)


def _ulfm_codes(MPI):
    return {getattr(MPI, n) for n in ("ERR_PROC_FAILED", "ERR_REVOKED", "ERR_PROC_FAILED_PENDING")
            if hasattr(MPI, n)}


def failed_ranks(comm):
    """World ranks of the processes of ``comm`` known to have failed (ULFM), or ()."""
    MPI = runtime.mpi()
    try:
        comm.Failure_ack()
        group = comm.Failure_get_acked()
    except (AttributeError, NotImplementedError, MPI.Exception):
        try:
            group = comm.Get_failed()
        except (AttributeError, NotImplementedError, MPI.Exception):
            return ()
    n = group.Get_size()
    if n == 0:
        group.Free()
        return ()
    world = runtime.world_comm().Get_group()
    ranks = MPI.Group.Translate_ranks(group, list(range(n)), world)
    group.Free()
    world.Free()
    return tuple(int(r) for r in ranks)


_ABANDONED: list = []   # requests given up on by a timeout: kept (with their buffers) until done


def _reap():
    """Drops abandoned requests that have completed since (a late peer arrived)."""
    if not _ABANDONED:
        return
    keep = []
    for req in _ABANDONED:
        try:
            if not req.Test():
                keep.append(req)
        except Exception:   # it failed after all: nothing more to wait for
            pass
    _ABANDONED[:] = keep


def guarded(op, comm, timeout, start, shapes=(), dtype=None, poll=1e-4, blocking=None,
            **record):
    """Runs an MPI operation to completion: ``blocking()`` (the blocking call: Open MPI's tuned
    blocking collectives are faster than its nonblocking ones) when there is no timeout and it
    is given, else the nonblocking ``start()`` (returning a request) polled against the deadline.
    ULFM makes a blocking call fail rather than hang when a peer dies.

    MPI never matches a blocking collective with a nonblocking one, so every rank must give a
    collective the same timeout setting (all None, or all set): the flight recorder files the
    mode in the op's params, so a rank that differs shows up as a mismatch.

    ``record``: how the flight recorder files it (``flight_recorder.begin``: ``kind``
    "collective" / "send" / "recv", ``peer``, ``tag``, ``params``, ``track``, ``seq``).

    Raises:
        RankFailure: MPI reports a failed or revoked peer.
        CollectiveTimeout: not complete after ``timeout`` seconds; ``missing`` names the world
            ranks that never entered the collective (for a message: the peer).
    """
    if blocking is not None:
        mode = "blocking" if timeout is None else "nonblocking"
        record["params"] = dict(record.get("params") or {}, mode=mode)
    rec = fr.begin(op, comm, shapes, dtype, **record)
    return complete(rec, comm, timeout, start, poll, blocking)


def complete(rec, comm, timeout, start, poll=1e-4, blocking=None):
    """Starts (``start()``, or a request already started) and finishes the operation recorded
    as ``rec`` (see ``guarded``)."""
    MPI = runtime.mpi()
    _reap()
    try:
        if timeout is None and blocking is not None:
            blocking()
        elif timeout is None:
            (start() if callable(start) else start).Wait()
        else:
            req = start() if callable(start) else start
            deadline = time.monotonic() + timeout
            delay = poll
            while not req.Test():
                if time.monotonic() > deadline:
                    raise timed_out(rec, comm, timeout, req)
                time.sleep(delay)
                delay = min(delay * 2, 5e-3)
    except MPI.Exception as e:
        if e.Get_error_class() in _ulfm_codes(MPI):
            ranks = failed_ranks(comm)
            err = RankFailure(f"{rec.op}: a peer process failed (ranks "
                              f"{list(ranks) or 'unknown'}); call group.reconfigure() to "
                              "continue with the survivors", ranks)
            fr.end(rec, "failed", err)
            raise err from None
        fr.end(rec, "error", e)
        raise
    fr.end(rec, "completed")


def timed_out(rec, comm, timeout, req):
    """The CollectiveTimeout of ``rec`` (request ``req`` abandoned, the ring dumped)."""
    if rec.kind == "recv":
        try:   # an abandoned receive would swallow a later message meant for another call
            req.Cancel()
        except Exception:
            pass
    _ABANDONED.append(req)   # MPI may still write into its buffers: keep them alive
    missing, different, unknown = fr.arrival_status(rec)
    what = ("collective" if rec.kind == "collective" else "message") + f" #{rec.seq}"
    parts = [f"{rec.op}: timed out after {timeout} s ({what} of group {rec.track.uid}, "
             f"world ranks {rec.track.members})"]
    if missing:
        parts.append(f"ranks that did not arrive: {missing}")
    elif not unknown:
        parts.append("every rank arrived, but the operation did not complete")
    if different:
        parts.append(f"ranks that entered it with other arguments (op, shape, dtype): "
                     f"{different}")
    if unknown:
        parts.append(f"ranks whose arrival could not be read: {unknown}")
    parts.append(f"flight recorder dumps: {fr.dump_dir()} (compare them with python -m "
                 "starling.distributed.flight_recorder)")
    err = CollectiveTimeout("; ".join(parts), missing)
    err.mismatched = tuple(different)
    fr.end(rec, "timeout", err)
    return err
