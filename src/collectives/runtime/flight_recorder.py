"""The flight recorder: a ring buffer of the collectives this process took part in, dumped as
JSON when one times out or fails, so the ranks' histories can be compared afterwards
(``python -m starling.distributed.flight_recorder DIR``).

Every runtime records here. A *participant* is what takes part in a collective: a device of
the in-process runtime (named like ``"cpu3"``) or a process of an MPI job (``"rank1"``). Each
record is a debug-log record (src/lowering/debug.py: ``index``, ``primitive``, ``source``,
``inputs``, ``outputs``, ``params``) with the recorder's own keys::

    {"kind": "collective" | "send" | "recv", "rank": participant, "group": group id,
     "group_ranks": [participants of the group, in group order], "seq": k (the k-th collective
     of this group; for send / recv the k-th message between the pair with this tag),
     "peer": participant (send / recv only), "state": "started" | "completed" | "timeout" |
     "failed" | "error" | "aborted", "start": unix time, "end": unix time or None,
     "error": text or None}

Dumps go to ``$STARLING_FLIGHT_RECORDER_DIR``, else a temporary directory named after the job
(``dump_dir()``, the one the error messages name): one file per participant of this process,
``<participant>.json``, written with debug mode's log writer. The ring holds the last
``$STARLING_FLIGHT_RECORDER_SIZE`` records (default 2048; 0 turns recording off).
"""
from __future__ import annotations

import collections
import copy
import itertools
import os
import socket
import tempfile
import threading
import time
import warnings

from ...lowering.debug import log_document, write_log

_LOCK = threading.Lock()
_DUMP_LOCK = threading.Lock()
_STATE = {"process": None, "job": None, "base": 0, "failure_dump": None}
FAILURE_HOOKS: list = []   # called as hook(entry) after a failed record is dumped (MPI: ask peers)


def _capacity() -> int:
    raw = os.environ.get("STARLING_FLIGHT_RECORDER_SIZE", "2048")
    try:
        n = int(raw)
    except ValueError:
        raise ValueError(f"STARLING_FLIGHT_RECORDER_SIZE must be an integer >= 0, got {raw!r}") \
            from None
    if n < 0:
        raise ValueError(f"STARLING_FLIGHT_RECORDER_SIZE must be >= 0, got {n}")
    return n


_RING = collections.deque(maxlen=_capacity())
_INDEX = itertools.count()


_DTYPE_NAMES: dict = {}


def dtype_name(dtype) -> str:
    """``str(dtype)``, cached (NumPy builds the string anew each time, slowly)."""
    name = _DTYPE_NAMES.get(dtype)
    if name is None:
        name = _DTYPE_NAMES[dtype] = str(dtype)
    return name


def set_identity(process=None, job=None):
    """This process's participant name in MPI jobs (e.g. "rank1") and a job id every process of
    the job shares (it names the default dump directory)."""
    _STATE.update(process=process, job=job)


def process_participant():
    """This process's participant name in an MPI job, or None."""
    return _STATE["process"]


def dump_dir() -> str:
    """Where dumps go: ``$STARLING_FLIGHT_RECORDER_DIR``, else a temporary directory named after
    the job (the same on every process of an MPI job on one machine)."""
    env = os.environ.get("STARLING_FLIGHT_RECORDER_DIR")
    if env:
        return env
    job = _STATE["job"] or f"pid{os.getpid()}"
    return os.path.join(tempfile.gettempdir(), f"starling-flight-recorder-{job}")


class Record:
    """One record of the ring. Recording is on the path of every collective, so a record keeps
    what it was given and becomes the documented dict (module docstring) only when read
    (``entries``, ``dump``); ``record[key]`` and ``record.get(key)`` read that dict's keys
    (failure hooks take records so)."""

    __slots__ = ("index", "op", "source", "shapes", "dtype", "params", "kind", "rank", "group",
                 "group_ranks", "seq", "peer", "state", "start", "end", "error")

    def __init__(self, op, source, shapes, dtype, params, kind, rank, group, group_ranks, seq,
                 peer):
        self.op, self.source, self.shapes, self.dtype = op, source, shapes, dtype
        self.params, self.kind, self.rank, self.group = params, kind, rank, group
        self.group_ranks, self.seq, self.peer = group_ranks, seq, peer
        self.state, self.start, self.end, self.error = "started", time.time(), None, None
        self.index = None

    def as_dict(self) -> dict:
        return {"index": self.index, "primitive": self.op, "source": self.source, "depth": 0,
                "inputs": [{"shape": [int(s) for s in self.shapes],
                            "dtype": dtype_name(self.dtype), "weak": False}],
                "outputs": [],
                "params": copy.deepcopy(self.params) if self.params is not None else {},
                "kind": self.kind, "rank": self.rank, "group": self.group,
                "group_ranks": self.group_ranks, "seq": self.seq, "peer": self.peer,
                "state": self.state, "start": self.start, "end": self.end, "error": self.error}

    def __getitem__(self, key):
        return self.as_dict()[key]

    def get(self, key, default=None):
        return self.as_dict().get(key, default)


