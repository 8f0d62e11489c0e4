"""Request-like objects (``Test`` / ``Wait`` / ``Cancel``, as an ``MPI.Request``) for operations
that are more than one MPI request, so ``failures.guarded`` can bound them all with a timeout:

* ``Requests``: several requests finished together (a ppermute's sends and receives);
* ``Chain``: steps started one after another, each when the previous completed (a size
  exchange, then the payload sized by it);
* ``InThread``: a blocking MPI call with no nonblocking form (``Create_group``,
  ``Win.Allocate``, ``Win.Fence``) run in a helper thread (MPI is initialized with
  THREAD_MULTIPLE), so the caller can give up on it at a deadline;
* ``ProbeRecv``: receives a message of unknown size (probe, then a matched receive).
"""
from __future__ import annotations

import threading

import numpy as np

from . import runtime


class Requests:
    """Several MPI requests waited on as one."""

    def __init__(self, reqs):
        self.reqs = list(reqs)

    def Test(self):
        return self._all("Testall") if self.reqs else True

    def Wait(self):
        if self.reqs:
            self._all("Waitall")

    def _all(self, how):
        """``Request.<how>`` of the requests; MPI's "error in status" becomes the error of the
        first request that failed (a failed peer must read as the rank failure it is)."""
        MPI = runtime.mpi()
        statuses = [MPI.Status() for _ in self.reqs]
        try:
            return getattr(MPI.Request, how)(self.reqs, statuses)
        except MPI.Exception as e:
            if e.Get_error_class() == MPI.ERR_IN_STATUS:
                for st in statuses:
                    code = st.Get_error()
                    if code not in (MPI.SUCCESS, MPI.ERR_PENDING):
                        raise MPI.Exception(code) from None
            raise

    def Cancel(self):
        for r in self.reqs:
            try:
                r.Cancel()
            except Exception:   # already complete, or a kind MPI cannot cancel
                pass


class Chain:
    """Steps ``starts[i]()`` (each returning a request) run in order; step i starts once step
    i-1 completed, so it may use what that step received."""

    def __init__(self, *starts):
        self.starts = list(starts)
        self.req = self.starts.pop(0)()

    def Test(self):
        while self.req.Test():
            if not self.starts:
                return True
            self.req = self.starts.pop(0)()
        return False

    def Wait(self):
        while True:
            self.req.Wait()
            if not self.starts:
                return
            self.req = self.starts.pop(0)()

    def Cancel(self):
        self.starts = []
        self.req.Cancel()


class InThread:
    """``fn()`` (a blocking MPI call) running in a daemon thread; ``result`` once done."""

    def __init__(self, fn, name="starling-mpi-call"):
        self.result = None
        self.error = None
        self._done = threading.Event()

        def run():
            try:
                self.result = fn()
            except BaseException as e:   # re-raised in the caller by Test / Wait
                self.error = e
            finally:
                self._done.set()

        threading.Thread(target=run, name=name, daemon=True).start()

    def _check(self):
        if self.error is not None:
            raise self.error
        return True

    def Test(self):
        return self._done.is_set() and self._check()

    def Wait(self):
        self._done.wait()
        return self._check()

    def Cancel(self):   # a blocking MPI call cannot be interrupted; it finishes when peers come
        pass


class ProbeRecv:
    """Receives one message of any size from ``source`` with ``tag`` on ``comm`` as bytes
    (``payload`` once complete): ``Improbe`` until it arrives, then a matched ``Irecv``."""

    def __init__(self, comm, source, tag):
        self.comm, self.source, self.tag = comm, source, tag
        self.req = None
        self.payload = None
        self.cancelled = False

    def Test(self):
        MPI = runtime.mpi()
        if self.cancelled:
            return True
        if self.req is None:
            status = MPI.Status()
            msg = self.comm.Improbe(source=self.source, tag=self.tag, status=status)
            if msg is None:
                return False
            self.payload = np.empty(status.Get_count(MPI.BYTE), np.uint8)
            self.req = msg.Irecv([self.payload, MPI.BYTE])
        return self.req.Test()

    def Wait(self):
        MPI = runtime.mpi()
        if self.cancelled:
            return
        if self.req is None:
            status = MPI.Status()
            msg = self.comm.Mprobe(source=self.source, tag=self.tag, status=status)
            self.payload = np.empty(status.Get_count(MPI.BYTE), np.uint8)
            self.req = msg.Irecv([self.payload, MPI.BYTE])
        self.req.Wait()

    def Cancel(self):
        """Stops probing (a message matched already is still received in full): a given-up
        receive must not take a message meant for a later one."""
        if self.req is None:
            self.cancelled = True
