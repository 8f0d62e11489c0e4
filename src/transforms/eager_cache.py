"""Eager transformations that do not re-trace: reuse of derived programs across calls.

Without this, every eager ``grad(f)(x)`` runs ``f`` under the JVP interpreter, partially
evaluates the tangents and transposes them, primitive by primitive, on every call: tens of
microseconds of Python per primitive on top of its kernel. With it, an eager ``grad`` /
``value_and_grad`` / ``vjp`` / ``vmap`` call

1. runs ``f`` once on recording tracers (src/transforms/record.py), which computes nothing and
   costs a few microseconds per primitive: the *recording* of this call;
2. looks the recording up, with the transformation and its static configuration (argnums,
   has_aux, holomorphic, allow_int; in_axes, out_axes, axis_size, axis_name), in a process-wide
   cache of *derived programs* (the gradient / batched Program, staged once, then simplified by
   exact identities, with dead and repeated equations removed and scalar-only equations
   folded: the common passes of src/lowering/pipeline.py, which never change a bit of a
   result);
3. runs the derived program on the call's arguments and on the arrays the recording read from
   outside (closures, globals), so nothing the function reads is ever stale.

Results are bit-identical to the re-tracing path (same primitives, same NumPy kernels, same
order). Python in ``f`` runs exactly once per call, as without the cache, so ``print`` and
other side effects happen on every call.

When the cache is used (otherwise the call takes the re-tracing path, with unchanged results):

* ``starling.config.update("eager_cache", True)`` (the default; ``$STARLING_EAGER_CACHE=0``
  turns it off, ``=first`` derives on the first sighting, which tests use), outside any
  transformation or inside the recording of another eager cached
  transformation (``vmap(grad(f))``, ``grad(grad(f))``); never under ``debug_mode`` (which
  records the primitives the re-tracing path executes), jvp, linearize, compile or make_ir;
* every transformed argument leaf is a plain Array (or a NumPy array / Python scalar); sharded
  arrays and arrays read from outside that are sharded take the re-tracing path;
* the recording did not read an array's value (``bool(x)``, ``float(x)``, ``np.asarray(x)``,
  ``if x > 0:``): such a value is computed on demand, so the function sees the same values as
  without the cache, but that call is re-traced (from its recording: ``f`` is not run twice),
  and later calls of the same function code are re-traced without recording;
* custom_jvp rules with ``symbolic_zeros=True``, and custom rules that read a tangent's or
  cotangent's value, make the call re-traced;
* the same recording (same primitives, params, shapes, dtypes, weak types, Python scalar values,
  custom rules, output structure) was seen before: the first sighting is re-traced, so a
  program seen once costs no derivation; the second derives and caches it.

Semantics that differ from the re-tracing path, deliberately: custom rule bodies (custom_jvp
rules, custom_vjp fwd / bwd) are traced while recording each call, so their Python runs once per
call even where the re-tracing path would not run them (under vmap), and once more on a
re-traced call; a traced value printed with ``print(x)`` shows a RecordTracer.

``stats()`` counts hits, derivations and re-traced calls (with the reason); ``clear()`` empties
the cache. The cache holds at most ``MAX_ENTRIES`` derived programs (least recently used first
out); they hold no argument arrays.
"""
from __future__ import annotations

import collections
import functools
import os
import threading

from ..arrays.array import Array, wrap
from ..core.ir import Literal
from ..core.primitive import Primitive
from ..core.trace import EVAL_TRACE, current_trace, new_trace, set_current_trace
from ..lowering.passes.constant_folding import constant_folding
from ..lowering.passes.cse import cse
from ..lowering.passes.dce import dce
from ..lowering.passes.simplify import simplify
from .record import RecordTrace, RecordTracer, Retrace, fingerprint, record, replay

MAX_ENTRIES = 256
_RETRACE_MAX = 1024

_MODE = os.environ.get("STARLING_EAGER_CACHE", "1").lower()
_enabled = [_MODE not in ("0", "false", "off")]
# "first": derive on the first sighting (tests run every eager call through derived programs)
_derive_first = [_MODE == "first"]
_lock = threading.Lock()
_derived = collections.OrderedDict()   # key -> Derived, or None when deriving failed
_seen = collections.OrderedDict()      # keys seen once (not derived yet)
_retrace = collections.OrderedDict()   # code keys of functions that read values
_stats = collections.Counter()


