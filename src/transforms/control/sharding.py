"""Sharding strategies of the control-flow primitives (switch, scan, while): body strategies.

A split operand may stay split through a control-flow primitive when its body programs can run
on the pieces without communicating. On one mesh axis that is decided by propagating the
operands' placements through the body (``body_placements``): an equation whose operands are all
replicated runs whole, and any other must have a strategy of its own (its ``sharding`` rule)
taking exactly the placements it finds, so no redistribution is ever needed inside. Besides:

* switch: the index is replicated (every device takes the same branch) and all branches end in
  the same result placements;
* scan: the carries come back in the placements they came in (a fixed point); the scanned
  (leading) dim of ``xs`` / ``ys`` is never split;
* while: the carries are a fixed point of the body, and the predicate is replicated (every
  device runs the same number of steps).

Candidate placements split one dim of every body input of the same rank and size alike (the
elementwise pattern), with a scan's / while's constants replicated; for scan also with the
carries replicated, and for switch a pending sum of every operand (linear branches).

The chosen body is then re-staged on the pieces' shapes (``restage``, the ``shard_params`` of
these primitives). Local result shapes must follow from local operand shapes, so an equation
whose params carry shapes or whose pieces depend on their position (``shard_params`` /
``shard_local``: reshape, broadcast_in_dim, slice, iota, random draws) may only run whole; nested
control flow re-stages itself. Every strategy found this way is as sound as the body's own
strategies; everything else runs the primitive replicated.
"""
from __future__ import annotations

from ...arrays.ops.rules_sharding import R, Partial, Shard
from ...core.avals import ShapedArray
from ...core.ir import Literal, Program
from ...core.trace import new_trace
from ..stage import StagingTrace


def _local_effects(prim):
    return "shard_params" in prim.meta or "shard_local" in prim.meta


def body_placements(prog: Program, in_pl):
    """Placements (one mesh axis) of ``prog``'s outputs when its inputs have ``in_pl``, with no
    communication inside; None when some equation cannot take what it is given."""
    env = dict(zip(prog.invars, in_pl))

    def of(x):
        return R if isinstance(x, Literal) else env.get(x, R)   # constvars: replicated

    for eqn in prog.eqns:
        cur = tuple(of(x) for x in eqn.invars)
        prim = eqn.primitive
        if all(p.is_replicate() for p in cur):
            outs = (R,) * len(eqn.outvars)
        else:
            rule = prim.sharding
            if rule is None or (_local_effects(prim) and not prim.meta.get("restages")):
                return None
            in_avals = [x.aval for x in eqn.invars]
            out_avals = [v.aval for v in eqn.outvars]
            outs = next((tuple(o) for o, i in rule(in_avals, out_avals, **eqn.params)
                         if tuple(i) == cur), None)
            if outs is None:
                return None
        env.update(zip(eqn.outvars, outs))
    return tuple(of(x) for x in prog.outvars)


def split_vectors(avals, fixed=0):
    """Candidate placements for inputs ``avals``: per dim ``d`` of each input past the first
    ``fixed`` (kept replicated), ``Shard(d)`` for every such input of the same rank and size."""
    seen, out = set(), []
    for a in avals[fixed:]:
        for d, n in enumerate(a.shape):
            if n <= 1:
                continue
            vec = (R,) * fixed + tuple(
                Shard(d) if len(b.shape) == len(a.shape) and b.shape[d] == n else R
                for b in avals[fixed:])
            if vec not in seen:
                seen.add(vec)
                out.append(vec)
    return out


def restage(prog: Program, local_avals) -> Program:
    """``prog`` staged again on inputs of ``local_avals`` (each device's pieces); equations whose
    operands kept their shapes run as they are, nested control flow re-stages itself.

    Raises:
        ValueError: an equation that cannot run on pieces (its params carry shapes).
    """
    with new_trace(StagingTrace) as trace:
        args = [trace.new_arg(a) for a in local_avals]
        env = dict(zip(prog.invars, args))
        env.update(zip(prog.constvars, prog.consts))

        def read(x):
            if isinstance(x, Literal):
                from ...core.trace import EvalTrace
                return EvalTrace.wrap(x.val, x.aval.weak_type)
            return env[x]

        for eqn in prog.eqns:
            xs = [read(x) for x in eqn.invars]
            prim, params = eqn.primitive, eqn.params
            if any(tuple(getattr(x, "shape", ())) != tuple(v.aval.shape)
                   for x, v in zip(xs, eqn.invars)):
                if prim.meta.get("restages"):
                    params = prim.meta["shard_params"](params, [x.aval for x in xs], None)
                elif _local_effects(prim):
                    raise ValueError(f"{prim.name}: its params carry shapes; it cannot run on "
                                     "the pieces inside a control-flow body")
            outs = prim.bind(*xs, **params)
            env.update(zip(eqn.outvars, outs if prim.multiple_results else [outs]))
        return trace.to_program(args, [read(x) for x in prog.outvars])


