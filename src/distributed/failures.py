"""Failures of collectives across processes: dead peers and timeouts are errors, never hangs.

Every MPI collective is started nonblocking and polled (``guarded``): completion returns; an
MPI error reporting a failed process (ULFM: ERR_PROC_FAILED, ERR_REVOKED) raises
``RankFailure(failed_ranks=...)``; a deadline passing raises ``CollectiveTimeout`` naming the
ranks that never entered the collective (read one-sidedly from the arrival board,
src/distributed/arrival.py). Both are recorded by the flight recorder
(src/distributed/flight_recorder.py), which dumps every rank's history. Blocking MPI calls
(splits, shrinks) run inside ``detect_failures``, which turns the same MPI errors into
``RankFailure``.

A failure revokes the communicator it was seen on (ULFM's ``MPI_Comm_revoke``): peers blocked in
an operation on it, even one that does not involve the dead process (a point-to-point exchange
with a survivor that has moved on), get ``RankFailure`` too instead of waiting forever. Recovery
is ``group.reconfigure()`` (src/distributed/elastic.py). Failures are only reported, rather than
killing the whole job, when the job runs with ULFM (``python -m starling.launch
--fault-tolerant``, i.e. ``mpirun --with-ft ulfm``).

A timed-out collective cannot be cancelled (MPI has no cancel for collectives): its request
and buffers are kept until it completes, which it does if the late ranks arrive; the group
stays usable as long as every rank eventually makes the same sequence of calls.
"""
from __future__ import annotations

import atexit
import contextlib
import threading
import time

from ..collectives.runtime.context import CollectiveError, CollectiveTimeout
from . import flight_recorder as fr
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


_SPIN = 1e-3        # seconds of continuous Test calls before a timed wait starts to sleep
_MAX_SLEEP = 5e-3   # the longest sleep between two Test calls (bounds the delay to notice)
# (request, what holds its buffers) given up on by a timeout: kept until done, since MPI still
# reads and writes the buffers (an mpi4py request does not hold them: freed, they would be
# reused for other arrays and overwritten when a late peer arrives)
_ABANDONED: list = []


_REAP_LOCK = threading.Lock()
_PROGRESS = []   # the progress thread, once started
_STOP = threading.Event()
_STOP_REGISTERED = []


def _stop_progress():
    """At exit: no MPI call from the progress thread may run into MPI_Finalize (registered when
    the first thread starts, after MPI was imported, so it runs before mpi4py's exit handler)."""
    _STOP.set()
    for t in list(_PROGRESS):
        t.join(timeout=1.0)


def _reap():
    """Drops abandoned requests (and the buffers kept with them) that have completed since (a
    late peer arrived)."""
    if not _ABANDONED:
        return
    with _REAP_LOCK:
        keep = []
        for item in _ABANDONED:
            try:
                if not item[0].Test():
                    keep.append(item)
            except Exception:   # it failed after all: nothing more to wait for
                pass
        _ABANDONED[:] = keep


def _progress():
    """Tests the abandoned requests while there are any: MPI progresses an operation only inside
    MPI calls, so without this a late peer could wait (and time out) until this process happened
    to call MPI again. MPI runs with THREAD_MULTIPLE (runtime.py). Sleeps grow to 0.1 s; the
    thread stops at interpreter exit before MPI is finalized (``_stop_progress``)."""
    delay = 1e-3
    while not _STOP.is_set():
        _STOP.wait(delay)
        if _STOP.is_set():
            break
        _reap()
        delay = min(delay * 2, 0.1) if _ABANDONED else 1e-3
        if not _ABANDONED:
            with _REAP_LOCK:
                if not _ABANDONED:
                    _PROGRESS.clear()
                    return
    with _REAP_LOCK:
        _PROGRESS.clear()


def keep_until_done(req, keep):
    """Request ``req`` is given up on (timed out, or its Work dropped) while MPI may still read
    and write its buffers: keeps ``keep`` (what references them) alive, and the request
    progressed by a helper thread, until it completes."""
    with _REAP_LOCK:
        _ABANDONED.append((req, keep))
        if not _PROGRESS and not _STOP.is_set():
            if not _STOP_REGISTERED:
                atexit.register(_stop_progress)
                _STOP_REGISTERED.append(True)
            t = threading.Thread(target=_progress, name="starling-mpi-progress", daemon=True)
            _PROGRESS.append(t)
            t.start()


def poll_until(test, timeout, poll=1e-4) -> bool:
    """Calls ``test()`` until it returns True (then True) or ``timeout`` seconds pass (False).

    MPI progresses a nonblocking operation only inside MPI calls, so ``test`` runs without pause
    for the first millisecond (most operations end there); after that the caller sleeps a
    sixteenth of the time waited so far between tests (at least ``poll``, at most 5 ms): a late
    peer costs little CPU and a long transfer at most about 6% more time. (Doubling sleeps from
    the start made a 4 MiB all_reduce under a timeout five times slower.)
    """
    began = time.monotonic()
    while not test():
        waited = time.monotonic() - began
        if waited > timeout:
            return False
        if waited > _SPIN:
            time.sleep(min(max(poll, waited / 16), _MAX_SLEEP))
    return True


