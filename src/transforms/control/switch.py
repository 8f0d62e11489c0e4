"""``switch`` (multi-way branch on an integer index) and ``cond`` (two-way, on a predicate).

The primitive ``switch`` takes ``(index, *operands)`` and holds one Program per branch; only the
chosen branch runs. Rules: JVP switches over JVP'd branches; partial evaluation splits every
branch into a known and an unknown part with residual slots shared across branches (each branch
fills its own slots and zeros elsewhere); transposition switches over transposed branches; under
vmap an unbatched index stays a switch over batched branches while a batched index evaluates all
branches and selects per element.
"""
from __future__ import annotations

import numpy as np

from ... import tree as tree_util
from ...arrays.array import wrap
from ...arrays.convert import operand
from ...arrays.ops import rules as R
from ...core import dtypes
from ...core.ad_util import Zero, is_undefined
from ...core.avals import ShapedArray
from ...core.ir import Program, Var, subprograms
from ...core.primitive import Primitive
from ...core.trace import set_current_trace
from ..stage import trace_to_program
from . import programs as P
from . import sharding as CS

switch_p = Primitive("switch", multiple_results=True, family="control")


def _out_avals(branches):
    outs = []
    for k, v in enumerate(branches[0].outvars):
        weak = all(b.outvars[k].aval.weak_type for b in branches)
        outs.append(ShapedArray(v.aval.shape, v.aval.dtype, weak))
    return outs


def _impl(index, *ops, branches):
    i = int(np.clip(int(index), 0, len(branches) - 1))
    outs = P.call(branches[i], [wrap(o, False) for o in ops])
    return [np.asarray(o._buf) for o in outs]


def _weak(*in_weak, branches):
    return [a.weak_type for a in _out_avals(branches)]


def _jvp(primals, tangents, *, branches):
    index, ops = primals[0], primals[1:]
    nonzero = [type(t) is not Zero for t in tangents[1:]]
    jb = tuple(P.jvp_program(b, nonzero) for b in branches)
    ts = [t for t, nz in zip(tangents[1:], nonzero) if nz]
    outs = switch_p.bind(index, *ops, *ts, branches=jb)
    n = len(branches[0].outvars)
    return outs[:n], outs[n:]


def _partial_eval(trace, args, params):
    branches = params["branches"]
    index, ops = args[0], list(args[1:])
    if trace.is_unknown(index):
        return trace.stage(switch_p, args, params)
    unknowns = [trace.is_unknown(a) for a in ops]
    n_out = len(branches[0].outvars)
    out_u = [False] * n_out
    for b in branches:
        out_u = [a or c for a, c in zip(out_u, P.partial_eval_program(b, unknowns)[2])]
    splits = [P.partial_eval_program(b, unknowns, instantiate=out_u) for b in branches]
    res_avals = [[v.aval for v in k.outvars[len(k.outvars) - nr:]] for k, _, _, nr in splits]
    slots = [a for avs in res_avals for a in avs]
    offsets = np.cumsum([0] + [len(a) for a in res_avals])
    known_ops = [a for a, u in zip(ops, unknowns) if not u]
    unknown_ops = [a for a, u in zip(ops, unknowns) if u]
    known_progs, unknown_progs = [], []
    for bi, (k, u, _, nr) in enumerate(splits):
        known_progs.append(_with_residual_slots(k, nr, slots, offsets[bi]))
        unknown_progs.append(_reading_residual_slots(u, nr, slots, offsets[bi]))
    with set_current_trace(trace.parent):
        k_outs = switch_p.bind(index, *known_ops, branches=tuple(known_progs))
    n_known = n_out - sum(out_u)
    residuals = k_outs[n_known:]
    u_outs = trace.stage(switch_p, [index, *residuals, *unknown_ops],
                         {"branches": tuple(unknown_progs)})
    ki, ui = iter(k_outs[:n_known]), iter(u_outs)
    return [next(ui) if u else next(ki) for u in out_u]