def set_enabled(value: bool) -> None:
    """Turns the cache on or off for the whole process (``starling.config`` "eager_cache")."""
    if not isinstance(value, bool):
        raise TypeError(f"starling.config eager_cache: expected a bool, got {value!r}")
    _enabled[0] = value


def is_enabled() -> bool:
    """True when the eager cache is on (``starling.config`` "eager_cache", ``set_enabled``)."""
    return _enabled[0]


def stats() -> dict:
    """Counters: ``hit``, ``derived``, ``first_sighting``, ``retraced:<reason>``..."""
    return dict(_stats)


def clear() -> None:
    """Empties the cache of derived programs and the memory of re-traced functions."""
    with _lock:
        _derived.clear()
        _seen.clear()
        _retrace.clear()
        _stats.clear()


def applies(fun, leaves) -> bool:
    """Whether an eager transformation of ``fun`` on these argument leaves records and reuses
    (see module docstring); leaves are Arrays or tracers after ``operand``."""
    if not _enabled[0]:
        return False
    trace = current_trace()
    if trace is not EVAL_TRACE and type(trace) is not RecordTrace:
        return False
    for x in leaves:
        if type(x) is not Array and not isinstance(x, RecordTracer):
            return False
    return _code_key(fun) not in _retrace


def _code_key(fun):
    """What identifies a function's code across re-created closures (a lambda made anew per
    call, a functools.partial, a bound method, the wrappers of grad / vmap)."""
    parts = []
    for _ in range(8):
        if isinstance(fun, functools.partial):
            fun = fun.func
            continue
        inner = getattr(fun, "__func__", None)
        code = getattr(inner or fun, "__code__", None)
        if code is None:
            parts.append(type(fun))
            break
        parts.append(code)
        fun = getattr(inner or fun, "__wrapped__", None)
        if fun is None:
            break
    return tuple(parts)


def record_call(fun, body, avals, values):
    """``record`` (src/transforms/record.py) of one call of ``fun``, or None when the call must
    be re-traced because the recording failed for want of a value that re-tracing has (say, a
    loop's trip count under vmap); ``fun``'s code is then re-traced from now on."""
    try:
        return record(body, avals, values)
    except Retrace:
        _note_retrace(fun)
        _stats["retraced:missing value"] += 1
        return None


class Derived:
    """Derived programs of one recording, and the facts the caller needs to use them."""

    __slots__ = ("progs", "info", "plans")

    def __init__(self, progs, info):
        self.progs = progs
        self.info = info
        self.plans = [None] * len(progs)


def lookup(fun, key, rec, derive):
    """The Derived for recording ``rec`` under transformation ``key``, or None when this call
    must be re-traced (the reason is counted). ``derive()`` makes it: called on the second
    sighting of a recording; if it raises, the call is re-traced (which raises genuine errors
    the way the re-tracing path always did) and the recording is not derived again."""
    if rec.read_values:
        _note_retrace(fun)
        _stats["retraced:read_values"] += 1
        return None
    if not rec.reusable:
        _stats["retraced:" + (rec.uncacheable or "sharded or eager-dispatched values")] += 1
        return None
    try:
        full = _Key((key, rec.fingerprint()))
    except TypeError:   # an unhashable static configuration or param
        _stats["retraced:unhashable"] += 1
        return None
    with _lock:
        if full in _derived:
            entry = _derived[full]
            _derived.move_to_end(full)
            if entry is None:
                _stats["retraced:not derivable"] += 1
            else:
                _stats["hit"] += 1
            return entry
        if full not in _seen and not _derive_first[0]:
            _seen[full] = None
            if len(_seen) > MAX_ENTRIES:
                _seen.popitem(last=False)
            _stats["first_sighting"] += 1
            return None
    try:
        entry = derive()
    except Exception:  # noqa: BLE001  (re-tracing this call raises it again if it is genuine)
        entry = None
    with _lock:
        _seen.pop(full, None)
        _derived[full] = entry
        if len(_derived) > MAX_ENTRIES:
            _derived.popitem(last=False)
    _stats["derived" if entry is not None else "retraced:not derivable"] += 1
    return entry


class _Key:
    """A cache key whose (deep) hash is computed once."""

    __slots__ = ("key", "hash")

    def __init__(self, key):
        self.key = key
        self.hash = hash(key)

    def __hash__(self):
        return self.hash

    def __eq__(self, other):
        return self.hash == other.hash and self.key == other.key


def _note_retrace(fun):
    with _lock:
        _retrace[_code_key(fun)] = None
        if len(_retrace) > _RETRACE_MAX:
            _retrace.popitem(last=False)


