"""Constant folding: equations whose inputs are all constants are evaluated at compile time.

Results become Literals (0-d) or new constvars. Folding is skipped for results larger than
``MAX_FOLD_ELEMENTS`` (folding would trade a cheap runtime op for memory held by the
executable), for effectful primitives and for those that run themselves eagerly (shard_map,
sharding constraints: their results are sharded arrays).
"""
from __future__ import annotations

import numpy as np

from ...arrays.array import wrap
from ...core.ir import Literal, Program, Var, is_effectful
from ...core.symbolic import eqn_is_symbolic
from ...core.trace import EVAL_TRACE, set_current_trace
from .util import with_eqns

MAX_FOLD_ELEMENTS = 1 << 16


def constant_folding(prog: Program) -> Program:
    """``prog`` with all-constant equations evaluated (see module docstring)."""
    known = dict(zip(prog.constvars, prog.consts))
    constvars, consts = list(prog.constvars), list(prog.consts)
    rename = {}
    eqns = []

    def value(v):
        if isinstance(v, Literal):
            return wrap(v.val, v.aval.weak_type)
        return known.get(rename.get(v, v))

    for eqn in prog.eqns:
        invars = [v if isinstance(v, Literal) else rename.get(v, v) for v in eqn.invars]
        vals = [value(v) for v in invars]
        foldable = (all(x is not None for x in vals) and not is_effectful(eqn)
                    and eqn.primitive.eager is None   # makes sharded values (shard_map...)
                    and not eqn.primitive.meta.get("applied")   # call records: no impl
                    and not eqn_is_symbolic(eqn)  # sizes unknown until bind_shapes
                    and all(int(np.prod(v.aval.shape)) <= MAX_FOLD_ELEMENTS
                            for v in eqn.outvars))
        if foldable:
            with set_current_trace(EVAL_TRACE):
                outs = eqn.primitive.bind(*vals, **eqn.params)
            outs = outs if eqn.primitive.multiple_results else [outs]
            for old, val in zip(eqn.outvars, outs):
                if val.ndim == 0:
                    rename[old] = Literal(np.asarray(val._buf)[()], old.aval)
                else:
                    nv = Var(old.aval)
                    constvars.append(nv)
                    consts.append(val)
                    known[nv] = val
                    rename[old] = nv
            continue
        eqns.append(type(eqn)(eqn.primitive, invars, eqn.outvars, eqn.params))
    outvars = [v if isinstance(v, Literal) else rename.get(v, v) for v in prog.outvars]
    out = with_eqns(prog, eqns, outvars)
    out.constvars, out.consts = constvars, consts
    return out
