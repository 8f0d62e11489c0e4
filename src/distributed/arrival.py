"""Arrival tracking: which ranks entered a collective, readable without their participation.

Every process of the job exposes a small table in one MPI window over the world communicator
(``Board``, made by ``initialize()``): for each group it belongs to, ``(group key, number of
collectives of the group it has entered, fingerprint of the last one)``, plus a header a peer
can bump to ask it to dump its flight recorder. A process writes its own table with plain
stores (the window is in a shared ``Lock_all`` epoch for the job's life); peers read it with
passive-target ``Get`` + ``Flush``. On shared memory (Open MPI's osc/sm, one machine) and on
RDMA networks this needs nothing from the target, so a peer that is alive but stuck, sleeping
in Python or spinning in a kernel, can still be told apart from one that arrived. On
transports that emulate one-sided access in software the read waits for the target's next MPI
call; ``CollectiveTimeout`` then says the ranks are unknown rather than guessing.

Each group (``GroupTrack``) has a job-wide key that every member computes alike (its kind,
creation order and ranks), so a reader finds the group in a peer's table by key. A group made
again under the same id (``reconfigure()`` after a failure, a mesh group remade) is a new
incarnation with its own key (``uid~1``, ``uid~2``...), so nobody reads the old counts.

The window spans the job's processes as they were at ``initialize()`` and is addressed by job
rank (``runtime.job_rank``), so it keeps working when a reconfiguration renumbers the world (a
failed process's table just cannot be read). Freeing it is collective over those processes,
so after a failure it is left to the process's exit.
A watchdog thread per process polls its header and dumps the flight recorder when a peer asks
(the peer timed out or saw a failure), so every rank's history lands in the dump directory.
"""
from __future__ import annotations

import hashlib
import threading
import warnings

import numpy as np

from .. import _native
from . import runtime

_HEADER = 2          # [dump requests received, rank that asked last]
_FIELDS = 3          # per slot: [group key, collectives entered, fingerprint of the last]
SLOTS = 1024         # groups one process can track (more are untracked: ranks "unknown")
_KEYVAL = [None]


def slot_word(slot) -> int:
    """Where the fields of table slot ``slot`` start in a process's board words."""
    return _HEADER + slot * _FIELDS


def stable_hash(text) -> int:
    """A nonzero int64 of ``text`` that every process computes alike (unlike ``hash``)."""
    h = int.from_bytes(hashlib.blake2b(str(text).encode(), digest_size=8).digest(), "little",
                       signed=True)
    return h or 1


class GroupTrack:
    """This process's view of one group (of one communicator): its key, members (world ranks),
    slot, next seq, and the native plans of its collectives."""

    __slots__ = ("uid", "members", "names", "key", "slot", "seq", "p2p", "plans", "replays")

    def __init__(self, uid, members, slot):
        self.uid = uid
        self.members = [int(m) for m in members]
        # as the flight recorder names them: by job rank, which a reconfiguration keeps
        self.names = [f"rank{runtime.job_rank(m)}" for m in self.members]
        self.key = stable_hash(uid)
        self.slot = slot
        self.seq = 0
        self.p2p = {}   # (direction, peer, tag) -> messages so far
        # native plans of the blocking calls (src/distributed/native_calls.py): by CallSpec,
        # and by the op's arguments for replay
        self.plans, self.replays = {}, {}

    def next_p2p(self, direction, peer, tag) -> int:
        k = (direction, peer, tag)
        n = self.p2p.get(k, 0)
        self.p2p[k] = n + 1
        return n


