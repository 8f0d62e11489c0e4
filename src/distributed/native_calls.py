"""Blocking eager collectives run from C++ (native/mpi_calls.h): the common case of a training
loop's gradient all-reduce, without a timeout and not ``async_op``.

A 1 MiB all_gather on two ranks takes ~190 us in MPI; the transfer empties the caches, and the
Python bookkeeping around it then costs several times what it costs in a tight loop: the
flight record, the arrival board and the agreement check took 45-60 us in Python. A ``Plan``,
made once per distinct call of a communicator, does them in one native call: the board write,
the native flight record (native/flight_ring.h), the agreement check's all-reduce and the
collective, with the GIL released while MPI runs. What each step means and guarantees is the
Python path's (src/distributed/failures.py, agreement.py, arrival.py); a mismatch or an MPI
error comes back to Python and is reported exactly as there.

The functions are looked up in the libmpi that mpi4py loaded (its path from the process's
memory map); the handles are Open MPI's. Elsewhere (another MPI, no /proc, a count beyond
2**31 - 1 elements) and with ``STARLING_MPI_NATIVE=0`` every call takes the Python path.
"""
from __future__ import annotations

import os

from .. import _native
from . import arrival, flight_recorder as fr, runtime
from .agreement import disagreement
from .failures import _ABANDONED, _reap, mpi_error
from .hooks import _GLOBAL as _HOOKS
from .mpi_types import mpi_datatype, result_allocator

ALLREDUCE, ALLGATHER, REDUCE_SCATTER_BLOCK, ALLTOALL, BCAST = range(5)
_STATE: list = []   # [True] bound, [False] unavailable; empty: not tried yet
_LIBRARY: list = []  # the same for the library binding alone (``bound``)
_PLAN_LIMIT = 4096  # plans per communicator (as CallSpecs: a runaway variety must not grow)


def available() -> bool:
    """True when blocking collectives run natively (Open MPI's libmpi found and bound, and
    ``$STARLING_MPI_NATIVE`` is not 0)."""
    if not _STATE:
        _STATE.append(os.environ.get("STARLING_MPI_NATIVE", "1") != "0" and bound())
    return _STATE[0]


def bound() -> bool:
    """True when the native MPI functions are bound to the libmpi mpi4py loaded (Open MPI):
    what native collectives and native reduce ops (mpi_types.mpi_op) need."""
    if not _LIBRARY:
        _LIBRARY.append(_bind())
    return _LIBRARY[0]


def _bind() -> bool:
    MPI = runtime.mpi()
    if not MPI.Get_library_version().startswith("Open MPI") or \
            not hasattr(MPI.Comm, "handle"):   # the handles as integers (mpi4py >= 4.0)
        return False
    try:
        with open("/proc/self/maps") as maps:
            # the path is the sixth field and may hold spaces
            paths = {line.split(maxsplit=5)[5].rstrip("\n") for line in maps
                     if "/libmpi.so" in line}
    except OSError:
        return False
    return len(paths) == 1 and _native.mpi_bind(paths.pop()) == ""


def run(op, group, spec, x, arg, kind, send, out, mop=None, root=0) -> bool:
    """Runs collective ``op`` of ``group`` (its CallSpec ``spec``, input ``x``) natively:
    ``kind`` (ALLREDUCE...) from ``send`` to ``out`` (NumPy, C-contiguous), ``mop`` the MPI op
    of a reduction, ``root`` a broadcast's source. False (nothing done) when it cannot run
    natively. When ``send`` is ``x`` the call is kept for ``replay`` under ``arg`` (the op's
    argument that is not in the input: a reduce op, a source; or None).

    Raises:
        ValueError: the members' calls differ (agreement.py). RankFailure: a member failed.
        mpi4py's MPI.Exception: another MPI error.
    """
    track = group.track
    got = track.plans.get(spec)
    if got is None:
        got = _plan(op, group, spec, kind, send, out, mop, root)
        if got is None:
            return False
        _keep(track.plans, spec, got)
        if send is x:
            _keep(track.replays, (op, x.shape, x.dtype, arg),
                  got + (result_allocator(out.shape, out.dtype), spec))
    _run(op, group, spec, got, send, out)
    return True


def replay(op, group, x, arg, timeout, async_op):
    """The result buffer of collective ``op`` of ``group`` on input ``x`` (C-contiguous NumPy)
    with argument ``arg``, when it is blocking (no ``timeout``, not ``async_op``), a call with
    the same signature ran natively before (``run``) and no collective hooks are registered;
    else None (nothing done): the path of a training loop's repeated blocking collective, from
    the call's arguments straight to the native plan.

    Raises:
        as ``run``.
    """
    if timeout is not None or async_op:
        return None
    got = group.track.replays.get((op, x.shape, x.dtype, arg))
    if got is None or _HOOKS["pre"] or _HOOKS["post"] or group.pre_hooks or group.post_hooks:
        return None
    out = got[2]()
    _run(op, group, got[3], got, x, out)
    return out


def _keep(cache, key, value):
    if len(cache) >= _PLAN_LIMIT:
        cache.clear()
    cache[key] = value


def _run(op, group, spec, got, send, out):
    if _ABANDONED:
        _reap()
    track = group.track
    seq = track.seq
    track.seq = seq + 1
    r = got[0].run(send, out, seq)
    if r:
        _failed(op, group, spec, got[1], r, seq)


def _plan(op, group, spec, kind, send, out, mop, root):
    """(native plan, flight-recorder template handle: kept with the plan, see fr.template) of
    a call, or None when it cannot run natively."""
    if not available():
        return None
    MPI = runtime.mpi()
    dtype = mpi_datatype(send.dtype)
    count = {ALLREDUCE: send.size, ALLGATHER: send.size, REDUCE_SCATTER_BLOCK: out.size,
             ALLTOALL: send.size // max(group.size(), 1), BCAST: out.size}[kind]
    if count >= 1 << 31:   # MPI's int counts; mpi4py switches to the large-count calls
        return None
    track = group.track
    b = arrival.board()
    word = -1 if b is None or track.slot is None else arrival.slot_word(track.slot)
    me = fr.process_participant() or fr.participant(runtime.get_rank())
    # keyed by value: a CallSpec made again (its cache cleared) reuses its template
    tmpl = fr.template((me, track.uid, spec.fingerprint, spec.description), op, me, track.uid,
                       track.names, spec.shape, spec.dtype, source="mpi", params=spec.params)
    plan = _native.MpiPlan(kind, group.comm.handle, dtype.handle,
                           mop.handle if mop is not None else 0, count, root,
                           kind == BCAST and group.rank() == root, send.nbytes,
                           out.nbytes, int(spec.check[0]), MPI.INT64_T.handle, MPI.MAX.handle,
                           word, track.key, spec.fingerprint, tmpl.id)
    return plan, tmpl


def _failed(op, group, spec, tmpl, result, seq):
    """Reports a native call that did not complete (``result``: (code, record index)) as the
    Python path does: its record moves to the Python ring and ends with the error."""
    code, index = result
    rec = fr.OpRecord(op, fr.adopt(index, tmpl.id, seq), group.track, seq, spec.fingerprint,
                      "collective", None)
    MPI = runtime.mpi()
    if code == _native.MPI_MISMATCH:
        try:
            err = disagreement(spec, group)
        except MPI.Exception as e:   # a member failed while the descriptions were gathered
            raise mpi_error(rec, group.comm, e) from None
        fr.end(rec, "error", err)
        raise err
    raise mpi_error(rec, group.comm, MPI.Exception(code))
