"""Sharding strategies: how a primitive can run when its operands are split along ONE mesh axis.

A primitive's ``sharding`` rule is ``rule(in_avals, out_avals, **params) -> list of (outs, ins)``
where ``ins`` has one Placement per operand and ``outs`` one per result (src/core/placements.py:
``Shard(dim)`` over the operand's own dims, ``Replicate()``, ``Partial(op)``). Each entry is a
way to compute the result piece by piece without communication: e.g. ``add`` can take both
operands split along dim 0 and give a result split along dim 0. Running everything replicated is
always possible and never listed. The partitioner (src/collectives/partition.py) expands these
single-axis strategies to n-d meshes and picks per mesh axis the one whose redistribution of the
current operands moves the fewest bytes.

A primitive whose params carry shapes (reshape, broadcast_in_dim, slice...) also declares
``prim.meta["shard_params"](params, in_local_avals, out_local_shapes) -> params``: its params for
one device's pieces. The partitioner checks every choice against each device's local abstract
evaluation, so a rule may list a strategy that only works for some sizes (uneven chunks): it is
dropped where it does not fit.

A primitive whose pieces depend on where they lie in the whole (``iota`` along its dim, random
draws) declares ``prim.meta["shard_local"](operands, starts, params, local_params) ->
result(s)``: when one of its results is split, the partitioner calls it instead of binding the
primitive on the pieces, with ``starts[j][d]`` the global index where the device's piece of
result ``j`` starts along dim ``d`` (0 where not split, else an int64 scalar computed from
``axis_index``; devices with equal local shapes share one program, not one start).

Control-flow primitives (src/transforms/control/sharding.py) derive their strategies from their
bodies: a split stays split where the body runs on pieces without communication.

This module has the family defaults; primitives with special structure state theirs next to
their other rules.
"""
from __future__ import annotations

from ...core.placements import REPLICATE, Partial, Shard

R = REPLICATE


def _dims_of_result(r, a, d):
    """The dim of operand aval ``a`` that result dim ``d`` (of a rank-``r`` broadcast) reads, or
    None when ``a`` is broadcast along it."""
    k = d - (r - len(a.shape))
    return k if k >= 0 else None


def elementwise(partials=(), selectors=None):
    """Strategy of a broadcasting elementwise op: every result dim of size > 1 may be split, the
    operands that have it split alike and the ones broadcast along it replicated.

    Args:
        partials: ``(out_op, in_ops)`` entries for ops linear in some operands, e.g. add:
            ``("sum", ("sum", "sum"))``; multiply: ``("sum", ("sum", None))`` (None: replicated).
        selectors: for selection ops (``where``, ``choose``): the number of leading operands that
            choose among the others. With the selectors replicated, every pending reduction
            ("sum", "max", "min") of the chosen operands passes through: each element of the
            result is one of them, taken at the same position on every device.
    """
    def rule(in_avals, out_avals, **params):
        out = out_avals[0]
        r = len(out.shape)
        combos = []
        for d in range(r):
            if out.shape[d] == 1:
                continue
            ins = []
            for a in in_avals:
                k = _dims_of_result(r, a, d)
                ins.append(Shard(k) if k is not None and a.shape[k] == out.shape[d] else R)
            combos.append(((Shard(d),) * len(out_avals), tuple(ins)))
        if in_avals and in_avals[-1].dtype.kind != "b":   # bool add / multiply are or / and
            for out_op, in_ops in partials:
                combos.append(((Partial(out_op),) * len(out_avals),
                               tuple(Partial(o) if o else R for o in in_ops)))
        if selectors is not None:
            n_val = len(in_avals) - selectors
            for op in VALUE_OPS if in_avals[-1].dtype.kind != "b" else VALUE_OPS[1:]:
                combos.append(((Partial(op),) * len(out_avals),
                               (R,) * selectors + (Partial(op),) * n_val))
        return combos
    return rule


VALUE_OPS = ("sum", "max", "min")
"""The pending reductions a value-moving op (selection, copy, permutation) passes through."""


def replicated_only(in_avals, out_avals, **params):
    """The strategy of a primitive that runs replicated by design (a value-dependent result
    shape, a nullary op whose value has no layout, a stand-in of differentiation). Stating it
    marks the choice as deliberate: the partitioner does not log it as missing."""
    return []


# Linear pieces of the common elementwise ops (the result's Partial from operands' Partials).
LINEAR_SUM = (("sum", ("sum", "sum")),)
# Not offered: a pending sum times (or divided by) a replicated operand, piece by piece. It is
# exact in real arithmetic but not in IEEE arithmetic: with an inf / NaN in the replicated
# operand (or a zero divisor) the pieces combine into NaN where the whole value gives +-inf
# (the other positions hold -0.0, and -0.0 * inf is NaN; inf - inf from pieces of mixed sign),
# and a piece can overflow where the sum does not. The pending sum is reduced first instead.
UNARY_SUM = (("sum", ("sum",)),)
MAX_MAX = (("max", ("max", "max")),)
MIN_MIN = (("min", ("min", "min")),)


