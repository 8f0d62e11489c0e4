"""Checks that the members of an eager collective, and the two ends of a message, agree on
what they pass: MPI moves bytes, so a shape or dtype that differs between ranks gives a wrong
result or a raw truncation error, never a clear one.

* Collectives: before the payload, one all-reduce of a 56-bit fingerprint of ``(op, params,
  dtype, shape)`` (its maximum and the maximum of its negation: equal fingerprints everywhere
  iff max == -max(-h)); on a difference every member gathers the others' descriptions and raises
  the same ValueError naming each rank's call.
* Messages: ``send`` passes a header (dtype name and shape) on a duplicate of the group's
  communicator with the same tag, so the k-th header pairs with the k-th payload; ``recv``
  compares it with what it was asked to receive before receiving the payload.

A collective pays one extra small all-reduce (a few microseconds), a message one small extra
message; the fingerprint is worked out once per distinct call (src/distributed/callspec.py).
Blocking collectives run from C++ (src/distributed/native_calls.py) make the same check there
(native/mpi_calls.cpp) and come back for ``disagreement`` when it fails.
Collectives under a timeout (``set_timeout`` / ``timeout=``) and asynchronous ones
(``async_op=True``: their ``Work.wait`` may time out) are not checked: one given up on must
remain a single MPI operation that late members still complete (src/distributed/failures.py);
the flight recorder's compare tool finds mismatches there.
"""
from __future__ import annotations

import numpy as np

from . import flight_recorder, runtime
from .callspec import CallSpec
from .requests import Chain, Requests

_HEADER = 24   # int64 words: dtype name (16 bytes), ndim, up to 21 dims


def check(spec, group):
    """The agreement check of a collective of ``group`` whose CallSpec is ``spec``
    (src/distributed/callspec.py: the hash of what this member passes; see module docstring):
    one blocking all-reduce, run just before the collective itself.

    Raises:
        ValueError: the members passed different shapes, dtypes or arguments (names each
            rank's call, on every member).
    """
    got = np.empty(2, np.int64)
    group.comm.Allreduce(spec.check, got, op=runtime.mpi().MAX)
    # every member passed [h, -h] iff the maxima are this member's own [h, -h]
    if got.tobytes() != spec.check_bytes:
        raise disagreement(spec, group)


def disagreement(spec, group) -> ValueError:
    """The error of an agreement check that failed (every member of ``group`` calls this after
    its check failed: it gathers the members' descriptions of their calls)."""
    calls = group.comm.allgather(spec.description)
    return ValueError(
        f"{spec.op}: the members of group {group.name} (world ranks {group.ranks}) "
        "called it with different shapes, dtypes or arguments: " +
        "; ".join(f"rank {r}: {c}" for r, c in enumerate(calls)) +
        "; every member must pass the same")


def refuse(op, group, x, error, why="refused_by_pre_hook"):
    """Takes part in the agreement check of collective ``op`` (input ``x``) that this member
    refused with ``error`` (``why``, named in the others' error): its pre hook raised it
    (src/distributed/hooks.py), or its arguments are invalid here ("invalid_arguments": e.g. a
    dim 0 that the group size does not divide on this member only). The other members' check
    then fails with a ValueError naming the refusal instead of their ``op`` waiting for this
    member forever or pairing with its next collective (a wrong result, then a hang). Returns
    normally; the caller raises ``error``. When every member refused with the same error, the
    checks agree and nobody starts the collective."""
    text = f"{type(error).__name__}: {error}"[:200]
    try:
        shape, dtype = tuple(np.shape(x)), np.asarray(x).dtype
    except Exception:   # an operand NumPy cannot read: the refusal is named all the same
        shape, dtype = (), np.dtype(object)
    spec = CallSpec(op, shape, dtype, {why: text})
    # recorded as the others record their failed check: the members' sequence numbers (and
    # with them the flight recorder's comparison and the arrival board) stay in step
    rec = flight_recorder.begin(op, group.comm, spec=spec, track=group.track)
    try:
        check(spec, group)
    except Exception:   # the others' calls differ (they raise the ValueError), or a peer failed
        pass            # (the next collective reports it): this member raises ``error``
    flight_recorder.end(rec, "error", error)


def header_comm(comm):
    """The communicator of message headers beside ``comm``: a duplicate (errors returned). Made
    when a group is made or remade (a collective over its members, as the group's creation is):
    made lazily by the first send / recv it would be a collective among only two of them (and
    a hidden one, outside the message's timeout)."""
    dup = comm.Dup()
    dup.Set_errhandler(runtime.mpi().ERRORS_RETURN)
    return dup


def _header_comm(group):
    comm = getattr(group, "_header_comm", None)
    if comm is None or comm.py2f() == runtime.mpi().COMM_NULL.py2f():
        raise ValueError(f"send / recv: group {group.name} takes no messages (a group of an "
                         f"SPMD mesh); make one with new_group(ranks)")
    return comm


def header(x) -> np.ndarray:
    """The message header of ``x``: its dtype name and shape as int64 words."""
    shape = np.shape(x)
    if len(shape) > _HEADER - 3:
        raise ValueError(f"send: arrays of more than {_HEADER - 3} dims are not supported, got "
                         f"shape {shape}")
    h = np.zeros(_HEADER, np.int64)
    name = np.dtype(x.dtype).name.encode()[:16].ljust(16, b"\0")
    h[:2] = np.frombuffer(name, np.int64)
    h[2] = len(shape)
    h[3:3 + len(shape)] = shape
    return h


def _unpack(h):
    name = h[:2].tobytes().rstrip(b"\0").decode(errors="replace")
    return name, tuple(int(d) for d in h[3:3 + int(h[2])])


def send_with_header(group, x, dst, tag, start_payload):
    """The request of the header and the payload (``start_payload()``) of a message."""
    h = header(x)
    hreq = _header_comm(group).Isend(h, dest=dst, tag=tag)
    return Requests([hreq, start_payload()])


def recv_checked(group, out, src, tag, start_payload):
    """A request receiving the header, checking it against ``out`` and then the payload.

    Raises (from the request):
        ValueError: the sender sent another dtype or shape (names both).
    """
    h = np.empty(_HEADER, np.int64)

    def verify_then_payload():
        name, shape = _unpack(h)
        want = (np.dtype(out.dtype).name, tuple(out.shape))
        if (name, shape) != want:
            _discard(group, src, tag)   # the next recv must pair with the next message
            raise ValueError(f"recv: rank {src} of group {group.name} sent {name}{list(shape)}, "
                             f"but this rank receives {want[0]}{list(want[1])}; send and recv "
                             "must agree on the dtype and shape")
        return start_payload()
    return Chain(lambda: _header_comm(group).Irecv(h, source=src, tag=tag), verify_then_payload)


def _discard(group, src, tag):
    """Receives and drops the payload of the message whose header did not match."""
    MPI = runtime.mpi()
    status = MPI.Status()
    group.comm.Probe(source=src, tag=tag, status=status)
    scratch = np.empty(status.Get_count(MPI.BYTE), np.uint8)
    group.comm.Recv([scratch, MPI.BYTE], source=src, tag=tag)
