"""The flight recorder of MPI jobs, and the tool comparing the ranks' dumps.

Every collective and message of ``starling.distributed`` (eager process-group collectives,
SPMD collectives of meshes spanning processes, object collectives, window fences) is recorded
in the process's ring buffer (src/collectives/runtime/flight_recorder.py, shared with the
in-process runtime) when it starts, and marked when it ends. A timeout or failure dumps the
ring as JSON, one file per rank, into ``$STARLING_FLIGHT_RECORDER_DIR`` (default: a temporary
directory named in the error message) and asks the group's other ranks to dump theirs too
(src/distributed/arrival.py: they do it from a watchdog thread, even while stuck in Python).
``dump()`` writes this process's file on demand.

Compare the dumps::

    python -m starling.distributed.flight_recorder DIR [DIR_OR_FILE ...]

It matches the ranks' records of each collective (same group, same sequence number) and of
each message (the n-th send from A to B with a tag and the n-th receive of B from A), and
names the first mismatch in time: a different op, shape, dtype or parameter at the same
sequence number, a rank with no record of a collective its group ran, or a rank with no dump.
Exit code 0 when the dumps agree, 1 when they do not, 2 when there is nothing to compare.
"""
from __future__ import annotations

import argparse
import glob
import math
import os
import sys

from ...collectives.runtime.flight_recorder import (FAILURE_HOOKS, adopt, clear,  # noqa
                                                   dump, dump_dir, dumps_note, entries,
                                                   process_participant, record_end,
                                                   record_start, template)
from ...lowering.debug import DebugMode, _compare_values, params_difference
from .. import arrival, runtime
from ..callspec import call_spec

__all__ = ["dump", "dump_dir", "entries", "clear", "compare", "Comparison", "main"]


# ---- recording MPI operations -------------------------------------------------------------------

class OpRecord:
    """One MPI operation of this process in flight: its flight-recorder entry (None when
    recording is off), group track, sequence number and fingerprint."""

    __slots__ = ("op", "entry", "index", "track", "seq", "fingerprint", "kind", "peer")

    def __init__(self, op, entry, track, seq, fingerprint, kind, peer):
        self.op, self.entry, self.track, self.seq = op, entry, track, seq
        self.fingerprint, self.kind, self.peer = fingerprint, kind, peer
        self.index = None if entry is None else entry.index


def participant(world_rank) -> str:
    """The name in flight-recorder logs ("rank3") of the process of world rank ``world_rank``:
    its rank when the job started (``runtime.job_rank``), kept through reconfigurations."""
    return f"rank{runtime.job_rank(world_rank)}"


_UNTRACKED: dict = {}


def _track(comm):
    t = arrival.track_of(comm)
    if t is not None:
        return t
    # a communicator made outside Starling: recorded, but peers cannot find it on the board
    key = comm.py2f()
    t = _UNTRACKED.get(key)
    if t is None:
        MPI = runtime.mpi()
        world = runtime.world_comm().Get_group()
        group = comm.Get_group()
        members = MPI.Group.Translate_ranks(group, list(range(group.Get_size())), world)
        group.Free()
        world.Free()
        t = _UNTRACKED[key] = arrival.GroupTrack(f"comm{key}", [int(m) for m in members], None)
    return t


