"""Forward mode: the JVP interpreter.

A JVPTracer carries (primal, tangent). Each primitive's ``jvp`` rule computes both, binding on the
parent trace, so nesting (jvp of jvp, grad of jvp, jvp of vmap...) composes. Tangents may be the
symbolic ``Zero``; rules receive them and may return ``Zero``.
"""
from __future__ import annotations

from ..core import dtypes
from ..core.ad_util import Zero, tangent_aval
from ..core.primitive import MissingRuleError
from ..core.trace import Trace, Tracer, set_current_trace
from ..arrays.ops import rules as rules_util


class JVPTracer(Tracer):
    """A value under forward-mode differentiation: ``primal`` and ``tangent`` (maybe Zero)."""

    __slots__ = ("primal", "tangent")

    def __init__(self, trace, primal, tangent):
        self._trace = trace
        self.primal = primal
        self.tangent = tangent

    @property
    def aval(self):
        return self.primal.aval

    def to_concrete(self):
        # The primal is a value of the enclosing trace: concrete under plain eval, so Python
        # control flow on primal values works inside jvp / grad (as in JAX).
        self._trace.check_valid(self)
        return self.primal.to_concrete()


class JVPTrace(Trace):
    """Interpreter for ``jvp``; tracers of enclosing traces are constants (zero tangent)."""

    def lift(self, x):
        if isinstance(x, JVPTracer) and x._trace is self:
            t = x.tangent
            if type(t) is not Zero and t.aval.dtype == dtypes.float0:
                # an instantiated tangent of an integer / bool value carries no information;
                # as a symbolic Zero it lets all-zero calls skip the rule (nested jvps of
                # control-flow bodies instantiate them)
                t = Zero(t.aval)
            return x.primal, t
        if isinstance(x, Tracer):
            x._trace.check_valid(x)
        return x, Zero(tangent_aval(x.aval))

    def process_primitive(self, prim, args, params):
        primals, tangents = [], []
        for a in args:
            p, t = self.lift(a)
            primals.append(p)
            tangents.append(t)
        if all(type(t) is Zero for t in tangents):
            with set_current_trace(self.parent):
                return prim.bind(*primals, **params)
        rule = prim.jvp
        if rule is None:
            raise MissingRuleError(prim, "jvp")
        with set_current_trace(self.parent):
            primal_out, tangent_out = rule(primals, tangents, **params)
        if prim.multiple_results:
            return [JVPTracer(self, p, rules_util.check_tangent(prim, p, t))
                    for p, t in zip(primal_out, tangent_out)]
        return JVPTracer(self, primal_out, rules_util.check_tangent(prim, primal_out, tangent_out))

    def process_custom_jvp_call(self, fun, jvp, args, symbolic_zeros=False):
        primals, tangents = [], []
        for a in args:
            p, t = self.lift(a)
            primals.append(p)
            tangents.append(t)
        if all(type(t) is Zero for t in tangents):
            with set_current_trace(self.parent):
                return fun(*primals)
        with set_current_trace(self.parent):
            if not symbolic_zeros:
                tangents = [rules_util.instantiate(t) for t in tangents]
            primal_out, tangent_out = jvp(primals, tangents)
        return [JVPTracer(self, p, t) for p, t in zip(primal_out, tangent_out)]

    def process_custom_vjp_call(self, fun, fwd, bwd, args, out_avals_fn):
        from .custom import custom_lin
        primals = [self.lift(a)[0] for a in args]
        tangents = [self.lift(a)[1] for a in args]
        if all(type(t) is Zero for t in tangents):
            with set_current_trace(self.parent):
                return fun(*primals)
        with set_current_trace(self.parent):
            outs, residuals = fwd(*primals)
            tangent_outs = custom_lin(residuals, tangents, bwd, [o.aval for o in outs])
        return [JVPTracer(self, p, t) for p, t in zip(outs, tangent_outs)]

    def process_checkpoint_call(self, fun, args, policy):
        from .checkpoint import jvp_checkpoint_call
        pairs, plain = jvp_checkpoint_call(self, fun, args, policy)
        if pairs is None:
            return plain
        return [JVPTracer(self, p, t) for p, t in pairs]


def jvp_flat(fun, primals, tangents):
    """JVP of a flat function (list in, list out) where tangents may be symbolic Zeros.

    Returns ``(primal_outs, tangent_outs)`` with output tangents instantiated. Used to build the
    JVP of sub-Programs (control flow, checkpoint)."""
    from ..core.trace import new_trace
    with new_trace(JVPTrace) as trace:
        tracers = [JVPTracer(trace, p, t) for p, t in zip(primals, tangents)]
        outs = fun(*tracers)
        pairs = [trace.lift(o) for o in outs]
    return [p for p, _ in pairs], [rules_util.instantiate(t) for _, t in pairs]