def guarded(op, comm, timeout, start, shapes=(), dtype=None, poll=1e-4, blocking=None,
            spec=None, before=None, **record):
    """Runs an MPI operation to completion: ``blocking()`` (the blocking call: Open MPI's tuned
    blocking collectives are faster than its nonblocking ones) when there is no timeout and it
    is given, else the nonblocking ``start()`` (returning a request) polled against the deadline.
    ULFM makes a blocking call fail rather than hang when a peer dies.

    MPI never matches a blocking collective with a nonblocking one, so every rank must give a
    collective the same timeout setting (all None, or all set): the flight recorder files the
    mode in the op's params, so a rank that differs shows up as a mismatch.

    ``record``: how the flight recorder files it (``flight_recorder.begin``: ``kind``
    "collective" / "send" / "recv", ``peer``, ``tag``, ``params``, ``track``, ``seq``);
    ``spec``: a collective's CallSpec with the mode in its params (``call_spec(..., mode=
    call_mode(timeout, blocking))``), when the caller has made it; ``before()``: run first
    when there is no timeout (the agreement check, src/distributed/agreement.py).

    Raises:
        RankFailure: MPI reports a failed or revoked peer.
        CollectiveTimeout: not complete after ``timeout`` seconds; ``missing`` names the world
            ranks that never entered the collective (for a message: the peer).
    """
    if spec is None and blocking is not None:
        record["params"] = dict(record.get("params") or {}, mode=call_mode(timeout, blocking))
    rec = fr.begin(op, comm, shapes, dtype, spec=spec, **record)
    return complete(rec, comm, timeout, start, poll, blocking, before)


def call_mode(timeout, blocking, async_op=False):
    """How an operation with the blocking form ``blocking`` (or None) runs under ``timeout``:
    "blocking", "nonblocking" (it has both forms: which one the flight recorder files; an
    ``async_op`` always runs nonblocking) or None (it has only the nonblocking one)."""
    if blocking is None:
        return None
    return "blocking" if timeout is None and not async_op else "nonblocking"


def complete(rec, comm, timeout, start, poll=1e-4, blocking=None, before=None):
    """Starts (``start()``, or a request already started) and finishes the operation recorded
    as ``rec`` (see ``guarded``)."""
    if _ABANDONED:
        _reap()
    if timeout is None:
        return _run(rec, comm, before, blocking if blocking is not None else
                    lambda: (start() if callable(start) else start).Wait())
    MPI = runtime.mpi()
    try:
        req = start() if callable(start) else start
        done = poll_until(req.Test, timeout, poll)
    except MPI.Exception as e:
        raise mpi_error(rec, comm, e) from None
    except Exception as e:   # a request chain's own error
        fr.end(rec, "error", e)
        raise
    if not done:
        raise timed_out(rec, comm, timeout, req, keep=start)
    fr.end(rec, "completed")


def _run(rec, comm, before, run):
    """``before()`` (or None) then ``run()``, with no timeout: the path of every blocking eager
    collective (a training loop's gradient all-reduce), kept short: after a transfer of a few
    MiB its bookkeeping runs with cold caches and each Python call on it costs several times
    what it costs in a tight loop (a 1 MiB all_gather on two ranks takes ~190 us in MPI)."""
    try:
        if before is not None:
            before()
        run()
    except Exception as e:
        if isinstance(e, runtime.mpi().Exception):
            raise mpi_error(rec, comm, e) from None
        fr.end(rec, "error", e)   # the agreement check's ValueError, a request chain's error
        raise
    fr.end(rec, "completed")


def mpi_error(rec, comm, exc):
    """What to raise for the MPI exception ``exc`` of the operation recorded as ``rec`` on
    ``comm`` (recorded as its end): a RankFailure for a ULFM error (``comm`` revoked, see
    ``rank_failure``), else ``exc`` itself."""
    MPI = runtime.mpi()
    if is_rank_failure(MPI, exc):
        err = rank_failure(rec.op, comm, exc)
        fr.end(rec, "failed", err)
        return err
    fr.end(rec, "error", exc)
    return exc


def timed_out(rec, comm, timeout, req, keep=None):
    """The CollectiveTimeout of ``rec`` (request ``req`` abandoned, the ring dumped). ``keep``:
    what references the operation's buffers (the function that started it), kept alive with
    the request until it completes."""
    if rec.kind == "recv":
        try:   # an abandoned receive would swallow a later message meant for another call
            req.Cancel()
        except Exception:
            pass
    keep_until_done(req, keep)   # MPI may still use its buffers
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
    note = fr.dumps_note()
    parts.append(note + (" (compare them with python -m starling.distributed.flight_recorder)"
                         if note.startswith("flight recorder dumps") else ""))
    err = CollectiveTimeout("; ".join(parts), missing)
    err.mismatched = tuple(different)
    fr.end(rec, "timeout", err)
    return err
