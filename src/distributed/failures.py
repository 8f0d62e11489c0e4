"""Failures of collectives across processes: dead peers and timeouts are errors, never hangs.

Every MPI collective is started nonblocking and polled (``guarded``): completion returns; an
MPI error reporting a failed process (ULFM: ERR_PROC_FAILED, ERR_REVOKED) raises
``RankFailure(failed_ranks=...)``; a deadline passing raises ``CollectiveTimeout``. Both are
recorded by the flight recorder (src/distributed/flight_recorder.py) first. Blocking MPI calls
(communicator creation, splits, shrinks) run inside ``detect_failures``, which turns the same
MPI errors into ``RankFailure``.

A failure revokes the communicator it was seen on (ULFM's ``MPI_Comm_revoke``): peers blocked in
an operation on it, even one that does not involve the dead process (a point-to-point exchange
with a survivor that has moved on), get ``RankFailure`` too instead of waiting forever. Recovery
is ``group.reconfigure()`` (src/distributed/elastic.py). Failures are only reported, rather than
killing the whole job, when the job runs with ULFM (``python -m starling.launch
--fault-tolerant``, i.e. ``mpirun --with-ft ulfm``).
"""
from __future__ import annotations

import contextlib
import time

from ..collectives.runtime.context import CollectiveError, CollectiveTimeout
from . import runtime


class RankFailure(CollectiveError):
    """A peer process died, or stopped answering: with the heartbeat detector
    (``python -m starling.launch --detector-timeout S``) a process silent for S seconds counts as
    failed. ``failed_ranks``: their world ranks, numbered as before any recovery from this
    failure (empty when this process saw only a revoked communicator and the runtime had not yet
    said who died). Recover with ``group.reconfigure()`` on every survivor."""

    def __init__(self, message, failed_ranks=()):
        super().__init__(message)
        self.failed_ranks = tuple(failed_ranks)


def _ulfm_codes(MPI):
    return {getattr(MPI, n) for n in ("ERR_PROC_FAILED", "ERR_REVOKED", "ERR_PROC_FAILED_PENDING")
            if hasattr(MPI, n)}


def is_rank_failure(MPI, exc) -> bool:
    """True when the MPI exception ``exc`` reports a failed process or a revoked communicator."""
    return isinstance(exc, MPI.Exception) and exc.Get_error_class() in _ulfm_codes(MPI)


def failed_ranks(comm, wait=0.0):
    """World ranks (current numbering) of the processes of ``comm`` this process knows to have
    failed (ULFM ``MPI_Comm_get_failed``), or ().

    Args:
        wait: seconds to keep asking while the answer is empty: a process that saw only a revoked
            communicator learns which peer died a moment later, from the runtime. The wait ends
            early once the job has a failure this process did not know of at the last world
            reconfiguration but ``comm`` has none (``comm`` was revoked to pass the news on).
    """
    MPI = runtime.mpi()
    deadline = time.monotonic() + wait
    while True:
        try:
            group = comm.Get_failed()
        except (AttributeError, NotImplementedError, MPI.Exception):
            return ()
        n = group.Get_size()
        if n or time.monotonic() >= deadline or \
                runtime.job_failure_count() > runtime.known_failure_count():
            break
        group.Free()
        MPI.COMM_SELF.Iprobe(source=MPI.ANY_SOURCE, tag=MPI.ANY_TAG)   # news arrive by progress
        time.sleep(0.01)
    if n == 0:
        group.Free()
        return ()
    world = runtime.world_comm().Get_group()
    ranks = MPI.Group.Translate_ranks(group, list(range(n)), world)
    group.Free()
    world.Free()
    return tuple(int(r) for r in ranks if r != MPI.UNDEFINED)


def rank_failure(op, comm, exc):
    """The RankFailure for the ULFM error ``exc`` seen by ``op`` on ``comm``; revokes ``comm`` so
    that every peer's pending and future operations on it fail too (see module docstring)."""
    MPI = runtime.mpi()
    revoked = exc.Get_error_class() == MPI.ERR_REVOKED
    try:
        comm.Revoke()
    except MPI.Exception:   # already revoked
        pass
    ranks = failed_ranks(comm, wait=10.0 if revoked else 0.0)
    how = "the communicator was revoked by a peer" if revoked and not ranks else \
        "a peer process failed"
    return RankFailure(f"{op}: {how} (failed world ranks {list(ranks) or 'unknown'}); call "
                       "group.reconfigure() on every survivor to continue without them", ranks)


@contextlib.contextmanager
def detect_failures(op, comm):
    """Runs a blocking MPI call on ``comm``; ULFM errors become ``RankFailure``.

    Raises:
        RankFailure: a member of ``comm`` failed, or ``comm`` was revoked.
    """
    MPI = runtime.mpi()
    try:
        yield
    except MPI.Exception as e:
        if is_rank_failure(MPI, e):
            raise rank_failure(op, comm, e) from None
        raise


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
        if is_rank_failure(MPI, e):
            err = rank_failure(op, comm, e)
            fr.record_end(entry, "failed", err)
            raise err from None
        fr.record_end(entry, "error", e)
        raise
    fr.record_end(entry, "completed")
