"""Program-to-Program transformations shared by the control-flow primitives.

Each builder runs an interpreter over a Program while staging the result, so the control-flow
rules (jvp, partial evaluation, transposition, batching) reuse the same machinery as top-level
transformations instead of re-implementing it.
"""
from __future__ import annotations

from ...arrays.array import Array
from ...arrays.convert import operand
from ...arrays.ops import rules as R
from ...core.ad_util import Zero, tangent_aval
from ...core.avals import ShapedArray
from ...core.axis_env import current_batching_axis
from ...core.ir import Program, eval_program
from ...core.trace import new_trace
from ..jvp import jvp_flat
from ..partial_eval import PartialEvalTrace
from ..stage import StagingTrace, trace_to_program
from ..transpose import backward_pass
from ..vmap import _batched_flat

_RUNNING = object()   # batch_program's default axis name: the running vmap's


def hoist_consts(prog: Program):
    """(Program whose former constvars are its leading invars, their values)."""
    closed = Program([], [], list(prog.constvars) + list(prog.invars), prog.eqns, prog.outvars)
    return closed, list(prog.consts)


def stage(fun, avals):
    """Stages flat ``fun`` and hoists its constants: (closed Program, consts)."""
    return hoist_consts(trace_to_program(lambda *xs: [operand(o, "control flow")
                                                      for o in fun(*xs)], avals))


def call(prog: Program, args):
    """Evaluates a Program on ``args`` under the current trace. Sub-Programs of control flow
    only keep concrete constants (tracers are always hoisted into operands)."""
    return eval_program(prog, prog.consts, *args)


def jvp_program(prog: Program, nonzero):
    """Program mapping (primals, tangents of the ``nonzero`` inputs) to (primal outs, tangent
    outs); every output tangent is instantiated."""
    n = len(prog.invars)
    t_avals = [tangent_aval(v.aval) for v, nz in zip(prog.invars, nonzero) if nz]

    def fun(*args):
        primals, tans = list(args[:n]), iter(args[n:])
        tangents = [next(tans) if nz else Zero(tangent_aval(v.aval))
                    for v, nz in zip(prog.invars, nonzero)]
        p_out, t_out = jvp_flat(lambda *p: call(prog, p), primals, tangents)
        return list(p_out) + list(t_out)

    closed, consts = stage(fun, [v.aval for v in prog.invars] + t_avals)
    return _bind_consts(closed, consts) if consts else closed


def partial_eval_program(prog: Program, unknowns, instantiate=None):
    """Splits a closed Program by which inputs are unknown.

    Returns ``(known, unknown, out_unknowns, num_res)``: ``known`` maps the known inputs to the
    known outputs followed by ``num_res`` residuals; ``unknown`` maps (residuals, unknown inputs)
    to the unknown outputs. Outputs flagged in ``instantiate`` are made unknown even if known.
    """
    n_out = len(prog.outvars)
    instantiate = [False] * n_out if instantiate is None else list(instantiate)
    known_avals = [v.aval for v, u in zip(prog.invars, unknowns) if not u]
    unknown_avals = [v.aval for v, u in zip(prog.invars, unknowns) if u]
    with new_trace(StagingTrace) as s_trace:
        k_in = [s_trace.new_arg(a) for a in known_avals]
        with new_trace(PartialEvalTrace) as p_trace:
            u_in = [p_trace.new_arg(a) for a in unknown_avals]
            ki, ui = iter(k_in), iter(u_in)
            args = [next(ui) if u else next(ki) for u in unknowns]
            outs = [operand(o, "partial_eval") for o in call(prog, args)]
            out_unknown = [p_trace.is_unknown(o) or inst for o, inst in zip(outs, instantiate)]
            u_outs = [o for o, u in zip(outs, out_unknown) if u]
            raw = p_trace.to_program(u_in, u_outs)
        residuals = list(raw.consts)
        k_outs = [o for o, u in zip(outs, out_unknown) if not u]
        known = s_trace.to_program(k_in, k_outs + residuals)
    known, k_consts = hoist_consts(known)
    if k_consts:
        known = _bind_consts(known, k_consts)
    unknown = Program([], [], list(raw.constvars) + list(raw.invars), raw.eqns, raw.outvars)
    return known, unknown, out_unknown, len(residuals)