def reduction(partial_op=None, linear=False):
    """Strategy of a reduction over ``axes``: a kept dim stays split; a reduced dim that is split
    gives ``Partial(partial_op)`` (None: not expressible, e.g. argmax); a Partial operand stays
    Partial when the reduction is ``linear`` in it (sum of partial sums)."""
    def rule(in_avals, out_avals, *, axes, **params):
        x = in_avals[0]
        kept = [d for d in range(len(x.shape)) if d not in axes]
        combos = []
        for d in range(len(x.shape)):
            if d in axes:
                if partial_op is not None:
                    combos.append(((Partial(partial_op),), (Shard(d),)))
            else:
                combos.append(((Shard(kept.index(d)),), (Shard(d),)))
        if linear:
            combos.append(((Partial("sum"),), (Partial("sum"),)))
        if partial_op in ("max", "min"):
            combos.append(((Partial(partial_op),), (Partial(partial_op),)))
        return combos
    return rule


def along(axis_of, partials=()):
    """Strategy of an op acting along some dims (cumulative ops, sort, fft...): the other dims may
    be split; ``axis_of(params, ndim)`` gives the dims acted on. Every result has the operand's
    rank and size outside those dims; further operands of another rank stay replicated.

    Args:
        partials: the pending reductions of the first operand that pass through to every result
            (the others replicated): "sum" for ops linear in it (cumsum, fft), "max" / "min"
            for running extrema (``cummax(max(a, b)) == max(cummax(a), cummax(b))``). Sums of
            bool operands are skipped (bool addition is logical or).
    """
    def rule(in_avals, out_avals, **params):
        x = in_avals[0]
        acted = set(axis_of(params, len(x.shape)))
        combos = []
        for d in range(len(x.shape)):
            if d in acted or x.shape[d] == 1:
                continue
            ins = tuple(Shard(d) if len(a.shape) == len(x.shape) else R for a in in_avals)
            combos.append(((Shard(d),) * len(out_avals), ins))
        for op in partials:
            if op == "sum" and x.dtype.kind == "b":
                continue
            combos.append(((Partial(op),) * len(out_avals),
                           (Partial(op),) + (R,) * (len(in_avals) - 1)))
        return combos
    return rule


def batch_dims(n_core):
    """Strategy of an op on the trailing ``n_core`` dims of its operands (linear algebra): the
    leading (batch) dims may be split in every operand and result alike."""
    def rule(in_avals, out_avals, **params):
        nb = len(in_avals[0].shape) - n_core
        combos = []
        for d in range(nb):
            if in_avals[0].shape[d] == 1:
                continue
            ins = tuple(Shard(d) if len(a.shape) - n_core > d else R for a in in_avals)
            outs = tuple(Shard(d) if len(o.shape) > d else R for o in out_avals)
            combos.append((outs, ins))
        return combos
    return rule


def local_out_shape(name):
    """A ``shard_params`` function setting the param ``name`` to the local result shape."""
    def fn(params, in_avals, out_shapes):
        return dict(params, **{name: tuple(out_shapes[0])})
    return fn


VALUE_PARTIALS = tuple(((Partial(op),), (Partial(op),)) for op in ("sum", "max", "min"))
"""A shape op moves values without changing them: every pending reduction passes through."""


def view_groups(in_shape, out_shape):
    """Pairs ``(in_dims, out_dims)`` of consecutive dims with equal products (the structure of a
    C-order reshape); dims of size 1 join the group to their left."""
    groups, i, j = [], 0, 0
    n_in, n_out = len(in_shape), len(out_shape)
    while i < n_in or j < n_out:
        gi, gj = [i] if i < n_in else [], [j] if j < n_out else []
        pi = in_shape[i] if i < n_in else 1
        pj = out_shape[j] if j < n_out else 1
        i, j = i + bool(gi), j + bool(gj)
        while pi != pj:
            if pi < pj and i < n_in:
                pi *= in_shape[i]
                gi.append(i)
                i += 1
            elif j < n_out:
                pj *= out_shape[j]
                gj.append(j)
                j += 1
            else:
                break
        groups.append((gi, gj))
    return groups


def reshape_strategy(in_avals, out_avals, **params):
    """A reshape keeps the split of the major dim of each group of merged / split dims (the
    partitioner drops the choice where chunk sizes would not line up)."""
    groups = view_groups(in_avals[0].shape, out_avals[0].shape)
    combos = [((Shard(gj[0]),), (Shard(gi[0]),)) for gi, gj in groups
              if gi and gj and in_avals[0].shape[gi[0]] > 1 and out_avals[0].shape[gj[0]] > 1]
    return combos + list(VALUE_PARTIALS)