def _with_residual_slots(known, nr, slots, offset):
    """Known branch emitting its residuals into its slots and zeros into the other slots."""
    n_main = len(known.outvars) - nr

    def fun(*xs):
        outs = P.call(known, xs)
        main, res = outs[:n_main], outs[n_main:]
        full = [R.zeros_like_aval(a) for a in slots]
        full[offset:offset + nr] = res
        return list(main) + full
    closed, consts = P.stage(fun, [v.aval for v in known.invars])
    return P._bind_consts(closed, consts) if consts else closed


def _reading_residual_slots(unknown, nr, slots, offset):
    """Unknown branch taking every residual slot and reading only its own."""
    others = [Var(a) for a in slots]
    invars = others[:offset] + list(unknown.invars[:nr]) + others[offset + nr:] + \
        list(unknown.invars[nr:])
    return Program(unknown.constvars, unknown.consts, invars, unknown.eqns, unknown.outvars)


def _transpose(cts, index, *ops, branches):
    lin = [is_undefined(o) for o in ops]
    known_vals = [o for o, u in zip(ops, lin) if not u]
    t_branches = []
    for b in branches:
        k_vars = [v for v, u in zip(b.invars, lin) if not u]
        l_vars = [v for v, u in zip(b.invars, lin) if u]
        view = Program(b.constvars, b.consts, k_vars + l_vars, b.eqns, b.outvars)
        t_branches.append(P.transpose_program(view, len(k_vars)))
    cts = [R.instantiate(c) for c in cts]
    outs = iter(switch_p.bind(index, *known_vals, *cts, branches=tuple(t_branches)))
    return [None] + [next(outs) if u else None for u in lin]


def _batch(args, dims, *, branches):
    index, idim = args[0], dims[0]
    ops, odims = list(args[1:]), list(dims[1:])
    size = R.batch_size(args, dims)
    if idim is None:
        bb = tuple(P.batch_program(b, odims, size) for b in branches)
        outs = switch_p.bind(index, *ops, branches=bb)
        return outs, [0] * len(outs)
    snp = R.snp()
    idx = snp.clip(R.move_axis(index, idim, 0), 0, len(branches) - 1)
    if any(_calls_host(b) for b in branches):
        return _batch_member_by_member(idx, ops, odims, branches)
    per_branch = [P.call(P.batch_program(b, odims, size),
                         [_derivative_where(idx == bi, o, d) for o, d in zip(ops, odims)])
                  for bi, b in enumerate(branches)]
    outs = []
    for k in range(len(branches[0].outvars)):
        out = per_branch[0][k]
        for bi in range(1, len(branches)):
            cand = per_branch[bi][k]
            mask = snp.reshape(idx == bi, (size,) + (1,) * (cand.ndim - 1))
            out = snp.where(mask, cand, out)
        outs.append(out)
    return outs, [0] * len(outs)


def _calls_host(prog):
    """True when ``prog`` (or a body inside it) runs a host callback (debug.print / check,
    io_callback, ...). Collectives are effects too, but they belong to every member alike."""
    return any(e.primitive.meta.get("host_callback") or any(_calls_host(p) for p in
                                                           subprograms(e.params))
               for e in prog.eqns)


def _batch_member_by_member(idx, ops, odims, branches):
    """A batched index over branches with effects (debug.print / check / callbacks): each
    member runs only the branch it takes, in member order, as a ``scan`` over the members (an
    untaken branch's ``debug.check`` must not fire; its prints must not appear)."""
    from .scan import scan
    snp = R.snp()
    mapped = [R.move_axis(o, d, 0) for o, d in zip(ops, odims) if d is not None]
    shared = [o for o, d in zip(ops, odims) if d is None]

    def member(carry, xs):
        i, ms = xs[0], iter(xs[1])
        sh = iter(shared)
        args = [next(ms) if d is not None else next(sh) for d in odims]
        return carry, switch_p.bind(i, *args, branches=branches)
    _, outs = scan(member, (), (idx, mapped))
    outs = list(outs) if isinstance(outs, (list, tuple)) else [outs]
    return [snp.asarray(o) for o in outs], [0] * len(outs)


