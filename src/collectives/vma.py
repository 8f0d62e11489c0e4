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

Higher-order equations (control flow) are typed conservatively: all their operands are made
varying over the union of the operands' axes and of what their bodies' outputs vary over, and
so are their outputs; the bodies are typed the same way inside (pvary inserted where an
invariant value meets a varying one), so a ``psum`` in a loop body transposes like one outside.
"""
from __future__ import annotations

from ..core.ir import Equation, Literal, Program, Var, subprogram_params
from .primitives import (all_gather_p, all_reduce_p, all_to_all_p, axis_index_p, ppermute_p,
                         pvary_p, reduce_scatter_p, shard_slice_p)

_NEEDS_VARYING = {all_gather_p, reduce_scatter_p, all_to_all_p, ppermute_p, all_reduce_p}


def rewrite(prog: Program, in_vmas, mesh_axes=None):
    """(Program with pvary inserted, list of output vmas). ``in_vmas``: one frozenset of mesh
    axis names per invar (constvars, concrete, are invariant). ``mesh_axes``: the axes typed
    (default all); collectives over other names (an enclosing vmap's axis) vary over the batch,
    which the vmap's batch rule resolves, not over devices."""
    mesh_axes = None if mesh_axes is None else frozenset(mesh_axes)
    return _rewrite(prog, [frozenset(m) for m in in_vmas], mesh_axes)


def _rewrite(prog, in_vmas, mesh_axes):
    vma = {v: frozenset() for v in prog.constvars}
    vma.update(zip(prog.invars, in_vmas))
    subst = {}
    eqns = []

    def typed(axes):
        return frozenset(axes) if mesh_axes is None else frozenset(axes) & mesh_axes

    def read(x):
        return subst.get(x, x) if isinstance(x, Var) else x

    def vma_of(x):
        return frozenset() if isinstance(x, Literal) else vma[x]

    def lift(x, target):
        """``x`` made varying over ``target`` (a pvary equation when needed)."""
        return _lift(x, vma_of(x), target, eqns, vma)

    for eqn in prog.eqns:
        ins = [read(x) for x in eqn.invars]
        prim = eqn.primitive
        params = eqn.params
        axes = typed(params.get("axes", ())) if prim.meta.get("collective") else None
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
            bodies = dict(subprogram_params(params))
            if bodies:
                params, u = _rewrite_bodies(params, bodies, u, mesh_axes)
            ins = [lift(x, u) for x in ins]
            out_vmas = [u] * len(eqn.outvars)
        eqns.append(Equation(prim, ins, list(eqn.outvars), params))
        for o, m in zip(eqn.outvars, out_vmas):
            vma[o] = m
    outs = [read(x) for x in prog.outvars]
    out_vmas = [vma_of(x) for x in outs]
    return Program(prog.constvars, prog.consts, list(prog.invars), eqns, outs,
                   prog.effects), out_vmas


def _lift(x, have, target, eqns, vma):
    missing = tuple(sorted(target - have))
    if not missing:
        return x
    out = Var(x.aval)
    eqns.append(Equation(pvary_p, [x], [out], dict(axes=missing)))
    vma[out] = have | frozenset(missing)
    return out


def _rewrite_bodies(params, bodies, u, mesh_axes):
    """Types the ``bodies`` (param key -> Programs) of a higher-order equation whose operands
    all vary over ``u``: every body input varies over ``u``, and every body output is lifted to
    the union ``u`` of all the bodies' output vmas (grown until it is a fixed point, as loop
    carries need), so that collectives inside bodies get the same pvary insertion, hence the
    same transposes, as outside. Returns (new params, ``u``)."""
    while True:
        typed = {k: [_rewrite(p, [u] * len(p.invars), mesh_axes) for p in progs]
                 for k, progs in bodies.items()}
        grown = u.union(*[m for items in typed.values() for _, outs in items for m in outs])
        if grown == u:
            break
        u = grown
    new = dict(params)
    for k, items in typed.items():
        lifted = [_lift_outputs(p, outs, u) for p, outs in items]
        new[k] = lifted[0] if isinstance(params[k], Program) else tuple(lifted)
    return new, u


def _lift_outputs(prog, out_vmas, u):
    eqns, vma = list(prog.eqns), {}
    outs = [_lift(x, m, u, eqns, vma) for x, m in zip(prog.outvars, out_vmas)]
    return Program(prog.constvars, prog.consts, prog.invars, eqns, outs, prog.effects)
