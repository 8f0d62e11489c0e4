"""Recording one call of a function: the Program of primitives it binds, made on every call.

The eager transformations reuse derived programs (src/transforms/eager_cache.py). To know, on
each call, that a derived program still computes what the function computes *now*, they run the
function once on ``RecordTracer``s: a staging trace that records every primitive it is given
(nothing is computed) into a ``Recording``. The recording is a plain Program except for
*call records*: custom_jvp / custom_vjp / checkpoint calls keep their structure (the function's
Program and, for custom rules, the rule's Program, traced at the same time, their closed-over
arrays hoisted into operands) so that the transformations applied later see the rules.

What a recording captures, and so what ``fingerprint`` compares:
* the primitives, their params and how values flow between them (sub-Programs structurally);
* the shapes, dtypes and weak types of the inputs and of the arrays read from outside
  (closures, globals, arrays made from NumPy data), but not those arrays' values: they are the
  recording's ``consts``, handed to the derived program on every call, so a closure over an
  array that changed between calls is never stale;
* Python scalars (and 0-d arrays read from outside) as Literals, by value and dtype;
* custom rules by their own recorded Programs (their closed-over arrays are consts too);
  checkpoint policies and any other Python object in params by identity.

A custom_jvp / custom_vjp call inside a staged body (cond, scan, while...) is staged with its
rules as live Python functions (src/transforms/custom.py), whose closures a recording cannot
see: such a recording is ``uncacheable``, and its calls are re-traced.

Values are read on demand: a RecordTracer asked for its concrete value (``bool``, ``float``,
``np.asarray``, ``if x > 0:``) evaluates the recorded equations it depends on, from the call's
input values, and the recording is marked ``read_values``: its structure may depend on those
values, so the caller must not reuse a program derived from another call for it. A value the
recording does not have (an input mapped by vmap, a tangent inside a custom rule) raises
``NoValue``, a ConcretizationError, as it would without the cache.
"""
from __future__ import annotations

import numpy as np

from .. import tree as tree_util
from ..arrays.array import Array, wrap
from ..arrays.convert import operand
from ..core.ad_util import Zero, tangent_aval
from ..core.ir import (Equation, Literal, Program, Var, eval_program, is_custom_call,
                       subprograms)
from ..core.primitive import Primitive
from ..core.trace import (EVAL_TRACE, ConcretizationError, Tracer, new_trace,
                          set_current_trace)
from .checkpoint import checkpoint_call
from .custom import custom_jvp_call, custom_vjp_call
from .stage import StagingTrace, StagingTracer


class NoValue(ConcretizationError):
    """A recorded value was read that this call does not have (a vmapped input, a tangent or
    cotangent inside a custom rule)."""


class Retrace(Exception):
    """The recording failed after reading a value it does not have: the transformation must
    run the function itself (the re-tracing path), where that value may exist."""


# A call record: params ``kind`` ("custom_jvp" | "custom_vjp" | "checkpoint"), ``progs`` (the
# function's Program, then the rule Programs, each with its consts hoisted into leading invars),
# ``splits`` (number of call arguments, then each Program's const count), ``static`` (hashable
# facts of the rules) and ``_live`` (this call's callables, for re-tracing this call; left out
# of fingerprints). It never binds: ``replay`` applies it.
call_record_p = Primitive("call_record", multiple_results=True, family="autodiff")
call_record_p.meta["applied"] = True
call_record_p.meta["never_bound"] = "a recording's note of a custom call, applied by replay"


class _Live:
    """This call's custom-rule callables. Equal to every other _Live: fingerprints skip it."""

    __slots__ = ("fun", "rules")

    def __init__(self, fun, *rules):
        self.fun = fun
        self.rules = rules


class RecordTracer(StagingTracer):
    """A recorded value; ``to_concrete`` computes it from the call's inputs (see module doc)."""

    __slots__ = ()

    def to_concrete(self):
        self._trace.check_valid(self)
        return self._trace.concrete(self.var)