def dumps_note() -> str:
    """The part of a timeout / failure message that says where the dumps are (none when
    recording is off)."""
    if _RING.maxlen == 0:
        return "no flight recorder dumps (recording is off: STARLING_FLIGHT_RECORDER_SIZE=0)"
    return f"flight recorder dumps: {dump_dir()}"


def record_start(op, participant, group, group_ranks, seq, shapes, dtype, *, source,
                 kind="collective", peer=None, params=None):
    """Appends a record of a collective (or message) that ``participant`` starts; returns it
    (None when recording is off). ``shapes``: the input's shape; ``dtype``: its dtype."""
    if _RING.maxlen == 0:
        return None
    # ``group_ranks`` and ``params`` are kept, not copied: callers hand over lists they do not
    # change afterwards (a group's member names are made once per group)
    entry = Record(op, source, shapes, dtype, params, kind, participant, group, group_ranks,
                   seq, peer)
    # no lock: the counter and the deque's append are each atomic, and a reader copying the
    # ring under _LOCK sees a record before or after its append
    entry.index = next(_INDEX)
    _RING.append(entry)
    return entry


def record_end(entry, state, error=None):
    """Marks ``entry`` finished with ``state``; "timeout", "failed" (a peer died) and "error"
    dump the ring (``dump``) and return the dump directory; "completed" and "aborted" (the run
    stopped because of a failure recorded elsewhere) do not, but an "aborted" end rewrites a
    failure's dump already in the dump directory, so the dump shows how every record ended."""
    if entry is None:
        return None
    entry.end = time.time()
    if error is not None:
        entry.error = str(error)[:2000]
    entry.state = state
    if state == "completed":
        return None
    reason = f"{entry.op} {state} on {entry.rank} (group {entry.group}, seq {entry.seq})"
    if state == "aborted":
        # an abort echoes a failure recorded elsewhere: no dump of its own, but the failure's
        # dump is a snapshot taken before this record ended (or even started), so refresh it
        if _STATE["failure_dump"] is not None and _STATE["failure_dump"] == dump_dir():
            try:
                dump(reason=reason)
            except OSError:
                pass
        return None
    try:
        where = dump(reason=reason)
        _STATE["failure_dump"] = where
    except OSError as e:   # a failing dump must not hide the collective's own error
        warnings.warn(f"flight recorder: could not dump to {dump_dir()}: {e}", RuntimeWarning)
        where = None
    for hook in FAILURE_HOOKS:
        try:
            hook(entry)
        except Exception:   # asking peers to dump is best effort; the error itself is raised
            pass
    return where


def entries(participant=None) -> list:
    """Copies of the records in the ring (of one participant, or all), oldest first."""
    with _LOCK:
        ring = list(_RING)
    return [e.as_dict() for e in ring if participant is None or e.rank == participant]


def clear():
    """Empties the ring (tests; a fresh phase of a job)."""
    with _LOCK:
        _RING.clear()
        _STATE.update(base=next(_INDEX) + 1, failure_dump=None)   # the next index given


def dump(directory=None, reason=None) -> str:
    """Writes one JSON log per participant of this process (this MPI rank, this process's
    devices) into ``directory`` (default ``dump_dir()``); returns the directory.

    Each file is a debug log (``starling.DebugMode.load_logs`` reads it) whose ``meta`` says
    who wrote it and why; ``truncated`` is True when the ring dropped older records.
    """
    directory = os.fspath(directory) if directory is not None else dump_dir()
    with _DUMP_LOCK:
        os.makedirs(directory, exist_ok=True)
        _write_dump(directory, reason)
    return directory


def _write_dump(directory, reason):
    with _LOCK:
        ring = list(_RING)
    snapshot = [e.as_dict() for e in ring]
    # records made since the last clear (indices count from _STATE["base"]) beyond the ring's
    truncated = bool(ring) and ring[-1].index + 1 - _STATE["base"] > len(ring)
    parts = {}
    if _STATE["process"] is not None:
        parts[_STATE["process"]] = []
    for e in snapshot:
        parts.setdefault(e["rank"], []).append(e)
        if e["source"] == "inprocess":   # every member is a device of this process: a member
            for who in e["group_ranks"]:  # with no record still gets its (telling) file
                parts.setdefault(who, [])
    meta = {"kind": "starling-flight-recorder", "reason": reason, "time": time.time(),
            "host": socket.gethostname(), "pid": os.getpid(), "capacity": _RING.maxlen}
    for who, records in parts.items():
        doc = log_document(records, label=f"flight recorder of {who}", truncated=truncated,
                           meta=dict(meta, participant=who))
        write_log(os.path.join(directory, f"{_file_name(who)}.json"), doc)


def _file_name(participant) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in str(participant))
