"""Partial evaluation: run what is known, stage what is not.

Values are *known* (concrete Arrays or tracers of enclosing traces) or *unknown* (tracers of this
trace). A primitive with only known inputs runs on the parent trace; one with any unknown input
is recorded into the Program being built, with its known inputs captured as constants. Linearize
uses it with the tangents unknown: the primal computation runs, the tangent computation (linear
by construction of the JVP rules) is staged as a Program of linear equations.
"""
from __future__ import annotations

from ..core.trace import Tracer, set_current_trace
from .stage import StagingTrace, StagingTracer


class PartialEvalTrace(StagingTrace):
    """Staging trace that evaluates equations whose inputs are all known."""

    def is_unknown(self, x) -> bool:
        return isinstance(x, StagingTracer) and x._trace is self

    def process_primitive(self, prim, args, params):
        for a in args:
            if self.is_unknown(a):
                rule = prim.meta.get("partial_eval")
                if rule is not None:
                    # Primitives holding sub-Programs split them into a known part (run now)
                    # and an unknown part (staged), instead of staging whole.
                    return rule(self, args, params)
                return super().process_primitive(prim, args, params)
            if isinstance(a, Tracer):
                a._trace.check_valid(a)
        with set_current_trace(self.parent):
            return prim.bind(*args, **params)

    def stage(self, prim, args, params):
        """Records ``prim`` as an equation regardless of which inputs are known."""
        return StagingTrace.process_primitive(self, prim, args, params)

    def process_custom_jvp_call(self, fun, jvp, args, symbolic_zeros=False):
        # Inside linearize the JVP trace above us already applied the custom rule; what reaches
        # here is the primal or tangent computation. With known inputs it is a call of the
        # enclosing traces (like a primitive with known inputs), which must see the custom rule:
        # jacfwd(jacrev(f)) differentiates f's primal computation by its rule, not by f's body.
        if not any(self.is_unknown(a) for a in args):
            from .custom import custom_jvp_call
            with set_current_trace(self.parent):
                return custom_jvp_call(fun, jvp, args, symbolic_zeros)
        return fun(*args)

    def process_custom_vjp_call(self, fun, fwd, bwd, args, out_avals_fn):
        if not any(self.is_unknown(a) for a in args):
            from .custom import custom_vjp_call
            with set_current_trace(self.parent):
                return custom_vjp_call(fun, fwd, bwd, args, out_avals_fn)
        return fun(*args)
