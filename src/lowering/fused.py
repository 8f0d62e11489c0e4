"""``fused_kernel``: a group of equations the fusion pass runs as one kernel.

The primitive holds the group as a sub-Program (param ``program``; its invars are the group's
inputs, its outvars the values used outside the group) and a display ``name``; the cpp backend's
memory plan may add ``reuse`` (passes/buffer_reuse.py: which existing buffer each output is
written into), which changes no value and is ignored here. Its reference
implementation evaluates the sub-Program, so a fused Program still runs on numpy_ref and under
every transformation (JVP / vmap rules transform the sub-Program with the shared machinery of the
control-flow primitives). Backends with native code generation (cpp) render it as one function.
"""
from __future__ import annotations

import numpy as np

from ..arrays.array import wrap
from ..arrays.ops import rules as R
from ..core.ir import Program, eval_program
from ..core.primitive import Primitive
from ..core.trace import EVAL_TRACE, set_current_trace

fused_kernel_p = Primitive("fused_kernel", multiple_results=True, family="lowering")


def _impl(*bufs, program, name, reuse=None):
    args = [wrap(b, v.aval.weak_type) for b, v in zip(bufs, program.invars)]
    with set_current_trace(EVAL_TRACE):
        outs = eval_program(program, program.consts, *args)
    return [np.asarray(o._buf) for o in outs]


def _abstract_eval(*avals, program, name, reuse=None):
    return [v.aval for v in program.outvars]


def _weak(*in_weak, program, name, reuse=None):
    return [v.aval.weak_type for v in program.outvars]


def _closed(program):
    """The sub-Program with its constants hoisted into leading invars (and their values)."""
    return Program([], [], list(program.constvars) + list(program.invars), program.eqns,
                   program.outvars), list(program.consts)


def _jvp(primals, tangents, *, program, name, reuse=None):
    # The JVP of a fused group is the JVP of its equations, inlined: the tangent computation
    # is ordinary (transposable) code that the backend fuses again.
    from ..transforms.jvp import jvp_flat
    p_out, t_out = jvp_flat(lambda *xs: eval_program(program, program.consts, *xs),
                            list(primals), list(tangents))
    return list(p_out), list(t_out)


def _batch(args, dims, *, program, name, reuse=None):
    from ..transforms.control import programs as P
    closed, consts = _closed(program)
    consts = [wrap(np.asarray(c._buf if hasattr(c, "_buf") else c), False) for c in consts]
    size = R.batch_size(args, dims)
    bp = P.batch_program(closed, [None] * len(consts) + list(dims), size)
    outs = fused_kernel_p.bind(*consts, *args, program=bp, name=name + "_batched")
    return outs, [0] * len(outs)


fused_kernel_p.impl = _impl
fused_kernel_p.abstract_eval = _abstract_eval
fused_kernel_p.weak_type = _weak
fused_kernel_p.jvp = _jvp
fused_kernel_p.batch = _batch


def fused_eqn_program(eqn):
    """The sub-Program of a ``fused_kernel`` equation."""
    return eqn.params["program"]
