"""Object collectives: Python values between processes, safely encoded (src/distributed/codec.py).

``broadcast_object(obj, src=0)``, ``all_gather_object(obj)``, ``send_object(obj, dst)`` /
``recv_object(src)`` (PyTorch's ``broadcast_object_list`` / ``all_gather_object`` /
``send_object_list`` in functional form: each returns the values). Values are numbers,
strings, bytes, None, lists, tuples, dicts and arrays; anything else is a TypeError unless
``allow_pickle=True`` (on both sides: a receiver without it refuses a pickled payload with a
ValueError instead of unpickling it). When the sender cannot encode its value, the receivers
still complete the exchange and raise the sender's TypeError too, so nobody is left waiting.

Each is one timed operation (``timeout=`` / ``set_timeout``) in the flight recorder: the
payload size is exchanged first, then the bytes.
"""
from __future__ import annotations

import numpy as np

from . import runtime
from .codec import decode, encode, error_payload
from .group import _call, _group, _timeout, peer_rank
from .mpi_types import mpi_view
from .requests import Chain, ProbeRecv


class _Object:
    """What the flight recorder files for an object operation: no shape, dtype "object"."""
    shape = ()
    dtype = "object"


_OBJ = _Object()


def _payload(obj, allow_pickle, op):
    """(payload bytes as a uint8 array, the encoding error or None)."""
    try:
        data, err = encode(obj, allow_pickle, op), None
    except (TypeError, ValueError) as e:
        data, err = error_payload(e), e
    return np.frombuffer(data, np.uint8).copy(), err


def _bytes(buf):
    return [buf, runtime.mpi().BYTE]


def broadcast_object(obj, src=0, group=None, timeout=None, allow_pickle=False):
    """Member ``src``'s ``obj`` on every member of ``group`` (others' ``obj`` is ignored).

    Returns:
        ``obj`` on ``src``; a decoded copy elsewhere.
    Raises:
        TypeError: ``obj`` holds an unsupported type (on every member); ValueError: ``src`` is
        not a rank of the group, or a pickled payload without ``allow_pickle``.
        CollectiveTimeout / RankFailure: as every collective.
    """
    g = _group(group)
    src = peer_rank(g, src, "src", "broadcast_object")
    me = g.rank()
    data, err = _payload(obj, allow_pickle, "broadcast_object") if me == src else (None, None)
    size = np.array([data.size if me == src else 0], np.int64)
    got = {}

    def payload():
        got["buf"] = data if me == src else np.empty(int(size[0]), np.uint8)
        return g.comm.Ibcast(_bytes(got["buf"]), root=src)

    _call("broadcast_object", g, _OBJ, _timeout(g, timeout), False,
          lambda: Chain(lambda: g.comm.Ibcast(mpi_view(size), root=src), payload), lambda: None,
          params={"src": src})
    if me == src:
        if err is not None:
            raise err
        return obj
    return decode(got["buf"], allow_pickle, f"broadcast_object (from rank {src})")


def all_gather_object(obj, group=None, timeout=None, allow_pickle=False):
    """Every member's ``obj``, as a list in group rank order (decoded copies).

    Raises:
        TypeError: some member's object holds an unsupported type (raised on every member,
        naming it); ValueError: a pickled payload without ``allow_pickle``.
        CollectiveTimeout / RankFailure: as every collective.
    """
    g = _group(group)
    n = g.size()
    data, err = _payload(obj, allow_pickle, "all_gather_object")
    mine = np.array([data.size], np.int64)
    sizes = np.empty(n, np.int64)
    got = {}

    def payloads():
        out = got["out"] = np.empty(int(sizes.sum()), np.uint8)
        counts = [int(c) for c in sizes]
        displs = [int(d) for d in np.cumsum([0] + counts[:-1])]
        return g.comm.Iallgatherv(_bytes(data), [out, counts, displs, runtime.mpi().BYTE])

    _call("all_gather_object", g, _OBJ, _timeout(g, timeout), False,
          lambda: Chain(lambda: g.comm.Iallgather(mpi_view(mine), mpi_view(sizes)), payloads),
          lambda: None)
    if err is not None:
        raise err
    out, values, start = got["out"], [], 0
    for k, c in enumerate(sizes):
        values.append(decode(out[start:start + int(c)], allow_pickle,
                             f"all_gather_object (from rank {k})"))
        start += int(c)
    return values


def _object_tag(g, tag, op):
    """Object messages use their own tag range, so an array ``recv`` never matches one."""
    ub = g.comm.Get_attr(runtime.mpi().TAG_UB)
    half = (ub or 32767) // 2
    if isinstance(tag, bool) or not isinstance(tag, (int, np.integer)) or not 0 <= tag < half:
        raise ValueError(f"{op}: tag must be an int in [0, {half}), got {tag!r}")
    return half + int(tag)


def send_object(obj, dst, group=None, tag=0, timeout=None, allow_pickle=False):
    """Sends ``obj`` to member ``dst`` (returns once MPI has taken the message).

    Raises:
        TypeError: ``obj`` holds an unsupported type (the receiver raises it too).
        ValueError: ``dst`` or ``tag`` out of range.
        CollectiveTimeout: not taken within the timeout (the receiver never came).
    """
    g = _group(group)
    dst = peer_rank(g, dst, "dst", "send_object", other=True)
    t = _object_tag(g, tag, "send_object")
    data, err = _payload(obj, allow_pickle, "send_object")
    _call("send_object", g, _OBJ, _timeout(g, timeout), False,
          lambda: g.comm.Isend(_bytes(data), dest=dst, tag=t), lambda: None,
          kind="send", peer=dst, tag=tag)
    if err is not None:
        raise err


def recv_object(src, group=None, tag=0, timeout=None, allow_pickle=False):
    """The object member ``src`` sent with ``send_object`` (and ``tag``).

    Raises:
        ValueError: ``src`` or ``tag`` out of range, or a pickled payload without
            ``allow_pickle`` (refused unread).
        TypeError: the sender could not encode its object.
        CollectiveTimeout: nothing arrived within the timeout.
    """
    g = _group(group)
    src = peer_rank(g, src, "src", "recv_object", other=True)
    t = _object_tag(g, tag, "recv_object")
    req = ProbeRecv(g.comm, src, t)
    _call("recv_object", g, _OBJ, _timeout(g, timeout), False, lambda: req, lambda: None,
          kind="recv", peer=src, tag=tag)
    return decode(req.payload, allow_pickle, f"recv_object (from rank {src})")
