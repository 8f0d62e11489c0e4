"""Staging: the interpreter that records primitives into a Program instead of running them.

``trace_to_program(fun, in_avals)`` runs ``fun`` on StagingTracers and returns the Program;
``make_ir(fun)(*args)`` is the user-facing view (printable like a jaxpr); ``eval_shape`` gives
output shapes/dtypes without computing anything.
"""
from __future__ import annotations

import functools

import numpy as np

from .. import tree as tree_util
from ..arrays.array import Array
from ..arrays.convert import operand
from ..core.avals import ShapedArray
from ..core.ir import Equation, Literal, Program, Var
from ..core.trace import Trace, Tracer, new_trace


class StagingTracer(Tracer):
    """A value being staged: stands for the Var ``var`` of the Program under construction."""

    __slots__ = ("var",)

    def __init__(self, trace, var):
        self._trace = trace
        self.var = var

    @property
    def aval(self):
        return self.var.aval


class StagingTrace(Trace):
    """Records each primitive as an Equation. Values from outside (concrete Arrays and tracers of
    enclosing transformations) become constvars of the Program; 0-d Arrays become Literals."""

    tracer_type = StagingTracer   # subclasses record with their own tracers

    def __init__(self, parent):
        super().__init__(parent)
        self.eqns = []
        self.const_vars = {}   # id(value) -> Var
        self.const_vals = []
        self.const_list = []

    def new_arg(self, aval):
        return self.tracer_type(self, Var(aval))

    def to_var(self, x):
        if isinstance(x, StagingTracer) and x._trace is self:
            return x.var
        if isinstance(x, Tracer):
            x._trace.check_valid(x)
        elif type(x) is not Array:
            x = operand(x, "staging")
        if type(x) is Array and x.ndim == 0:
            return Literal(np.asarray(x._buf), x.aval)
        key = id(x)
        v = self.const_vars.get(key)
        if v is None:
            v = Var(x.aval)
            self.const_vars[key] = v
            self.const_vals.append(x)  # keeps x alive so its id stays unique
            self.const_list.append(v)
        return v

    def process_primitive(self, prim, args, params):
        self.check_valid_self()
        invars = [self.to_var(a) for a in args]
        out = prim.rule("abstract_eval")(*[v.aval for v in invars], **params)
        outs = out if prim.multiple_results else [out]
        outvars = [Var(a) for a in outs]
        self.eqns.append(Equation(prim, invars, outvars, params))
        tracer = self.tracer_type
        if prim.multiple_results:
            return [tracer(self, v) for v in outvars]
        return tracer(self, outvars[0])

    def process_custom_jvp_call(self, fun, jvp, args, symbolic_zeros=False):
        # recorded, not inlined: a later jvp of this Program (a control-flow body) needs the rule
        from .custom import custom_jvp_call_p
        return custom_jvp_call_p.stage(self, fun, args, jvp=jvp, symbolic_zeros=symbolic_zeros)

    def process_custom_vjp_call(self, fun, fwd, bwd, args, out_avals_fn):
        from .custom import custom_vjp_call_p
        return custom_vjp_call_p.stage(self, fun, args, fwd=fwd, bwd=bwd,
                                       out_avals_fn=out_avals_fn)

    def check_valid_self(self):
        if not self.valid:
            raise RuntimeError("staging trace used after it ended")

    def to_program(self, in_tracers, out_vals):
        outvars = [self.to_var(x) for x in out_vals]
        return Program(self.const_list, list(self.const_vals), [t.var for t in in_tracers],
                       self.eqns, outvars)


def aval_of(x) -> ShapedArray:
    """The ShapedArray of an array-like or of a ``ShapeDtypeStruct``-style object."""
    if isinstance(x, (Array, Tracer)):
        return x.aval
    if isinstance(x, ShapedArray):
        return x
    if hasattr(x, "shape") and hasattr(x, "dtype") and not isinstance(x, np.ndarray):
        return ShapedArray(tuple(x.shape), np.dtype(x.dtype), bool(getattr(x, "weak_type", False)))
    return operand(x, "aval_of").aval


def trace_to_program(fun, in_avals):
    """Stages ``fun(*flat_args)`` (flat list of arrays in, flat list out) into a Program."""
    with new_trace(StagingTrace) as trace:
        in_tracers = [trace.new_arg(a) for a in in_avals]
        outs = fun(*in_tracers)
        return trace.to_program(in_tracers, outs)


def make_ir(fun):
    """``make_ir(f)(*args)`` returns the Program that ``f`` stages for arguments like ``args``.

    Args may be arrays, array-likes or objects with ``shape`` / ``dtype``; pytrees are flattened
    (the Program's invars follow ``tree.flatten`` order). The result prints like a jaxpr.
    """
    @functools.wraps(fun)
    def staged(*args, **kwargs):
        leaves, treedef = tree_util.flatten((args, kwargs))
        avals = [aval_of(x) for x in leaves]
        out_tree = []

        def flat_fun(*flat):
            a, k = tree_util.unflatten(treedef, list(flat))
            out = fun(*a, **k)
            out_leaves, ot = tree_util.flatten(out)
            out_tree.append(ot)
            return [operand(o, "make_ir") for o in out_leaves]

        return trace_to_program(flat_fun, avals)
    return staged


def eval_shape(fun, *args, **kwargs):
    """Output avals (ShapedArray pytree) of ``fun(*args, **kwargs)`` without computing values."""
    leaves, treedef = tree_util.flatten((args, kwargs))
    avals = [aval_of(x) for x in leaves]
    out_tree = []

    def flat_fun(*flat):
        a, k = tree_util.unflatten(treedef, list(flat))
        out_leaves, ot = tree_util.flatten(fun(*a, **k))
        out_tree.append(ot)
        return [operand(o, "eval_shape") for o in out_leaves]

    prog = trace_to_program(flat_fun, avals)
    return tree_util.unflatten(out_tree[0], [v.aval for v in prog.outvars])