class RecordTrace(StagingTrace):
    """Records primitives (StagingTrace) and evaluates recorded values when they are read."""

    tracer_type = RecordTracer

    def __init__(self, parent, inline_calls=False):
        super().__init__(parent)
        # Inside a custom rule, custom calls and checkpoints run inline: a derived program only
        # ever applies a rule on a partial-evaluation trace, which runs them inline too (and a
        # rule calling its own function would otherwise be recorded without end).
        self.inline_calls = inline_calls
        self.in_values = {}     # invar -> the call's value (Array or an outer trace's tracer)
        self.values = {}        # Var -> concrete Array, filled when values are read
        self.producer = {}      # Var -> index of the equation defining it (built on demand)
        self.read_values = False
        self.missing_value = False
        self.uncacheable = None  # why a program derived from this recording must not be reused

    def new_args(self, avals, values):
        """Input tracers; ``values[i]`` is input i's value for this call, or None (none)."""
        tracers = [self.new_arg(a) for a in avals]
        for t, v in zip(tracers, values):
            if v is not None:
                self.in_values[t.var] = v
        return tracers

    # ---- reading values --------------------------------------------------------------------
    def concrete(self, var):
        """The concrete Array of recorded ``var``, computed from the call's inputs."""
        self.read_values = True
        if var not in self.values:
            self._evaluate(var)
        return self.values[var]

    def _evaluate(self, target):
        consts = dict(zip(self.const_list, self.const_vals))
        for i in range(len(self.producer), len(self.eqns)):
            for v in self.eqns[i].outvars:
                self.producer[v] = i
        stack = [target]
        while stack:   # demand-driven, iterative: only what ``target`` depends on is computed
            var = stack[-1]
            if var in self.values:
                stack.pop()
                continue
            if var in consts or var in self.in_values:
                src = consts[var] if var in consts else self.in_values[var]
                self.values[var] = src if type(src) is Array else _concrete_of(src)
                stack.pop()
                continue
            idx = self.producer.get(var)
            if idx is None:
                self.missing_value = True
                self.uncacheable = "it read a value this call does not have"
                raise NoValue(
                    f"a traced value {var.aval.str_short()} was used where a concrete value is "
                    f"needed, but it depends on a value that is not known here ({self}: a "
                    "vmapped input, or a tangent / cotangent inside a custom rule). Use "
                    "starling.numpy.where or cond / switch / while_loop instead.")
            eqn = self.eqns[idx]
            missing = [v for v in eqn.invars if type(v) is Var and v not in self.values]
            if missing:
                stack.extend(missing)
                continue
            ins = [wrap(v.val, v.aval.weak_type) if type(v) is Literal else self.values[v]
                   for v in eqn.invars]
            with set_current_trace(EVAL_TRACE):
                outs = apply_record(eqn, ins) if eqn.primitive is call_record_p else \
                    eqn.primitive.bind(*ins, **eqn.params)
            outs = outs if eqn.primitive.multiple_results else [outs]
            self.values.update(zip(eqn.outvars, outs))
            stack.pop()

    # ---- call records ------------------------------------------------------------------------
    def process_custom_jvp_call(self, fun, jvp, args, symbolic_zeros=False):
        if self.inline_calls:
            return fun(*args)
        avals = [_aval(a) for a in args]
        fun_rec = self._sub(fun, avals, args)
        rule_rec, static = None, None
        if not symbolic_zeros:
            n = len(args)
            t_avals = [tangent_aval(a) for a in avals]

            def rule(*xs):
                p_out, t_out = jvp(list(xs[:n]), list(xs[n:]))
                return list(p_out) + list(t_out)
            rule_rec = self._sub(rule, avals + t_avals, list(args) + [None] * n,
                                 rule=True)
            if rule_rec is not None:
                static = rule_rec[2]
        if rule_rec is None:
            self.uncacheable = ("custom_jvp with symbolic_zeros=True" if symbolic_zeros else
                                "its custom_jvp rule read a tangent's value")
        return self._call_record("custom_jvp", args, [fun_rec, rule_rec], (symbolic_zeros, static),
                                 _Live(fun, jvp))

    def process_custom_vjp_call(self, fun, fwd, bwd, args, out_avals_fn):
        if self.inline_calls:
            return fun(*args)
        avals = [_aval(a) for a in args]
        fun_rec = self._sub(fun, avals, args)
        res_info = []

        def flat_fwd(*xs):
            outs, res = fwd(*xs)
            leaves, tree = tree_util.flatten(res)
            res_info.append((len(outs), tree))
            return list(outs) + [operand(r, "custom_vjp") for r in leaves]
        fwd_rec = self._sub(flat_fwd, avals, args, rule=True)
        bwd_rec = static = None
        if fwd_rec is not None:
            n_out, res_tree = res_info[-1]
            outvars = fwd_rec[0].outvars
            res_avals = [v.aval for v in outvars[n_out:]]
            ct_avals = [tangent_aval(v.aval) for v in outvars[:n_out]]
            m = len(res_avals)

            def flat_bwd(*xs):
                return list(bwd(tree_util.unflatten(res_tree, list(xs[:m])), list(xs[m:])))
            bwd_rec = self._sub(flat_bwd, res_avals + ct_avals, [None] * (m + len(ct_avals)),
                                rule=True)
            if bwd_rec is not None:
                static = (n_out, res_tree, bwd_rec[2])
        if bwd_rec is None:
            self.uncacheable = "its custom_vjp rules read a value they do not have"
        return self._call_record("custom_vjp", args, [fun_rec, fwd_rec, bwd_rec], static,
                                 _Live(fun, fwd, bwd))

    def process_checkpoint_call(self, fun, args, policy):
        if self.inline_calls:
            return fun(*args)
        fun_rec = self._sub(fun, [_aval(a) for a in args], args)
        return self._call_record("checkpoint", args, [fun_rec], policy, _Live(fun))

    def _sub(self, fun, avals, values, rule=False):
        """Records ``fun`` (flat in, flat out; Zero outputs allowed) as a nested recording:
        (Program with its consts hoisted into leading invars, const values, Zero-output mask).
        A ``rule`` runs custom calls inline and gives None when it reads a value it does not
        have (a tangent): then only this call's own rule can be applied."""
        sub = None
        try:
            with new_trace(RecordTrace, rule) as sub:
                tracers = sub.new_args(avals, values)
                outs = fun(*tracers)
                zero = tuple(None if type(o) is not Zero else o.aval for o in outs)
                kept = [operand(o, "custom rule") for o in outs if type(o) is not Zero]
                prog = sub.to_program(tracers, kept)
        except NoValue:
            if not rule:
                raise
            return None
        finally:
            if sub is not None:
                self.read_values = self.read_values or sub.read_values
                if not rule:
                    self.uncacheable = self.uncacheable or sub.uncacheable
        closed = Program([], [], list(prog.constvars) + list(prog.invars), prog.eqns,
                         prog.outvars)
        return closed, list(prog.consts), zero

    def _call_record(self, kind, args, recs, static, live):
        present = [r for r in recs if r is not None]
        invars = [self.to_var(a) for a in args]
        for r in present:
            invars += [self.to_var(c) for c in r[1]]
        fun_prog = recs[0][0]
        outvars = [Var(v.aval) for v in fun_prog.outvars]
        params = dict(kind=kind, progs=tuple(r[0] if r is not None else None for r in recs),
                      splits=(len(args),) + tuple(len(r[1]) if r is not None else 0
                                                  for r in recs),
                      static=static, _live=live)
        self.eqns.append(Equation(call_record_p, invars, outvars, params))
        return [self.tracer_type(self, v) for v in outvars]


