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

import copy
import os
import socket
import tempfile
import threading
import time
import warnings
import weakref

from ... import _native
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


# The ring: slot i % capacity holds record i. A finished record's slot is rewritten in place by
# the record that replaces it: allocating a record and freeing the one it evicts cost ~10 us
# per collective after a 1 MiB transfer has emptied the caches (5% of its time on two ranks).
# Blocking MPI collectives run from C++ record in a native ring of the same capacity
# (native/flight_ring.h: index, template, seq, state, times), which draws its indices from the
# same counter; readers merge the two rings by index and keep the newest ``_CAPACITY`` records.
_CAPACITY = _capacity()
_SLOTS: list = [None] * _CAPACITY
_native.fr_configure(_CAPACITY)
# Templates: what a native record's call was. One lives while a plan holds its handle or a
# native record refers to it; the others are dropped once their number has doubled since the
# last sweep (a job calling with ever new shapes must not grow without bound).
_TEMPLATES: dict = {}      # template id -> Record describing a call (state and times unused)
_HANDLES = weakref.WeakValueDictionary()   # the caller's key of a template -> its Template
_SWEEP = {"at": 1024, "next_id": 0}


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
    (failure hooks take records so). Made by ``record_start`` only: the ring reuses them.
    ``as_dict(index)``: the dict, with ``index`` as read before (see ``_snapshot``)."""

    __slots__ = ("index", "op", "source", "shapes", "dtype", "params", "kind", "rank", "group",
                 "group_ranks", "seq", "peer", "state", "start", "end", "error")

    def as_dict(self, index=None) -> dict:
        return {"index": self.index if index is None else index, "primitive": self.op,
                "source": self.source, "depth": 0,
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
    if _CAPACITY == 0:
        return "no flight recorder dumps (recording is off: STARLING_FLIGHT_RECORDER_SIZE=0)"
    return f"flight recorder dumps: {dump_dir()}"


def record_start(op, participant, group, group_ranks, seq, shapes, dtype, *, source,
                 kind="collective", peer=None, params=None):
    """Appends a record of a collective (or message) that ``participant`` starts; returns it
    (None when recording is off). ``shapes``: the input's shape; ``dtype``: its dtype."""
    if _CAPACITY == 0:
        return None
    return _place(_native.fr_next(), time.time(), op, source, shapes, dtype, params, kind,
                  participant, group, group_ranks, seq, peer)


def _place(index, start, op, source, shapes, dtype, params, kind, rank, group, group_ranks,
           seq, peer):
    # ``group_ranks`` and ``params`` are kept, not copied: callers hand over lists they do not
    # change afterwards (a group's member names are made once per group). No lock: a reader
    # (``_snapshot``) skips a record whose index changes while it reads.
    slot = index % _CAPACITY
    entry = _SLOTS[slot]
    fresh = entry is None or entry.state == "started"   # one still in flight stays its caller's
    if fresh:
        entry = Record.__new__(Record)
    else:
        entry.index = None
    entry.op, entry.source, entry.shapes, entry.dtype = op, source, shapes, dtype
    entry.params, entry.kind, entry.rank, entry.group = params, kind, rank, group
    entry.group_ranks, entry.seq, entry.peer = group_ranks, seq, peer
    entry.state, entry.start, entry.end, entry.error = "started", start, None, None
    entry.index = index
    if fresh:
        _SLOTS[slot] = entry
    return entry


class Template:
    """A handle of a template (``template``): its ``id`` names the template in native records
    while the handle is referenced."""

    __slots__ = ("id", "__weakref__")


def template(key, op, participant, group, group_ranks, shapes, dtype, *, source,
             kind="collective", peer=None, params=None) -> Template:
    """The handle of a template: what ``record_start`` would record, for the native ring's
    records of repeated calls (native/flight_ring.h). ``key``: the caller's hashable name for
    it (the same key gives the same handle while it is referenced). Keep the handle as long
    as records may name its ``id``."""
    handle = _HANDLES.get(key)
    if handle is not None:
        return handle
    rec = Record.__new__(Record)
    rec.op, rec.source, rec.shapes, rec.dtype, rec.params = op, source, shapes, dtype, params
    rec.kind, rec.rank, rec.group, rec.group_ranks = kind, participant, group, group_ranks
    rec.peer, rec.index, rec.seq, rec.state, rec.start, rec.end, rec.error = (
        peer, None, None, "started", None, None, None)
    handle = Template()
    with _LOCK:
        if len(_TEMPLATES) >= _SWEEP["at"]:
            _sweep_templates()
        handle.id = _SWEEP["next_id"]
        _SWEEP["next_id"] += 1
        _TEMPLATES[handle.id] = rec
    _HANDLES[key] = handle
    return handle


