"""Failures of collectives across processes: dead peers and timeouts are errors, never hangs.

Every MPI collective is started nonblocking and polled (``guarded``): completion returns; an
MPI error reporting a failed process (ULFM: ERR_PROC_FAILED, ERR_REVOKED) raises
``RankFailure(failed_ranks=...)``; a deadline passing raises ``CollectiveTimeout``. Both are
recorded by the flight recorder (src/distributed/flight_recorder.py) first.
"""
from __future__ import annotations

import time

from ..collectives.runtime.context import CollectiveError, CollectiveTimeout
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


def guarded(op, comm, timeout, start, shapes=(), dtype=None, poll=1e-4, blocking=None):
    """Runs an MPI operation to completion: ``blocking()`` (the blocking call: Open MPI's tuned
    blocking collectives are faster than its nonblocking ones) when there is no timeout and it
    is given, else the nonblocking ``start()`` (returning a request) polled against the deadline.
    ULFM makes a blocking call fail rather than hang when a peer dies.

    Raises:
        RankFailure: MPI reports a failed or revoked peer.
        CollectiveTimeout: not complete after ``timeout`` seconds.
    """
    MPI = runtime.mpi()
    from . import flight_recorder as fr
    entry = fr.record_start(op, comm, shapes, dtype)
    try:
        if timeout is None and blocking is not None:
            blocking()
        elif timeout is None:
            start().Wait()
        else:
            req = start()
            deadline = time.monotonic() + timeout
            delay = poll
            while not req.Test():
                if time.monotonic() > deadline:
                    req.Cancel()
                    missing = fr.missing_ranks(comm, entry)
                    err = CollectiveTimeout(
                        f"{op}: timed out after {timeout} s in a group of {comm.Get_size()} "
                        f"processes; ranks that did not arrive: {list(missing) or 'unknown'}",
                        missing)
                    fr.record_end(entry, "timeout", err)
                    raise err
                time.sleep(delay)
                delay = min(delay * 2, 5e-3)
    except MPI.Exception as e:
        if e.Get_error_class() in _ulfm_codes(MPI):
            ranks = failed_ranks(comm)
            err = RankFailure(f"{op}: a peer process failed (ranks {list(ranks) or 'unknown'}); "
                              "call group.reconfigure() to continue with the survivors", ranks)
            fr.record_end(entry, "failed", err)
            raise err from None
        fr.record_end(entry, "error", e)
        raise
    fr.record_end(entry, "completed")