def _aval(x):
    return x.aval if isinstance(x, (Array, Tracer)) else operand(x, "record").aval


def _concrete_of(x):
    if type(x) is Array:
        return x
    if isinstance(x, Tracer):
        return x.to_concrete()
    return operand(x, "record")


# ---- replay ------------------------------------------------------------------------------------

def replay(prog, consts, args, live=False):
    """Evaluates a recorded Program under the current trace (so transformations apply to it).

    ``live``: call records call this call's custom rules (re-tracing this very call, as without
    the cache); otherwise they call functions made from the recorded rule Programs (what a
    derived program, reused by later calls, must be made of).
    """
    return eval_program(prog, consts, *args,
                        apply=_apply_live if live else apply_record)


def _apply_live(eqn, ins):
    return apply_record(eqn, ins, live=True)


def apply_record(eqn, ins, live=False):
    """Applies one call record to ``ins`` through the current trace's custom-call handlers."""
    p = eqn.params
    n_args = p["splits"][0]
    args, groups, start = ins[:n_args], [], n_args
    for k in p["splits"][1:]:
        groups.append(ins[start:start + k])
        start += k
    progs, live_fns = p["progs"], p["_live"]
    sub = _apply_live if live else apply_record

    def run(i, xs):
        return eval_program(progs[i], (), *groups[i], *xs, apply=sub)

    def fun(*xs):
        return run(0, xs)

    kind = p["kind"]
    if kind == "checkpoint":
        return checkpoint_call(fun, args, p["static"])
    if kind == "custom_jvp":
        symbolic_zeros, zeros = p["static"]
        if live:
            return custom_jvp_call(fun, live_fns.rules[0], args, symbolic_zeros)
        n_out = len(progs[0].outvars)

        def jvp(primals, tangents):
            outs = _with_zeros(run(1, list(primals) + list(tangents)), zeros)
            return outs[:n_out], outs[n_out:]
        return custom_jvp_call(fun, jvp, args, False)
    n_out, res_tree, bwd_zeros = p["static"]
    if live:
        fwd, bwd = live_fns.rules
        return custom_vjp_call(fun, fwd, bwd, args, None)

    def fwd(*xs):
        outs = run(1, xs)
        return outs[:n_out], tree_util.unflatten(res_tree, outs[n_out:])

    def bwd(res, cts):
        return _with_zeros(run(2, tree_util.leaves(res) + list(cts)), bwd_zeros)
    return custom_vjp_call(fun, fwd, bwd, args, None)


def _with_zeros(outs, zeros):
    """Reinserts the symbolic Zero outputs a rule returned (``zeros``: their avals or None)."""
    it = iter(outs)
    return [next(it) if z is None else Zero(z) for z in zeros]


# ---- one call's recording ----------------------------------------------------------------------

