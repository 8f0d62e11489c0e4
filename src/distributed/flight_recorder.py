"""The flight recorder: a ring buffer of the collectives each process ran (seq, op, shapes,
dtype, group, state, start / end times), dumped as JSON when a collective fails or times out.

This first version records and dumps; ``missing_ranks`` has no arrival information yet.
"""
from __future__ import annotations

import collections
import itertools
import time

_RING = collections.deque(maxlen=2048)
_SEQ = itertools.count()


def record_start(op, comm, shapes, dtype):
    entry = {"seq": next(_SEQ), "op": op, "shapes": [int(s) for s in shapes],
             "dtype": str(dtype), "group_size": comm.Get_size(), "state": "started",
             "start": time.time(), "end": None}
    _RING.append(entry)
    return entry


def record_end(entry, state, error=None):
    entry["state"] = state
    entry["end"] = time.time()
    if error is not None:
        entry["error"] = str(error)


def missing_ranks(comm, entry):
    return ()


def entries():
    return list(_RING)