def begin(op, comm, shapes=(), dtype=None, *, kind="collective", peer=None, tag=0,
          params=None, track=None, seq=None, spec=None) -> OpRecord:
    """Records the start of an MPI operation of this process and, for a collective, publishes
    its arrival on the board. ``peer``: the other side of a send / recv, as a rank of the
    group; ``track`` / ``seq``: for collectives made before their communicator exists (group
    creation) or retried; ``spec``: the collective's CallSpec (src/distributed/callspec.py),
    when the caller has it (else made from ``op``, ``shapes``, ``dtype`` and ``params``)."""
    t = track if track is not None else _track(comm)
    fp = None
    peer_world = None
    if kind == "collective":
        if spec is None:
            spec = call_spec(op, shapes, dtype, params)
        if seq is None:
            s = t.seq
            t.seq = s + 1
        else:
            s = seq
            t.seq = max(t.seq, s + 1)
        fp = spec.fingerprint
        b = arrival.board()
        if b is not None:
            b.enter(t, s, fp)
        params, shapes, dtype = spec.params, spec.shape, spec.dtype
    else:
        peer_world = t.members[peer]
        params = dict(params or {}, tag=tag)
        s = t.next_p2p(kind, peer, tag)
    me = process_participant() or participant(runtime.get_rank())
    entry = record_start(op, me, t.uid, t.names, s, shapes, dtype, source="mpi", kind=kind,
                         peer=None if peer_world is None else participant(peer_world),
                         params=params)
    return OpRecord(op, entry, t, s, fp, kind, peer_world)


def end(rec, state, error=None):
    """Marks ``rec`` finished (failures dump the ring and ask the group to dump)."""
    return record_end(rec.entry, state, error, rec.index)


def arrival_status(rec):
    """(missing, different, unknown) world ranks for a timed-out ``rec``: those that never
    entered it, entered it with other arguments, or could not be read. A message's missing
    rank is its peer."""
    if rec.kind != "collective":
        return [rec.peer], [], []
    b = arrival.board()
    others = [r for r in rec.track.members if r != runtime.get_rank()]
    if b is None or rec.track.slot is None:
        return [], [], others
    return b.status(rec.track, rec.seq, rec.fingerprint)


def _ask_group_to_dump(entry):
    b = arrival.board()
    if b is None or entry.get("source") != "mpi":
        return
    ranks = [int(p[4:]) for p in entry["group_ranks"] if p.startswith("rank")]
    if entry.get("peer"):
        ranks.append(int(entry["peer"][4:]))
    b.request_dump(sorted(set(ranks)))


FAILURE_HOOKS.append(_ask_group_to_dump)


# ---- comparing dumps ----------------------------------------------------------------------------

class Problem:
    """One disagreement between the dumps: ``what`` (a title), ``lines`` (details),
    ``time`` (when the operation started, for ordering)."""

    def __init__(self, time, what, lines):
        self.time, self.what, self.lines = time, what, list(lines)

    def __str__(self):
        return "\n".join([self.what] + [f"  {line}" for line in self.lines])


class Comparison:
    """The result of ``compare``: ``participants`` (name -> number of records),
    ``collectives`` / ``messages`` compared, ``problems`` (oldest first), ``first`` (or None).
    Truthy when the dumps agree."""

    def __init__(self, participants, collectives, messages, problems, where):
        self.participants = participants
        self.collectives, self.messages = collectives, messages
        self.problems = sorted(problems, key=lambda p: p.time)
        self.first = self.problems[0] if self.problems else None
        self.where = where

    @property
    def consistent(self) -> bool:
        return not self.problems

    def __bool__(self):
        return self.consistent

    def __str__(self):
        names = ", ".join(f"{p} ({n} records)" for p, n in sorted(self.participants.items()))
        lines = [f"flight recorder dumps in {self.where}: {names}",
                 f"compared {self.collectives} collectives and {self.messages} messages"]
        if self.consistent:
            lines.append("consistent: every rank recorded the same operations")
            return "\n".join(lines)
        lines.append(f"first mismatch: {self.first}")
        rest = self.problems[1:]
        if rest:
            lines.append(f"{len(rest)} later problem(s), possibly consequences of the first:")
            lines += [f"  {p.what}" for p in rest[:10]]
        return "\n".join(lines)

    __repr__ = __str__


def _describe(r, state=True) -> str:
    ins = ", ".join(f"{x['dtype']}{list(x['shape'])}" for x in r["inputs"])
    params = {k: v for k, v in (r.get("params") or {}).items() if k != "free_dims"}
    return f"{r['primitive']}({ins}) {params}" + (f" [{r['state']}]" if state else "")