class Recording:
    """What ``record`` returns: ``prog`` (invars: the recorded inputs; constvars / ``consts``:
    arrays read from outside), ``extra`` (the recorded function's Python-side result),
    ``read_values`` and ``uncacheable`` (see module docstring)."""

    __slots__ = ("prog", "extra", "read_values", "uncacheable", "_key")

    def __init__(self, prog, extra, read_values, uncacheable):
        self.prog, self.extra = prog, extra
        self.read_values, self.uncacheable = read_values, uncacheable
        self._key = None

    @property
    def reusable(self):
        """Whether a program derived from an equal recording computes this call's results."""
        return not self.read_values and self.uncacheable is None and not any(
            e.primitive.eager is not None for e in self.prog.eqns) and all(
            type(c) is Array for c in self.prog.consts)

    def fingerprint(self):
        if self._key is None:
            self._key = fingerprint(self.prog, closed=False)
        return self._key

    def function(self, consts, live):
        """``f(*inputs) -> outputs`` evaluating the recording (consts given explicitly)."""
        prog = self.prog
        return lambda *xs: replay(prog, consts, xs, live)


def record(fun, avals, values):
    """Runs ``fun(*tracers)`` once on inputs of ``avals`` (``values``: the call's value of each,
    or None) and records it. ``fun`` returns ``(outputs, extra)``: a list of array-likes (the
    recorded outputs) and anything else, returned as ``Recording.extra``.

    Raises:
        Retrace: ``fun`` raised after a value it read was missing (see ``NoValue``).
        Whatever ``fun`` raised otherwise.
    """
    trace = None
    try:
        with new_trace(RecordTrace) as trace:
            tracers = trace.new_args(avals, values)
            outs, extra = fun(*tracers)
            prog = trace.to_program(tracers, [operand(o, "record") for o in outs])
    except Exception:
        if trace is not None and trace.missing_value:
            raise Retrace() from None
        raise
    uncacheable = trace.uncacheable
    if uncacheable is None and _has_staged_custom_call(prog.eqns):
        uncacheable = "a custom_jvp / custom_vjp call inside a staged body"
    return Recording(prog, extra, trace.read_values, uncacheable)


def _has_staged_custom_call(eqns):
    """Whether a staged custom call (live rules in its params) is among ``eqns``, bodies and
    call records included."""
    for eqn in eqns:
        if is_custom_call(eqn):
            return True
        subs = [p for p in eqn.params["progs"] if p is not None] \
            if eqn.primitive is call_record_p else subprograms(eqn.params)
        for sub in subs:
            if _has_staged_custom_call(sub.eqns):
                return True
    return False


# ---- fingerprints ------------------------------------------------------------------------------

class _ById:
    """Hashes and compares an unhashable object by identity (and keeps it alive)."""

    __slots__ = ("obj",)

    def __init__(self, obj):
        self.obj = obj

    def __hash__(self):
        return id(self.obj)

    def __eq__(self, other):
        return type(other) is _ById and other.obj is self.obj


def _lit_key(v):
    val = np.asarray(v.val)
    return ("lit", v.aval, val.dtype.str, val.tobytes())


def _param_key(v):
    t = type(v)
    if t in (int, bool, str, float, type(None)):
        return v
    if t is tuple or t is list:
        return tuple(_param_key(x) for x in v)
    if isinstance(v, Program):
        return fingerprint(v)
    if isinstance(v, _Live):
        return None
    if isinstance(v, np.ndarray):
        return ("nd", v.dtype.str, v.shape, v.tobytes())
    if isinstance(v, np.generic):
        return ("np", v.dtype.str, v.tobytes())
    if isinstance(v, dict):
        return ("dict",) + tuple((k, _param_key(x)) for k, x in v.items())
    try:
        hash(v)
    except TypeError:
        return _ById(v)
    return v


def fingerprint(prog, closed=True):
    """A hashable key equal for two Programs exactly when they compute the same function of
    their inputs (and, unless ``closed`` is False, of the same constant values)."""
    ids = {}
    for v in prog.constvars:
        ids[v] = len(ids)
    for v in prog.invars:
        ids[v] = len(ids)
    parts = [tuple(v.aval for v in prog.constvars), tuple(v.aval for v in prog.invars)]
    if closed:
        parts.append(tuple(_ById(c) for c in prog.consts))
    for eqn in prog.eqns:
        ins = tuple(ids[v] if type(v) is Var else _lit_key(v) for v in eqn.invars)
        parts.append((eqn.primitive, ins, tuple((k, _param_key(x)) for k, x in
                                                eqn.params.items())))
        for v in eqn.outvars:
            ids[v] = len(ids)
    parts.append(tuple(ids[v] if type(v) is Var else _lit_key(v) for v in prog.outvars))
    return tuple(parts)
