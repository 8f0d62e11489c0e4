"""Ending a job on purpose, with callbacks that run first.

``on_abort(fn)`` registers ``fn(reason)`` (returns a handle with ``remove()``);
``abort(reason, errorcode)`` runs the callbacks, most recent first, then ends every process of
the job (``MPI_Abort`` on the world communicator; without
``starling.distributed`` only this process). Callbacks are where a job saves what it can before
it goes: dump the flight recorder, flush logs, write an emergency checkpoint of local state. An
exception in one callback is printed and the others still run.

After ``initialize()``, an uncaught exception in a job of several processes no longer leaves
the other processes waiting forever in their next collective: Python's ``sys.excepthook`` prints
the traceback, runs the callbacks with the exception as the reason, then

* in a fault-tolerant job (ULFM, ``python -m starling.launch --fault-tolerant``) ends only this
  process, with exit status 0 and the reason on stderr: the survivors get ``RankFailure`` and
  may ``reconfigure()``. (Open MPI 5.0's runtime takes a non-zero exit without MPI_Finalize for
  the end of the whole job, even under ULFM, and its abort hung: the survivors never saw the
  failure);
* otherwise aborts the whole job with exit code 1.

Callbacks run in the process that aborts; the other processes are ended by the MPI runtime
without running theirs.
"""
from __future__ import annotations

import os
import sys
import traceback

_CALLBACKS: list = []


class AbortHandle:
    """What ``on_abort`` returns: ``remove()`` unregisters the callback."""

    def __init__(self, fn):
        self.fn = fn

    def remove(self) -> None:
        for i, f in enumerate(_CALLBACKS):
            if f is self.fn:
                del _CALLBACKS[i]
                break


def on_abort(fn):
    """Registers ``fn(reason: str)`` to run before this process aborts the job (see module
    docstring).

    Returns:
        An AbortHandle (``remove()`` unregisters ``fn``).
    Raises:
        TypeError: ``fn`` is not callable.
    """
    if not callable(fn):
        raise TypeError(f"on_abort: expected a callable taking the reason (str), got {fn!r}")
    _CALLBACKS.append(fn)
    return AbortHandle(fn)


def run_callbacks(reason: str) -> None:
    """Runs the registered callbacks, most recent first; one that raises is reported on stderr
    and the next still runs. Each runs at most once per process."""
    while _CALLBACKS:
        fn = _CALLBACKS.pop()
        try:
            fn(reason)
        except BaseException:   # one broken callback must not stop the others or the abort
            print(f"starling.distributed: an on_abort callback ({fn!r}) raised:",
                  file=sys.stderr)
            traceback.print_exc()


def abort(reason: str = "", errorcode: int = 1):
    """Ends the whole job: runs the ``on_abort`` callbacks, then ``MPI_Abort(errorcode)`` on the
    world communicator (without ``starling.distributed``: exits this process).

    Args:
        reason: passed to the callbacks and printed on stderr.
        errorcode: the job's exit code (mpirun returns it), 0..255.
    Raises:
        ValueError: errorcode outside 0..255.
    """
    if not isinstance(errorcode, int) or not 0 <= errorcode <= 255:
        raise ValueError(f"abort: errorcode must be an int in [0, 255], got {errorcode!r}")
    from . import runtime
    print(f"starling.distributed.abort (rank {runtime.get_rank()}): {reason}", file=sys.stderr,
          flush=True)
    run_callbacks(reason)
    _flush()
    if runtime.is_initialized():
        runtime.mpi().COMM_WORLD.Abort(errorcode)
    os._exit(errorcode)


def _flush():
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:   # a closed stream: nothing left to flush
            pass


_PREVIOUS = [None]


def _excepthook(etype, value, tb):
    from . import runtime
    previous = _PREVIOUS[0] or sys.__excepthook__
    previous(etype, value, tb)
    if not runtime.is_initialized() or runtime.get_world_size() < 2 or \
            issubclass(etype, KeyboardInterrupt):
        return
    reason = f"uncaught {etype.__name__}: {value}"
    if runtime.fault_tolerant():
        print(f"starling.distributed: rank {runtime.get_rank()} leaves the job ({reason}); the "
              "other processes see RankFailure", file=sys.stderr)
        run_callbacks(reason)
        _flush()
        os._exit(0)   # a non-zero status makes Open MPI end (and hang) the whole job
    abort(reason, 1)


def install_excepthook() -> None:
    """Makes uncaught exceptions end the job (see module docstring); called by
    ``initialize()``. Installing twice keeps one hook."""
    if sys.excepthook is not _excepthook:
        _PREVIOUS[0] = sys.excepthook
        sys.excepthook = _excepthook
