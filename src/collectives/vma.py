"""Replication typing of shard_map bodies: which mesh axes each value varies over.

A value is *invariant* over a mesh axis when every device along it holds the same value (a
replicated input, the result of ``psum`` or ``all_gather`` over it), and *varying* otherwise. The
rewrite below walks a body Program, computes each value's varying axes ("vma") and inserts
``pvary`` (identity on data) where an invariant value meets a varying one, so that every
equation's operands agree. This is what makes reverse mode right: the transpose of ``pvary`` is
``psum``, so the cotangent of a replicated input sums every device's contribution, and the
transpose of ``psum`` is ``pvary`` (no division by the device count, no double counting).

``check_rep`` uses the output vmas: an out_spec that does not mention a mesh axis claims the
output is invariant over it; the claim must be provable.

Higher-order equations (control flow, checkpoint, custom rules) are typed conservatively: all
their operands are made varying over the union of the operands' axes, and so are their outputs.
"""
from __future__ import annotations

from ..core.ir import Equation, Literal, Program, Var
from .primitives import (all_gather_p, all_reduce_p, all_to_all_p, axis_index_p, ppermute_p,
                         pvary_p, reduce_scatter_p, shard_slice_p)

_NEEDS_VARYING = {all_gather_p, reduce_scatter_p, all_to_all_p, ppermute_p, all_reduce_p}


def rewrite(prog: Program, in_vmas, mesh_axes=None):
    """(Program with pvary inserted, list of output vmas). ``in_vmas``: one frozenset of mesh
    axis names per invar (consts must already be invars). ``mesh_axes``: the axes typed (default
    all); collectives over other names (an enclosing vmap's axis) vary over the batch, which
    the vmap's batch rule resolves, not over devices."""
    vma = {}
    typed = (lambda axes: frozenset(axes)) if mesh_axes is None else \
        (lambda axes: frozenset(axes) & frozenset(mesh_axes))
    subst = {}
    for v, m in zip(prog.invars, in_vmas):
        vma[v] = frozenset(m)
    eqns = []

    def read(x):
        return subst.get(x, x) if isinstance(x, Var) else x

    def vma_of(x):
        return frozenset() if isinstance(x, Literal) else vma[x]

    def lift(x, target):
        """``x`` made varying over ``target`` (a pvary equation when needed)."""
        have = vma_of(x)
        missing = tuple(sorted(target - have))
        if not missing:
            return x
        out = Var(x.aval)
        eqns.append(Equation(pvary_p, [x], [out], dict(axes=missing)))
        vma[out] = have | frozenset(missing)
        return out

    for eqn in prog.eqns:
        ins = [read(x) for x in eqn.invars]
        prim = eqn.primitive
        axes = typed(eqn.params.get("axes", ())) if prim.meta.get("collective") else None
        if prim is axis_index_p:
            out_vmas = [axes]
        elif prim is pvary_p:
            out_vmas = [vma_of(ins[0]) | axes]
        elif prim is shard_slice_p:
            out_vmas = [vma_of(ins[0]) | axes]
        elif prim in _NEEDS_VARYING:
            ins = [lift(x, vma_of(x) | axes) for x in ins]
            v = vma_of(ins[0])
            out_vmas = [v - axes] if prim in (all_reduce_p, all_gather_p) else [v]
        else:
            u = frozenset().union(*[vma_of(x) for x in ins]) if ins else frozenset()
            ins = [lift(x, u) for x in ins]
            out_vmas = [u] * len(eqn.outvars)
        new = Equation(prim, ins, list(eqn.outvars), eqn.params)
        eqns.append(new)
        for o, m in zip(eqn.outvars, out_vmas):
            vma[o] = m
    outs = [read(x) for x in prog.outvars]
    out_vmas = [vma_of(x) for x in outs]
    return Program([], [], list(prog.invars), eqns, outs), out_vmas