def _sweep_templates():
    # under _LOCK: a reader of the native ring looks its records' templates up under it
    live = {h.id for h in list(_HANDLES.values())}
    live.update(r[1] for r in _native.fr_snapshot())
    for tid in [t for t in _TEMPLATES if t not in live]:
        del _TEMPLATES[tid]
    _SWEEP["at"] = max(1024, 2 * len(_TEMPLATES))


def adopt(index, tmpl, seq):
    """Moves native record ``index`` (template id ``tmpl``, sequence number ``seq``; in flight)
    into this ring and returns it, for ``record_end``: its call failed, and a failure's record
    carries an error text and goes to the failure hooks. None when recording is off."""
    if _CAPACITY == 0:
        return None
    start = _native.fr_take(index)
    t = _TEMPLATES[tmpl]
    return _place(index, time.time() if start is None else start, t.op, t.source, t.shapes,
                  t.dtype, t.params, t.kind, t.rank, t.group, t.group_ranks, seq, t.peer)


def record_end(entry, state, error=None, index=None):
    """Marks ``entry`` finished with ``state``; "timeout", "failed" (a peer died) and "error"
    dump the ring (``dump``) and return the dump directory; "completed" and "aborted" (the run
    stopped because of a failure recorded elsewhere) do not, but an "aborted" end rewrites a
    failure's dump already in the dump directory, so the dump shows how every record ended.
    ``index``: the record's index when it started, for a caller that may end it a second time
    (a timed-out operation completing later): once ended, the ring may have reused ``entry``
    for another record, which is then left alone."""
    if entry is None or (index is not None and entry.index != index):
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


def _snapshot() -> list:
    """The records of both rings as dicts, oldest first (see ``_CAPACITY``)."""
    with _LOCK:
        out = []
        for e in list(_SLOTS):
            i = e.index if e is not None else None
            if i is None:
                continue
            d = e.as_dict(i)
            if e.index == i:   # not rewritten for a newer record while read
                out.append(d)
        for index, tmpl, seq, state, start, end in _native.fr_snapshot():
            d = _TEMPLATES[tmpl].as_dict(index)
            d.update(seq=seq, state="started" if state == 0 else "completed", start=start,
                     end=end)
            out.append(d)
    out.sort(key=lambda d: d["index"])
    return out[-_CAPACITY:] if _CAPACITY else []


def entries(participant=None) -> list:
    """Copies of the records in the ring (of one participant, or all), oldest first."""
    return [d for d in _snapshot() if participant is None or d["rank"] == participant]


def clear():
    """Empties the ring (tests; a fresh phase of a job)."""
    with _LOCK:
        _SLOTS[:] = [None] * _CAPACITY
        _native.fr_clear()
        _STATE.update(base=_native.fr_next() + 1, failure_dump=None)   # the next index given


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
    snapshot = _snapshot()
    # records made since the last clear (indices count from _STATE["base"]) beyond the ring's
    truncated = bool(snapshot) and snapshot[-1]["index"] + 1 - _STATE["base"] > len(snapshot)
    parts = {}
    if _STATE["process"] is not None:
        parts[_STATE["process"]] = []
    for e in snapshot:
        parts.setdefault(e["rank"], []).append(e)
        if e["source"] == "inprocess":   # every member is a device of this process: a member
            for who in e["group_ranks"]:  # with no record still gets its (telling) file
                parts.setdefault(who, [])
    meta = {"kind": "starling-flight-recorder", "reason": reason, "time": time.time(),
            "host": socket.gethostname(), "pid": os.getpid(), "capacity": _CAPACITY}
    for who, records in parts.items():
        doc = log_document(records, label=f"flight recorder of {who}", truncated=truncated,
                           meta=dict(meta, participant=who))
        write_log(os.path.join(directory, f"{_file_name(who)}.json"), doc)


def _file_name(participant) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in str(participant))