def _signature(r):
    free = set((r.get("params") or {}).get("free_dims", ()))
    shapes = tuple(tuple(None if i in free else s for i, s in enumerate(x["shape"]))
                   for x in r["inputs"])
    return (r["primitive"], shapes, tuple(x["dtype"] for x in r["inputs"]),
            repr(sorted((r.get("params") or {}).items())))


def _masked(r):
    free = set((r.get("params") or {}).get("free_dims", ()))
    return [dict(x, shape=[None if i in free else s for i, s in enumerate(x["shape"])])
            for x in r["inputs"]]


def _differences(ref_who, ref, who, r):
    if r["primitive"] != ref["primitive"]:
        return [f"op {r['primitive']} ({who}) vs {ref['primitive']} ({ref_who})"]
    names = (who, ref_who)
    out = _compare_values("input", _masked(r), _masked(ref), names=names)
    changed = params_difference(r.get("params"), ref.get("params"), names=names)
    return out + ([changed] if changed else [])


def load_dumps(sources) -> dict:
    """participant -> (records, meta, truncated) from dump files or directories of them.

    Raises:
        ValueError: a file is not a flight-recorder dump, or there are no dumps.
    """
    if isinstance(sources, (str, os.PathLike)):
        sources = [sources]
    files = []
    for s in sources:
        s = os.fspath(s)
        if os.path.isdir(s):
            files += sorted(f for f in glob.glob(os.path.join(s, "*.json")))
        elif os.path.exists(s):
            files.append(s)
        else:
            raise ValueError(f"{s}: no such dump file or directory")
    dumps = {}
    for f in files:
        log = DebugMode.load_logs(f)
        if log.meta.get("kind") != "starling-flight-recorder":
            raise ValueError(f"{f} is a debug log but not a flight-recorder dump")
        dumps[log.meta["participant"]] = (log.records, log.meta, log.truncated)
    if not dumps:
        raise ValueError(f"no flight-recorder dumps (*.json) in {', '.join(map(str, sources))}")
    return dumps


def compare(sources) -> Comparison:
    """Compares flight-recorder dumps (a directory, a file, or a list of them); see the module
    docstring for what counts as a mismatch.

    Raises:
        ValueError: no dumps, or a file that is not one.
    """
    dumps = load_dumps(sources)
    coll, msgs, first_seq = {}, {}, {}
    for who, (records, _, _) in dumps.items():
        for r in records:
            if r["kind"] == "collective":
                coll.setdefault((r["group"], r["seq"]), {})[who] = r   # a retry replaces
                fs = first_seq.setdefault(who, {})
                fs[r["group"]] = min(fs.get(r["group"], math.inf), r["seq"])
            else:
                tag = r["params"].get("tag", 0)
                pair = (who, r["peer"]) if r["kind"] == "send" else (r["peer"], who)
                key = (r["group"], pair, tag, r["seq"])
                msgs.setdefault(key, {})[r["kind"]] = (who, r)
    problems = []
    for (group, seq), by in coll.items():
        problems += _check_collective(group, seq, by, dumps, first_seq)
    for (group, pair, tag, seq), sides in msgs.items():
        problems += _check_message(group, pair, tag, seq, sides, dumps)
    where = ", ".join(map(str, sources)) if isinstance(sources, (list, tuple)) else str(sources)
    return Comparison({w: len(d[0]) for w, d in dumps.items()}, len(coll), len(msgs), problems,
                      where)


