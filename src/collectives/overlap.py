"""Overlapping collectives with compute in per-device programs.

The pass ``overlap_collectives`` rewrites each communicating collective of a per-device Program
(all_reduce, all_gather, reduce_scatter, all_to_all, ppermute) into

    token = collective_start[collective=..., params=...] x      placed right after x is defined
    y     = collective_wait[...] token x                        placed right before y's first use

so the device keeps computing what does not depend on ``y`` while the bytes move (as Inductor's
reorder-for-overlap and XLA's async collectives do). ``collective_start`` hands the collective to
the device's communication thread (``AsyncComm`` below): one per device, running the device's
collectives in program order, so every device issues them in the same order and rendezvous /
MPI message matching is unchanged. ``collective_wait`` also takes ``x``, which keeps its buffer
alive (no in-place reuse by a later kernel) until the collective has read it.

Only top-level equations are moved; collectives inside control-flow bodies stay synchronous.
"""
from __future__ import annotations

import itertools
import queue
import threading
from concurrent.futures import Future

import numpy as np

from ..core import dtypes
from ..core.avals import ShapedArray
from ..core.ir import Equation, Literal, Program, Var
from ..core.primitive import Primitive
from .primitives import (all_gather_p, all_reduce_p, all_to_all_p, ppermute_p,
                         reduce_scatter_p)
from .runtime.context import current_spmd

# collective primitive -> the communicator method and how its params map to the method's args
_METHODS = {
    all_reduce_p: ("all_reduce", lambda p: (p["axes"], p["op"])),
    all_gather_p: ("all_gather", lambda p: (p["axes"], p["axis"], p["tiled"])),
    reduce_scatter_p: ("reduce_scatter", lambda p: (p["axes"], p["op"], p["dim"], p["tiled"])),
    all_to_all_p: ("all_to_all", lambda p: (p["axes"], p["split_axis"], p["concat_axis"],
                                            p["tiled"])),
    ppermute_p: ("ppermute", lambda p: (p["axes"], p["perm"])),
}
_TOKEN = ShapedArray((), dtypes.int64)
_INLINE_BYTES = 1 << 16   # collectives of at most this many bytes per device skip the thread

collective_start_p = Primitive("collective_start", family="collectives")
collective_wait_p = Primitive("collective_wait", family="collectives")
for _p in (collective_start_p, collective_wait_p):
    _p.meta["effectful"] = True
    _p.meta["lowering_only"] = "per-device schedules after partitioning; never transformed"
del _p


def _start_impl(x, *, collective, params):
    ctx = current_spmd()
    if ctx is None:   # (only reachable by running a per-device program outside SPMD execution)
        raise ValueError(f"{collective.name}: started outside a device's computation")
    comm = AsyncComm.of(ctx.device)
    x = np.asarray(x)
    if x.nbytes <= _INLINE_BYTES and comm.idle():
        # too small for overlap to pay for two thread hand-offs (~50 us each in CPython): run
        # it here; order is kept, as nothing this device started earlier is still in flight
        fut = Future()
        try:
            fut.set_result(collective.impl(x, **params))
        except BaseException as e:   # delivered by collective_wait, as from the thread
            fut.set_exception(e)
    else:
        fut = comm.submit(ctx, lambda: collective.impl(x, **params))
    return np.int64(comm.park(fut))


def _wait_impl(token, x, *, aval):
    return np.asarray(AsyncComm.of(current_spmd().device).claim(int(token)).result())


collective_start_p.impl = _start_impl
collective_start_p.abstract_eval = lambda x, *, collective, params: _TOKEN
collective_wait_p.impl = _wait_impl
collective_wait_p.abstract_eval = lambda token, x, *, aval: aval
collective_wait_p.weak_type = lambda wt, wx, *, aval: aval.weak_type


class AsyncComm:
    """The communication thread of one device: runs the collectives submitted to it in order,
    each in the SPMD context of its run; ``park`` / ``claim`` hand their futures from start to
    wait by token."""

    _ALL: dict = {}
    _LOCK = threading.Lock()

    def __init__(self, device):
        self.q = queue.SimpleQueue()
        self.pending = {}
        self.last = None   # the newest submitted future
        self.tokens = itertools.count()
        self.thread = threading.Thread(target=self._loop, daemon=True,
                                       name=f"starling-comm-{device}")
        self.thread.start()

    @classmethod
    def of(cls, device):
        comm = cls._ALL.get(device)
        if comm is None:
            with cls._LOCK:
                comm = cls._ALL.get(device)
                if comm is None:
                    comm = cls._ALL[device] = cls(device)
        return comm

    def _loop(self):
        from .runtime.context import reset_spmd, set_spmd
        while True:
            ctx, fn, fut = self.q.get()
            if not fut.set_running_or_notify_cancel():
                continue
            token = set_spmd(ctx)
            try:
                fut.set_result(fn())
            except BaseException as e:   # delivered by collective_wait
                fut.set_exception(e)
            finally:
                reset_spmd(token)

    def submit(self, ctx, fn):
        fut = self.last = Future()
        self.q.put((ctx, fn, fut))
        return fut

    def idle(self) -> bool:
        """Whether every collective submitted to the thread has finished."""
        return self.last is None or self.last.done()

    def park(self, fut) -> int:
        t = next(self.tokens)
        self.pending[t] = fut
        return t

    def claim(self, t):
        return self.pending.pop(t)


def overlap_collectives(prog: Program) -> Program:
    """``prog`` with each top-level communicating collective split into start / wait, the start
    as early and the wait as late as the data allow (see module docstring)."""
    eqns = list(prog.eqns)
    if not any(e.primitive in _METHODS for e in eqns):
        return prog
    first_use = {}
    for i, e in enumerate(eqns):
        for v in e.invars:
            if isinstance(v, Var):
                first_use.setdefault(v, i)
    for v in prog.outvars:
        if isinstance(v, Var):
            first_use.setdefault(v, len(eqns))
    # where each value becomes available: its producer's position, or for a collective's
    # result the position of its wait
    avail = {v: -1 for v in list(prog.constvars) + list(prog.invars)}
    # (position, kind, original index, equation): at one position the waits come first (kind
    # 0), then the ordinary equation (1), then the starts of what it produced (2)
    placed = []
    for i, e in enumerate(eqns):
        if e.primitive not in _METHODS:
            placed.append((i, 1, i, e))
            for v in e.outvars:
                avail[v] = i
            continue
        x, out = e.invars[0], e.outvars[0]
        token = Var(_TOKEN)
        start_at = -1 if isinstance(x, Literal) else avail[x]
        use_at = first_use.get(out, len(eqns))
        avail[out] = use_at
        placed.append((start_at, 2, i, Equation(collective_start_p, [x], [token],
                                                dict(collective=e.primitive, params=e.params))))
        placed.append((use_at, 0, i, Equation(collective_wait_p, [token, x], [out],
                                              dict(aval=out.aval))))
    placed.sort(key=lambda t: (t[0], t[1], t[2]))
    return Program(prog.constvars, prog.consts, prog.invars, [t[3] for t in placed],
                   prog.outvars, prog.effects)