def _bind_consts(prog, consts):
    """Re-closes a Program over concrete constants (kept as Program consts)."""
    n = len(consts)
    return Program(prog.invars[:n], consts, prog.invars[n:], prog.eqns, prog.outvars)


def transpose_program(lin: Program, num_res, linear_avals=None):
    """Program mapping (residuals, output cotangents) to cotangents of ``lin``'s linear inputs
    (the invars after the ``num_res`` residuals); zero cotangents are instantiated."""
    res_avals = [v.aval for v in lin.invars[:num_res]]
    ct_avals = [tangent_aval(v.aval) for v in lin.outvars]

    def fun(*args):
        res, cts = list(args[:num_res]), list(args[num_res:])
        view = Program(list(lin.constvars) + list(lin.invars[:num_res]), list(lin.consts) + res,
                       lin.invars[num_res:], lin.eqns, lin.outvars)
        cts_in = backward_pass(view, view.consts, cts)
        return [R.instantiate(c) for c in cts_in]

    closed, consts = stage(fun, res_avals + ct_avals)
    if consts:
        closed = _bind_consts(closed, consts)
    return closed


def batch_program(prog: Program, in_dims, axis_size, axis_name=_RUNNING):
    """Program on batched inputs (batch axis ``in_dims[i]`` or None) whose outputs all carry the
    batch at axis 0. ``axis_name`` defaults to the name of the vmap whose batch rule is running,
    so that collectives over it inside ``prog`` reduce / gather along the batch."""
    if axis_name is _RUNNING:
        axis_name = current_batching_axis()
    avals = []
    for v, d in zip(prog.invars, in_dims):
        a = v.aval
        if d is not None:
            a = ShapedArray(a.shape[:d] + (axis_size,) + a.shape[d:], a.dtype, a.weak_type)
        avals.append(a)
    fun = _batched_flat(lambda *xs: call(prog, xs), list(in_dims), axis_size, axis_name)
    closed, consts = stage(fun, avals)
    if consts:
        closed = _bind_consts(closed, consts)
    return closed


def is_concrete(x) -> bool:
    """True for a concrete Array (not a tracer of any transformation)."""
    return type(x) is Array


def permute(prog: Program, in_order=None, out_order=None):
    """A view of ``prog`` with invars taken in ``in_order`` and outvars in ``out_order``
    (index lists; outputs may be a subset)."""
    invars = prog.invars if in_order is None else [prog.invars[i] for i in in_order]
    outvars = prog.outvars if out_order is None else [prog.outvars[i] for i in out_order]
    return Program(prog.constvars, prog.consts, invars, prog.eqns, outvars)


def adopt_body_types(leaves, out_avals):
    """The initial carry with each weakly typed leaf (from a Python scalar) given the dtype and
    weak type the body produces for it (JAX's rule: ``fori_loop(0, n, f, 0)`` with a float32
    body carries float32). Strongly typed leaves are kept: a change of theirs is an error
    (``check_same_avals``)."""
    from ...arrays.ops.convert_element_type import convert_element_type
    out = []
    for x, a in zip(leaves, out_avals):
        if x.aval.weak_type and x.shape == a.shape and (x.dtype, True) != (a.dtype, a.weak_type):
            x = convert_element_type(x, a.dtype, a.weak_type)
        out.append(x)
    return out


def check_same_avals(op, what, paths, before, after):
    """Raises TypeError naming the first leaf whose shape or dtype changed."""
    for path, a, b in zip(paths, before, after):
        if a.shape != b.shape or a.dtype != b.dtype:
            from ... import tree as tree_util
            raise TypeError(f"{op}: {what} {tree_util.path_str(path)} changes from "
                            f"{a.str_short()} to {b.str_short()}; the carry must keep its shape "
                            "and dtype across iterations")


def split_list(seq, *sizes):
    """Splits ``seq`` into consecutive lists of the given sizes, plus the remainder."""
    out, start = [], 0
    for n in sizes:
        out.append(list(seq[start:start + n]))
        start += n
    out.append(list(seq[start:]))
    return out