def _derivative_where(selected, x, d):
    """``x`` (batched at ``d``) whose derivative reaches a branch only for the batch members
    that take it: every branch runs on every member, and an untaken branch's derivative may be
    infinite there (log, sqrt, 1/x at 0); its zero cotangent times that infinity would be NaN in
    reverse mode (forward mode selects it away). ``where(selected, x, stop_gradient(x))`` has
    the value ``x`` and the derivative ``where(selected, ., 0)`` at every order, in both modes.
    Operands shared by all members (unbatched) are not masked: their derivative sums over the
    members, so masking would need a per-member copy."""
    if d is None or not dtypes.is_inexact(x.dtype):
        return x
    from ...arrays.ops.autodiff import stop_gradient
    mask = R.snp().reshape(selected, tuple(-1 if a == d else 1 for a in range(x.ndim)))
    return R.snp().where(mask, x, stop_gradient(x))


switch_p.impl = _impl
switch_p.abstract_eval = lambda index, *avals, branches: _out_avals(branches)
switch_p.weak_type = _weak
switch_p.jvp = _jvp
switch_p.transpose = _transpose
switch_p.batch = _batch
switch_p.is_linear = True  # linear in the operands its branches are linear in
switch_p.meta["partial_eval"] = _partial_eval
CS.install(switch_p, CS.switch_sharding, CS.switch_local_params)


def _index_operand(op, index, n):
    if isinstance(index, bool) or isinstance(index, (int, np.integer)):
        return wrap(np.int32(min(max(int(index), 0), n - 1)), False)
    if isinstance(index, float) or isinstance(index, complex):
        raise TypeError(f"{op}: index must be an integer, got Python {type(index).__name__} "
                        f"{index!r}")
    x = operand(index, op)
    if tuple(x.shape) != ():
        raise TypeError(f"{op}: index must be a scalar (shape ()), got shape {tuple(x.shape)}")
    if not (dtypes.is_integer(x.dtype) or dtypes.is_bool(x.dtype)):
        raise TypeError(f"{op}: index must have an integer or bool dtype, got {x.dtype}")
    snp = R.snp()
    return snp.astype(snp.clip(snp.astype(x, dtypes.int64), 0, n - 1), dtypes.int32)


def _trace_branches(op, branches, names, leaves, in_tree):
    """One Program per branch; ``names[i]`` is how errors call branch i (e.g. "true_fun")."""
    avals = [x.aval for x in leaves]
    progs, infos = [], []
    for fn, name in zip(branches, names):
        if not callable(fn):
            raise TypeError(f"{op}: {name} is not callable: {fn!r}")
        record = []

        def flat(*xs, fn=fn, record=record):
            out = fn(*tree_util.unflatten(in_tree, list(xs)))
            paths, o_leaves, ot = tree_util.paths_leaves_treedef(out)
            record.append((paths, ot))
            return [operand(o, op) for o in o_leaves]

        progs.append(trace_to_program(flat, avals))
        infos.append(record[0])
    paths0, tree0 = infos[0]
    out0 = progs[0].out_avals
    for i in range(1, len(progs)):
        paths, tree = infos[i]
        if tree != tree0:
            raise TypeError(f"{op}: {names[i]} returns a different structure than {names[0]}: "
                            f"{tree} vs {tree0}; {_same(op)}")
        for path, a, b in zip(paths0, out0, progs[i].out_avals):
            if a.shape != b.shape or a.dtype != b.dtype:
                raise TypeError(f"{op}: {names[i]} output {tree_util.path_str(path)} is "
                                f"{b.str_short()} but {names[0]} gives {a.str_short()}; "
                                f"{_same(op)}")
    return progs, tree0