def _check_collective(group, seq, by, dumps, first_seq):
    any_r = next(iter(by.values()))
    start = min(r["start"] for r in by.values())
    title = f"collective #{seq} of group {group}"
    sigs = {}
    for who, r in sorted(by.items()):
        sigs.setdefault(_signature(r), []).append(who)
    ref_sig = max(sigs, key=lambda s: (len(sigs[s]), -min(map(_rank_order, sigs[s]))))
    ref_who = sigs[ref_sig][0]
    ref = by[ref_who]
    out = []
    for sig, whos in sigs.items():
        if sig == ref_sig:
            continue
        for who in whos:
            lines = _differences(ref_who, ref, who, by[who])
            lines += [f"{w}: {_describe(by[w])}" for w in sorted(by, key=_rank_order)]
            out.append(Problem(start, f"{title}: {who} called {_describe(by[who], False)} "
                                      f"where {', '.join(sigs[ref_sig])} called "
                                      f"{_describe(ref, False)}", lines))
    for who in any_r["group_ranks"]:
        if who in by:
            continue
        if who not in dumps:
            out.append(Problem(start, f"{title} ({_describe(ref, False)}): no dump from {who}",
                               [f"{w}: {_describe(by[w])}" for w in sorted(by, key=_rank_order)]))
            continue
        records, meta, truncated = dumps[who]
        if truncated and seq < first_seq.get(who, {}).get(group, math.inf):
            continue   # older than what its ring still holds
        if meta.get("time") is not None and meta["time"] < start:
            continue   # it dumped before anyone started this collective
        mine = [r for r in records if r["kind"] == "collective" and r["group"] == group]
        last = (f"its last record of the group is #{mine[-1]['seq']} {_describe(mine[-1])}"
                if mine else "it has no record of the group")
        out.append(Problem(start, f"{title} ({_describe(ref, False)}): {who} has no record of it",
                           [last] + [f"{w}: {_describe(by[w])}"
                                     for w in sorted(by, key=_rank_order)]))
    return out


def _check_message(group, pair, tag, seq, sides, dumps):
    src, dst = pair
    title = f"message #{seq} from {src} to {dst} (tag {tag}, group {group})"
    if "send" in sides and "recv" in sides:
        (sw, s), (rw, r) = sides["send"], sides["recv"]
        diffs = _compare_values("message", s["inputs"], r["inputs"], names=(sw, rw))
        if s["primitive"].endswith("_object") != r["primitive"].endswith("_object"):
            diffs.append(f"{s['primitive']} ({sw}) vs {r['primitive']} ({rw})")
        return [Problem(min(s["start"], r["start"]), f"{title}: sent and received differ",
                        diffs)] if diffs else []
    have, missing = ("send", "recv") if "send" in sides else ("recv", "send")
    who, r = sides[have]
    other = dst if have == "send" else src
    if other not in dumps:
        return [Problem(r["start"], f"{title}: no dump from {other}", [f"{who}: {_describe(r)}"])]
    meta = dumps[other][1]
    if meta.get("time") is not None and meta["time"] < r["start"]:
        return []
    return [Problem(r["start"], f"{title}: {other} has no matching {missing}",
                    [f"{who}: {_describe(r)}"])]


def _rank_order(who):
    digits = "".join(c for c in str(who) if c.isdigit())
    return int(digits) if digits else 0


def main(argv=None) -> int:
    """Command line ``python -m starling.distributed.flight_recorder DUMP...``: compares the ranks'
    dumps and prints the result (see ``compare``).

    Args:
        argv: the arguments (list of str); None reads ``sys.argv``.
    Returns:
        The exit status: 0 when the dumps are consistent, 1 at a mismatch, 2 when there is nothing
        to compare (unreadable or invalid dumps; the reason goes to stderr).
    """
    parser = argparse.ArgumentParser(
        prog="python -m starling.distributed.flight_recorder",
        description="Compare the flight-recorder dumps of a job's ranks and name the first "
                    "mismatch (exit 0: consistent, 1: mismatch, 2: nothing to compare).")
    parser.add_argument("paths", nargs="+", help="dump directories or files")
    ns = parser.parse_args(argv)
    try:
        result = compare(ns.paths if len(ns.paths) > 1 else ns.paths[0])
    except (ValueError, OSError) as e:
        print(f"flight_recorder: {e}", file=sys.stderr)
        return 2
    print(result)
    return 0 if result.consistent else 1