class Board:
    """The job's arrival window (see module docstring); one per process, made collectively."""

    def __init__(self, world):
        MPI = runtime.mpi()
        self.MPI = MPI
        self.comm = world.Dup()
        self.rank = self.comm.Get_rank()
        n = _HEADER + SLOTS * _FIELDS
        self.win = MPI.Win.Allocate(n * 8, 8, comm=self.comm)
        self.win.Set_errhandler(MPI.ERRORS_RETURN)
        self.mem = np.frombuffer(self.win.tomemory(), np.int64)
        self.mem[:] = 0
        # the same words as Python ints: ``enter`` runs on every collective, and a memoryview's
        # item access costs a fraction of a NumPy scalar's
        self.words = memoryview(self.mem)
        self.comm.Barrier()   # no peer reads before every table is zeroed
        self.win.Lock_all(MPI.MODE_NOCHECK)
        _native.mpi_set_board(self.mem.ctypes.data, self.win.handle)   # native_calls.py
        self._lock = threading.Lock()
        self._next_slot = 0
        self._seen_requests = 0
        self._closed = False
        self._stop = threading.Event()
        self._watchdog = None

    def _table(self, mem):
        return mem[_HEADER:].reshape(SLOTS, _FIELDS)

    def new_slot(self):
        with self._lock:
            if self._next_slot >= SLOTS:
                if self._next_slot == SLOTS:
                    self._next_slot += 1
                    warnings.warn(f"starling.distributed: more than {SLOTS} groups; the newer "
                                  "ones are not tracked (their timeouts cannot name the ranks "
                                  "that did not arrive)", RuntimeWarning)
                return None
            s = self._next_slot
            self._next_slot += 1
            return s

    def enter(self, track, seq, fingerprint):
        """Publishes "entered collective ``seq`` of ``track``'s group"."""
        if track.slot is None or self._closed:
            return
        w, i = self.words, slot_word(track.slot)
        w[i] = track.key
        w[i + 2] = fingerprint     # before the count: a reader seeing the count sees this too
        if seq >= w[i + 1]:
            w[i + 1] = seq + 1
        self.win.Sync()

    def read(self, job_rank):
        """A copy of the table of the process of ``job_rank`` (``runtime.job_rank``: the
        window spans the job's original processes) or None when it cannot be read."""
        out = np.zeros(_HEADER + SLOTS * _FIELDS, np.int64)
        try:
            self.win.Get([out, self.MPI.INT64_T], job_rank)
            self.win.Flush(job_rank)
        except self.MPI.Exception:
            return None
        return self._table(out)

    def status(self, track, seq, fingerprint):
        """(ranks that have not entered collective ``seq`` of the group, ranks that entered it
        with another fingerprint, ranks whose table could not be read), as world ranks."""
        missing, different, unknown = [], [], []
        for r in track.members:
            if r == runtime.get_rank():
                continue
            table = self.read(runtime.job_rank(r))
            if table is None:
                unknown.append(r)
                continue
            rows = np.nonzero(table[:, 0] == track.key)[0]
            entered = int(table[rows[0], 1]) if len(rows) else 0
            if entered <= seq:
                missing.append(r)
            elif entered == seq + 1 and int(table[rows[0], 2]) != fingerprint:
                different.append(r)
        return missing, different, unknown

    def request_dump(self, job_ranks):
        """Asks the processes of ``job_ranks`` to dump their flight recorders (one-sided)."""
        MPI = self.MPI
        one = np.ones(1, np.int64)
        me = np.array([self.rank], np.int64)
        for r in job_ranks:
            if r == self.rank:
                continue
            try:
                self.win.Put([me, MPI.INT64_T], r, target=[1, 1, MPI.INT64_T])
                self.win.Accumulate([one, MPI.INT64_T], r, target=[0, 1, MPI.INT64_T],
                                    op=MPI.SUM)
                self.win.Flush(r)
            except MPI.Exception:
                pass

    def pending_request(self):
        """The rank that asked for a dump since the last call, or None (reads local memory
        only: safe from the watchdog thread while the main thread is inside MPI)."""
        n = int(self.mem[0])
        if n == self._seen_requests:
            return None
        self._seen_requests = n
        return int(self.mem[1])

    def start_watchdog(self):
        """Dumps the flight recorder whenever a peer asks (a daemon thread polling the header
        in local memory every 50 ms)."""
        self._watchdog = threading.Thread(target=_watchdog, args=(self,),
                                          name="starling-flight-recorder", daemon=True)
        self._watchdog.start()

    def stop_watchdog(self):
        """Stops the watchdog before the window's memory goes away (freeing, MPI_Finalize)."""
        self._stop.set()
        if self._watchdog is not None and self._watchdog is not threading.current_thread():
            self._watchdog.join()

    def close(self, free=True):
        """Stops using the window; ``free``: frees it too (collective over the job's original
        processes: impossible once one of them failed)."""
        if self._closed:
            return
        self.stop_watchdog()
        self._closed = True
        _native.mpi_set_board(0, 0)
        if not free:
            return
        try:
            self.win.Unlock_all()
            self.win.Free()
            self.comm.Free()
        except Exception:   # a failed peer may make freeing fail; the process is leaving
            pass


_BOARD = [None]
_INCARNATIONS: dict = {}


def start(world):
    """Makes the job's board (collective over ``world``) and this process's dump watchdog."""
    try:
        board = Board(world)
    except Exception as e:   # a transport without one-sided support: no arrival tracking
        warnings.warn(f"starling.distributed: arrival tracking is off ({e}); timeouts will not "
                      "name the ranks that did not arrive", RuntimeWarning)
        return None
    _BOARD[0] = board
    board.start_watchdog()   # stopped before MPI finalizes, by runtime._at_exit
    return board


def stop(free=True):
    """Stops the board's watchdog and, with ``free``, frees its window (see ``Board.close``)."""
    board = _BOARD[0]
    _BOARD[0] = None
    if board is not None:
        board.close(free)


def board():
    """The arrival board of this process (set by ``start``), or None when tracking is off or
    stopped."""
    return _BOARD[0]


def _watchdog(board):
    from ..collectives.runtime import flight_recorder
    while not board._stop.wait(0.05):
        who = board.pending_request()
        if who is not None:
            try:
                flight_recorder.dump(reason=f"requested by rank {who}")
            except OSError:
                pass


def new_track(uid, members):
    """A new GroupTrack for group ``uid`` (world ranks ``members``). A group made again under the
    same id (e.g. after a failure) gets a fresh one, ``uid~1``, ``uid~2``...: every member
    makes the same calls, so the ids still agree across the job."""
    n = _INCARNATIONS.get(uid, 0)
    _INCARNATIONS[uid] = n + 1
    b = _BOARD[0]
    return GroupTrack(uid if n == 0 else f"{uid}~{n}", members,
                      b.new_slot() if b is not None else None)


def attach(comm, track):
    """Ties ``track`` to the MPI communicator ``comm`` (as an MPI attribute); returns it."""
    MPI = runtime.mpi()
    if _KEYVAL[0] is None:
        _KEYVAL[0] = MPI.Comm.Create_keyval()
    comm.Set_attr(_KEYVAL[0], track)
    return track


def track_of(comm):
    """The GroupTrack tied to ``comm`` (None for communicators made outside Starling)."""
    if _KEYVAL[0] is None:
        return None
    try:
        return comm.Get_attr(_KEYVAL[0])
    except Exception:
        return None