def _stacked(p):
    """A body placement of one iteration's value as the placement of the stacked value."""
    return Shard(p.dim + 1) if p.is_shard() else p


def _unstacked(a):
    return ShapedArray(tuple(a.shape[1:]), a.dtype, a.weak_type)


# ---- switch --------------------------------------------------------------------------------------

def switch_sharding(in_avals, out_avals, *, branches):
    """Body strategies of ``switch``: the index replicated and the operands split alike (or all
    pending sums, for float operands of linear branches) wherever every branch runs on the pieces
    with no communication and all branches give the same result placements.

    Returns:
        ``[(out_placements, in_placements), ...]`` for one mesh axis.
    """
    ops = in_avals[1:]
    vecs = split_vectors(ops)
    if ops and all(a.dtype.kind in "fc" for a in ops):
        vecs.append((Partial("sum"),) * len(ops))
    combos = []
    for vec in vecs:
        outs = {body_placements(b, vec) for b in branches}
        if len(outs) == 1 and None not in outs:
            combos.append((outs.pop(), (R,) + vec))
    return combos


def switch_local_params(params, in_avals, out_shapes):
    """``switch``'s params with every branch re-staged on the operands' local avals."""
    return dict(params, branches=tuple(restage(b, in_avals[1:]) for b in params["branches"]))


# ---- scan ------------------------------------------------------------------------------------------

def scan_sharding(in_avals, out_avals, *, body, length, reverse, num_consts, num_carry,
                  unroll):
    """Body strategies of ``scan``: constants replicated; carries and the per-iteration slices of
    ``xs`` split alike (the scanned leading dim never), also with the carries replicated, wherever
    the body needs no communication and returns the carries in their input placements.

    Returns:
        ``[(out_placements, in_placements), ...]`` for one mesh axis (``xs`` / ``ys`` placements
        shifted by the stacked dim).
    """
    nc, nk = num_consts, num_carry
    b_avals = [v.aval for v in body.invars]
    vecs = split_vectors(b_avals, nc)
    vecs += [v[:nc] + (R,) * nk + v[nc + nk:] for v in vecs
             if any(not p.is_replicate() for p in v[nc + nk:])]
    combos, seen = [], set()
    for vec in vecs:
        if vec in seen:
            continue
        seen.add(vec)
        outs = body_placements(body, vec)
        if outs is None or outs[:nk] != vec[nc:nc + nk]:
            continue
        ins = vec[:nc + nk] + tuple(_stacked(p) for p in vec[nc + nk:])
        combos.append((outs[:nk] + tuple(_stacked(p) for p in outs[nk:]), ins))
    return combos


def scan_local_params(params, in_avals, out_shapes):
    """``scan``'s params with the body re-staged on the local avals (``xs`` without their scanned
    dim)."""
    nc, nk = params["num_consts"], params["num_carry"]
    body_avals = list(in_avals[:nc + nk]) + [_unstacked(a) for a in in_avals[nc + nk:]]
    return dict(params, body=restage(params["body"], body_avals))


# ---- while -----------------------------------------------------------------------------------------

def while_sharding(in_avals, out_avals, *, cond, body, n_cond, n_body, max_iterations):
    """Body strategies of ``while_loop``: the predicate's and body's constants replicated and the
    carries split alike wherever the body maps the carries' placements to themselves and the
    predicate comes out replicated (every device runs the same number of steps).

    Returns:
        ``[(out_placements, in_placements), ...]`` for one mesh axis.
    """
    carry = in_avals[n_cond + n_body:]
    combos = []
    for vec in split_vectors(carry):
        pred = body_placements(cond, (R,) * n_cond + vec)
        if pred is None or not all(p.is_replicate() for p in pred):
            continue
        if body_placements(body, (R,) * n_body + vec) != vec:
            continue
        combos.append((vec, (R,) * (n_cond + n_body) + vec))
    return combos


def while_local_params(params, in_avals, out_shapes):
    """``while_loop``'s params with ``cond`` and ``body`` re-staged on the local avals."""
    n_cond, n_body = params["n_cond"], params["n_body"]
    carry = list(in_avals[n_cond + n_body:])
    return dict(params, cond=restage(params["cond"], list(in_avals[:n_cond]) + carry),
                body=restage(params["body"], list(in_avals[n_cond:n_cond + n_body]) + carry))


def install(prim, rule, local_params):
    """Sets ``prim``'s body strategy and its re-staging on pieces."""
    prim.sharding = rule
    prim.meta["shard_params"] = local_params
    prim.meta["restages"] = True