def derive_program(flat_fun, avals):
    """Stages ``flat_fun`` (flat list in, flat list out) into an optimised Program. Staged on a
    recording trace, so custom rules a transformation hands on (vmap of a custom_jvp function)
    stay call records that a later transformation of the derived program still applies."""
    with set_current_trace(EVAL_TRACE), new_trace(RecordTrace) as trace:
        tracers = [trace.new_arg(a) for a in avals]
        outs = flat_fun(*tracers)
        prog = trace.to_program(tracers, outs)
    for p in (constant_folding, simplify, cse, dce):
        prog = p(prog)
    return prog


def run(derived, i, inputs):
    """Runs ``derived.progs[i]``: eagerly through its plan of NumPy calls, or by binding its
    equations under the current trace (the recording of an enclosing eager transformation)."""
    prog = derived.progs[i]
    if current_trace() is EVAL_TRACE:
        plan = derived.plans[i]
        if plan is None:
            plan = derived.plans[i] = _Plan.of(prog)
        if plan is not False:
            return plan(inputs)
    return replay(prog, prog.consts, inputs)


class _Plan:
    """A derived Program as a flat list of NumPy calls on buffers: per equation exactly what
    EvalTrace.process_primitive does for plain Arrays (``impl`` on the buffers, ``weak_type``
    on the weak flags), without dispatching through ``bind`` and wrapping every intermediate
    in an Array. Only made for programs whose inputs and constants are plain Arrays (see
    ``applies`` and ``Recording.reusable``), where that is all the eval trace does."""

    __slots__ = ("steps", "n_slots", "fixed", "outs")

    @classmethod
    def of(cls, prog):
        """The plan of ``prog``, or False when an equation needs the trace machinery (a call
        record, a primitive running itself eagerly or with a bind of its own), has no NumPy
        implementation, or a constant is not a plain Array (what EvalTrace.process_primitive
        reads directly)."""
        if any(type(c) is not Array for c in prog.consts):
            return False
        for e in prog.eqns:
            p = e.primitive
            if (p.impl is None or p.eager is not None or p.meta.get("applied")
                    or type(p).bind is not Primitive.bind):   # a bind of its own (custom calls)
                return False
        return cls(prog)

    def __init__(self, prog):
        slots = {v: i for i, v in enumerate(prog.invars)}
        fixed = []   # (slot, Array): consts and literals

        def slot(v):
            if type(v) is Literal:
                fixed.append((len(slots) + len(fixed), wrap(v.val, v.aval.weak_type)))
                return fixed[-1][0]
            return slots[v]

        for v, c in zip(prog.constvars, prog.consts):
            slots[v] = len(slots) + len(fixed)
            fixed.append((slots[v], c))
        steps = []
        for e in prog.eqns:
            ins = tuple(slot(v) for v in e.invars)
            outs = []
            for v in e.outvars:
                slots[v] = len(slots) + len(fixed)
                outs.append(slots[v])
            p = e.primitive
            steps.append((p.impl, e.params, p.weak_type, ins, tuple(outs), p.multiple_results))
        self.outs = tuple(slot(v) for v in prog.outvars)
        self.n_slots = len(slots) + len(fixed)
        self.fixed = fixed
        self.steps = steps

    def __call__(self, inputs):
        arrays = [None] * self.n_slots   # the Arrays given or returned (kept: same objects)
        bufs = [None] * self.n_slots
        weak = [False] * self.n_slots
        for i, a in enumerate(inputs):
            arrays[i], bufs[i], weak[i] = a, a._buf, a._weak
        for i, a in self.fixed:
            arrays[i], bufs[i], weak[i] = a, a._buf, a._weak
        for impl, params, weak_type, ins, outs, multiple in self.steps:
            out = impl(*[bufs[j] for j in ins], **params)
            w = weak_type(*[weak[j] for j in ins], **params)
            if multiple:
                ws = [w] * len(outs) if type(w) is bool else w
                for j, o, wj in zip(outs, out, ws):
                    bufs[j], weak[j] = o, wj
            else:
                bufs[outs[0]], weak[outs[0]] = out, w
        return [arrays[j] if arrays[j] is not None else wrap(bufs[j], weak[j])
                for j in self.outs]


__all__ = ["applies", "clear", "derive_program", "fingerprint", "is_enabled", "lookup",
           "record_call", "run", "set_enabled", "stats", "Derived"]