def _same(op):
    return ("true_fun and false_fun must return the same structure, shapes and dtypes"
            if op == "cond" else "all branches must return the same structure, shapes and dtypes")


def _close_branches(progs):
    """All branches take (every branch's constants, operands); returns (programs, constants)."""
    consts = [c for p in progs for c in p.consts]
    closed, start = [], 0
    for p in progs:
        n = len(p.consts)
        before = [Var(c.aval) for c in consts[:start]]
        after = [Var(c.aval) for c in consts[start + n:]]
        closed.append(Program([], [], before + list(p.constvars) + after + list(p.invars),
                              p.eqns, p.outvars))
        start += n
    return closed, consts


def switch(index, branches, *operands):
    """Applies ``branches[index](*operands)``; only the chosen branch runs.

    Args:
        index: Python int or 0-d integer (or bool) array; clamped into
            ``[0, len(branches) - 1]`` (so -1 runs branch 0 and ``len(branches)`` the last).
        branches: non-empty sequence of callables, each taking ``*operands``.
        operands: pytrees of arrays passed to the chosen branch (passed once, shared by all).
    Returns:
        The chosen branch's output pytree.
    Raises:
        ValueError: empty ``branches``.
        TypeError: non-scalar or float index; branches returning different structures, shapes
            or dtypes (names the branch number and the first differing leaf path).
    """
    if callable(branches) or not hasattr(branches, "__len__"):
        raise TypeError(f"switch: branches must be a sequence of callables, got {branches!r}")
    branches = list(branches)
    if not branches:
        raise ValueError("switch: branches must not be empty")
    return _switch("switch", index, branches, [f"branch {i}" for i in range(len(branches))],
                   operands)


def _switch(op, index, branches, names, operands):
    """``switch`` as the user-facing ``op`` calls it: errors say ``op`` and ``names[i]`` for
    branch i (cond: "false_fun", "true_fun")."""
    idx = _index_operand(op, index, len(branches))
    leaves, in_tree = tree_util.flatten(operands)
    leaves = [operand(x, op) for x in leaves]
    progs, out_tree = _trace_branches(op, branches, names, leaves, in_tree)
    closed, consts = _close_branches(progs)
    outs = switch_p.bind(idx, *consts, *leaves, branches=tuple(closed))
    return tree_util.unflatten(out_tree, outs)


def cond(pred, true_fun, false_fun, *operands):
    """``true_fun(*operands)`` if ``pred`` else ``false_fun(*operands)``: a two-branch switch.

    Args:
        pred: a scalar bool or integer (Python value or 0-d array); nonzero means true.
        true_fun, false_fun: callables taking ``*operands`` and returning pytrees of arrays of
            the same structure, shapes and dtypes.
        operands: pytrees of arrays passed to the chosen function.
    Raises:
        TypeError: non-scalar or non-bool/int ``pred``; a function that is not callable, or
            ``true_fun`` and ``false_fun`` returning different structures, shapes or dtypes
            (the message names them and the first differing leaf path).
    """
    if isinstance(pred, (float, complex)):
        raise TypeError(f"cond: pred must be a scalar bool or integer, got {type(pred).__name__}")
    if not isinstance(pred, (bool, int, np.integer, np.bool_)):
        p = operand(pred, "cond")
        if tuple(p.shape) != ():
            raise TypeError(f"cond: pred must be a scalar (shape ()), got shape {tuple(p.shape)}")
        if not (dtypes.is_bool(p.dtype) or dtypes.is_integer(p.dtype)):
            raise TypeError(f"cond: pred must have a bool or integer dtype, got {p.dtype}")
        pred = R.snp().not_equal(p, 0)
    else:
        pred = bool(pred)
    return _switch("cond", pred, [false_fun, true_fun], ["false_fun", "true_fun"], operands)
