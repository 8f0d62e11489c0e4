"""``scan``: a loop with a carry and stacked per-iteration outputs; also ``map``.

Primitive ``scan`` takes ``(*consts, *init, *xs)`` and holds the body Program
``(consts, carry, x) -> (carry, y)``. Rules: JVP scans the JVP'd body; partial evaluation splits
the body (reaching a fixed point of which carries are unknown) into a known scan that also emits
per-iteration residuals and an unknown scan that consumes them (residuals that are the body's
consts or scanned slices are passed through, not stacked); transposition runs the
transposed body in the opposite direction, accumulating cotangents of linear constants in the
carry; vmap batches the body (all carries batched).
"""
from __future__ import annotations

import numpy as np

from ... import tree as tree_util
from ...arrays.array import wrap
from ...arrays.convert import operand
from ...arrays.ops import rules as R
from ...core import dtypes
from ...core.ad_util import Zero, is_undefined, tangent_aval
from ...core.avals import ShapedArray, is_symbolic
from ...core.ir import Var
from ...core.primitive import Primitive
from ...core.trace import set_current_trace
from ..stage import trace_to_program
from . import programs as P
from . import sharding as CS
from .programs import split_list as _split

scan_p = Primitive("scan", multiple_results=True, family="control")


def _impl(*args, body, length, reverse, num_consts, num_carry, unroll):
    vals = [wrap(a, False) for a in args]
    consts, carry, xs = _split(vals, num_consts, num_carry)
    ys_steps = []
    order = range(length - 1, -1, -1) if reverse else range(length)
    for i in order:
        outs = P.call(body, consts + carry + [x[i] for x in xs])
        carry, y = outs[:num_carry], outs[num_carry:]
        ys_steps.append([np.asarray(v._buf) for v in y])
    if reverse:
        ys_steps.reverse()
    y_avals = [v.aval for v in body.outvars[num_carry:]]
    ys = [np.stack([s[k] for s in ys_steps]) if ys_steps else
          np.zeros((0,) + tuple(a.shape), a.dtype) for k, a in enumerate(y_avals)]
    return [np.asarray(c._buf) for c in carry] + ys


def _abstract_eval(*avals, body, length, reverse, num_consts, num_carry, unroll):
    carry = [v.aval for v in body.outvars[:num_carry]]
    carry = [ShapedArray(c.shape, c.dtype, a.weak_type)
             for c, a in zip(carry, avals[num_consts:num_consts + num_carry])]
    ys = [ShapedArray((length,) + tuple(v.aval.shape), v.aval.dtype, v.aval.weak_type)
          for v in body.outvars[num_carry:]]
    return carry + ys


def _weak(*w, body, length, reverse, num_consts, num_carry, unroll):
    return list(w[num_consts:num_consts + num_carry]) + \
        [v.aval.weak_type for v in body.outvars[num_carry:]]


def _jvp(primals, tangents, *, body, length, reverse, num_consts, num_carry, unroll):
    nc, nk = num_consts, num_carry
    consts, carry, xs = _split(primals, nc, nk)
    t_consts, t_carry, t_xs = _split(tangents, nc, nk)
    nz_c = [type(t) is not Zero for t in t_consts]
    nz_k = [dtypes.is_inexact(c.dtype) for c in carry]
    nz_x = [type(t) is not Zero for t in t_xs]
    jb = P.jvp_program(body, nz_c + nz_k + nz_x)
    n_in, n_out = len(body.invars), len(body.outvars)
    ny = n_out - nk
    # jvp_program layout: (consts, carry, xs, t_c, t_k, t_x) -> (carry, y, t_carry, t_y)
    tc_idx = [n_in + i for i in range(sum(nz_c))]
    tk_idx = [n_in + sum(nz_c) + i for i in range(sum(nz_k))]
    tx_idx = [n_in + sum(nz_c) + sum(nz_k) + i for i in range(sum(nz_x))]
    in_order = list(range(nc)) + tc_idx + list(range(nc, nc + nk)) + tk_idx + \
        list(range(nc + nk, n_in)) + tx_idx
    out_t_carry = [n_out + i for i in range(nk) if nz_k[i]]
    out_order = list(range(nk)) + out_t_carry + list(range(nk, n_out)) + \
        [n_out + nk + j for j in range(ny)]
    body_j = P.permute(jb, in_order, out_order)
    t_consts_nz = [t for t, nz in zip(t_consts, nz_c) if nz]
    t_carry_nz = [R.instantiate(t) for t, nz in zip(t_carry, nz_k) if nz]
    t_xs_nz = [t for t, nz in zip(t_xs, nz_x) if nz]
    outs = scan_p.bind(*consts, *t_consts_nz, *carry, *t_carry_nz, *xs, *t_xs_nz, body=body_j,
                       length=length, reverse=reverse, num_consts=nc + len(t_consts_nz),
                       num_carry=nk + len(t_carry_nz), unroll=unroll)
    k_out, tk_out, y_out = _split(outs, nk, len(t_carry_nz))
    y_out, ty_out = y_out[:ny], y_out[ny:]
    tki = iter(tk_out)
    t_carry_out = [next(tki) if nz else Zero(tangent_aval(c.aval)) for c, nz in zip(k_out, nz_k)]
    return k_out + y_out, t_carry_out + ty_out


def _partial_eval(trace, args, params):
    body, nc, nk = params["body"], params["num_consts"], params["num_carry"]
    consts, carry, xs = _split(list(args), nc, nk)
    u_c = [trace.is_unknown(a) for a in consts]
    u_k = [trace.is_unknown(a) for a in carry]
    u_x = [trace.is_unknown(a) for a in xs]
    while True:  # fixed point: a carry that becomes unknown must be unknown on entry too
        out_u = P.partial_eval_program(body, u_c + u_k + u_x)[2]
        new_k = [a or b for a, b in zip(u_k, out_u[:nk])]
        if new_k == u_k:
            break
        u_k = new_k
    ny = len(body.outvars) - nk
    known, unknown, out_u, nres = P.partial_eval_program(
        body, u_c + u_k + u_x, instantiate=u_k + [False] * ny)
    k_consts = [a for a, u in zip(consts, u_c) if not u]
    k_carry = [a for a, u in zip(carry, u_k) if not u]
    k_xs = [a for a, u in zip(xs, u_x) if not u]
    known, forwarded = _forward_residuals(known, nres, len(k_consts), len(k_carry))
    with set_current_trace(trace.parent):
        k_outs = scan_p.bind(*k_consts, *k_carry, *k_xs, body=known, length=params["length"],
                             reverse=params["reverse"], num_consts=len(k_consts),
                             num_carry=len(k_carry), unroll=params["unroll"])
    n_kc = len(k_carry)
    n_ky = sum(1 for u in out_u[nk:] if not u)
    k_carry_out, k_ys, stacked = k_outs[:n_kc], k_outs[n_kc:n_kc + n_ky], k_outs[n_kc + n_ky:]
    u_consts = [a for a, u in zip(consts, u_c) if u]
    u_carry = [a for a, u in zip(carry, u_k) if u]
    u_xs = [a for a, u in zip(xs, u_x) if u]
    # Residuals that are the known body's consts enter the unknown scan as consts, those that
    # are its scanned slices as the same xs; the others as the stacked outputs of the known scan.
    stacked = iter(stacked)
    res_consts, res_xs, c_idx, x_idx = [], [], [], []
    for j, (kind, i) in enumerate(forwarded):
        if kind == "const":
            res_consts.append(k_consts[i])
            c_idx.append(j)
        else:
            res_xs.append(k_xs[i] if kind == "xs" else next(stacked))
            x_idx.append(j)
    # unknown body invars: (res, u_consts, u_carry, u_xs) -> scan layout (consts, carry, xs)
    r, a, b = nres, len(u_consts), len(u_carry)
    order = c_idx + list(range(r, r + a)) + list(range(r + a, r + a + b)) + x_idx + \
        list(range(r + a + b, len(unknown.invars)))
    u_body = P.permute(unknown, order)
    u_outs = trace.stage(scan_p, [*res_consts, *u_consts, *u_carry, *res_xs, *u_xs],
                         dict(body=u_body, length=params["length"], reverse=params["reverse"],
                              num_consts=len(res_consts) + a, num_carry=b,
                              unroll=params["unroll"]))
    u_carry_out, u_ys = u_outs[:b], u_outs[b:]
    kc, uc, ky, uy = iter(k_carry_out), iter(u_carry_out), iter(k_ys), iter(u_ys)
    return [next(uc) if u else next(kc) for u in u_k] + \
        [next(uy) if u else next(ky) for u in out_u[nk:]]


def _forward_residuals(known, nres, n_consts, n_carry):
    """The known body without the residual outputs that are its own inputs, and per residual
    ``("const", i)`` (known const i: loop-invariant, passed to the unknown scan once, as JAX
    does), ``("xs", i)`` (known scanned input i: its slice is already stacked, as ``xs[i]``) or
    ``("stacked", None)`` (a per-iteration value the known scan stacks). Stacking a
    loop-invariant residual would copy it once per iteration (an RNN's weight matrices: length
    x the weights, per gradient step)."""
    n_out = len(known.outvars) - nres
    pos = {v: i for i, v in enumerate(known.invars)}
    forwarded, keep = [], list(range(n_out))
    for j, v in enumerate(known.outvars[n_out:]):
        i = pos.get(v) if isinstance(v, Var) else None
        if i is not None and i < n_consts:
            forwarded.append(("const", i))
        elif i is not None and i >= n_consts + n_carry:
            forwarded.append(("xs", i - n_consts - n_carry))
        else:
            forwarded.append(("stacked", None))
            keep.append(n_out + j)
    if len(keep) < len(known.outvars):
        known = P.permute(known, None, keep)
    return known, forwarded


def _transpose(cts, *args, body, length, reverse, num_consts, num_carry, unroll):
    nc, nk = num_consts, num_carry
    consts, carry, xs = _split(list(args), nc, nk)
    lin_c = [is_undefined(a) for a in consts]
    lin_x = [is_undefined(a) for a in xs]
    # A carry with a known initial value in a linear scan is a zero made concrete by
    # instantiation (its tangent starts at zero and becomes nonzero in the loop): it is
    # transposed like the other carries and its cotangent is dropped.
    carry_lin = [is_undefined(a) for a in carry]
    ct_carry, ct_ys = cts[:nk], cts[nk:]
    kc = [i for i, lin in enumerate(lin_c) if not lin]
    lc = [i for i, lin in enumerate(lin_c) if lin]
    kx = [i for i, lin in enumerate(lin_x) if not lin]
    lx = [i for i, lin in enumerate(lin_x) if lin]
    order = kc + [nc + nk + i for i in kx] + lc + list(range(nc, nc + nk)) + \
        [nc + nk + i for i in lx]
    view = P.permute(body, order)
    t_prog = P.transpose_program(view, len(kc) + len(kx))
    # t_prog: (known consts, known x, ct_carry_out, ct_y) -> (ct_lin_consts, ct_carry, ct_lin_x)
    lc_avals = [tangent_aval(consts[i].aval) for i in lc]
    nlc = len(lc)

    def t_body(*a):
        k_consts, acc, ct_k, k_x, ct_y = _split(list(a), len(kc), nlc, nk, len(kx))
        outs = P.call(t_prog, k_consts + k_x + ct_k + ct_y)
        ct_lc, ct_carry_prev, ct_lx = _split(outs, nlc, nk)
        acc = [R.snp().add(x, y) for x, y in zip(acc, ct_lc)]
        return acc + ct_carry_prev + ct_lx

    y_avals = [tangent_aval(v.aval) for v in body.outvars[nk:]]
    in_avals = [consts[i].aval for i in kc] + lc_avals + \
        [tangent_aval(v.aval) for v in body.outvars[:nk]] + \
        [body.invars[nc + nk + i].aval for i in kx] + y_avals
    tb, tconsts = P.stage(t_body, in_avals)
    if tconsts:
        tb = P._bind_consts(tb, tconsts)
    acc0 = [R.zeros_like_aval(a) for a in lc_avals]
    ct_carry = [R.instantiate(c) for c in ct_carry]
    ct_ys = [R.instantiate(c) for c in ct_ys]
    outs = scan_p.bind(*[consts[i] for i in kc], *acc0, *ct_carry, *[xs[i] for i in kx], *ct_ys,
                       body=tb, length=length, reverse=not reverse, num_consts=len(kc),
                       num_carry=nlc + nk, unroll=unroll)
    ct_lc, ct_init, ct_lx = _split(outs, nlc, nk)
    lci, lxi = iter(ct_lc), iter(ct_lx)
    ct_init = [c if lin else None for c, lin in zip(ct_init, carry_lin)]
    return [next(lci) if lin else None for lin in lin_c] + ct_init + \
        [next(lxi) if lin else None for lin in lin_x]


def _batch(args, dims, *, body, length, reverse, num_consts, num_carry, unroll):
    size = R.batch_size(args, dims)
    consts, carry, xs = _split(list(args), num_consts, num_carry)
    c_dims, k_dims, x_dims = _split(list(dims), num_consts, num_carry)
    consts = [c if d is None else R.move_axis(c, d, 0) for c, d in zip(consts, c_dims)]
    carry = [R.bdim_to_front(c, d, size) for c, d in zip(carry, k_dims)]
    xs = [x if d is None else R.move_axis(x, d, 1) for x, d in zip(xs, x_dims)]
    in_dims = [None if d is None else 0 for d in c_dims] + [0] * len(carry) + \
        [None if d is None else 0 for d in x_dims]
    bb = P.batch_program(body, in_dims, size)
    outs = scan_p.bind(*consts, *carry, *xs, body=bb, length=length, reverse=reverse,
                       num_consts=num_consts, num_carry=num_carry, unroll=unroll)
    return outs, [0] * num_carry + [1] * (len(outs) - num_carry)


scan_p.impl = _impl
scan_p.abstract_eval = _abstract_eval
scan_p.weak_type = _weak
scan_p.jvp = _jvp
scan_p.transpose = _transpose
scan_p.batch = _batch
scan_p.is_linear = True
scan_p.meta["partial_eval"] = _partial_eval
CS.install(scan_p, CS.scan_sharding, CS.scan_local_params)


def scan(f, init, xs=None, length=None, reverse=False, unroll=1):
    """Loops ``f(carry, x) -> (carry, y)`` over the leading axis of ``xs``, stacking the ``y``.

    Semantics (Python reference)::

        carry = init; ys = []
        for x in xs:                      # reversed(xs) when reverse=True
            carry, y = f(carry, x); ys.append(y)
        return carry, stack(ys)           # ys in the order of xs

    Args:
        f: function of (carry pytree, x pytree) returning (carry pytree, y pytree); the carry
            must keep its structure, shapes and dtypes.
        init: initial carry (pytree of arrays).
        xs: pytree of arrays with a common leading dim ``length``, or None.
        length: the trip count when ``xs`` is None (or to check it).
        reverse: iterate from the end.
        unroll: how many iterations a compiled backend may unroll (a hint; no effect on values).
    Returns:
        ``(final carry, ys)`` where each ``ys`` leaf has shape ``(length, *y_shape)``.
    Raises:
        ValueError: inconsistent leading dims of ``xs`` or a missing ``length``.
        TypeError: the carry changes structure, shape or dtype (names the leaf).
    """
    c_leaves, c_tree = tree_util.flatten(init)
    c_paths = tree_util.paths_leaves_treedef(init)[0]
    c_leaves = [operand(c, "scan") for c in c_leaves]
    x_leaves, x_tree = tree_util.flatten(xs)
    x_leaves = [operand(x, "scan") for x in x_leaves]
    lengths = {_trip(x.shape[0]) for x in x_leaves if x.ndim > 0}
    if any(x.ndim == 0 for x in x_leaves):
        raise ValueError("scan: every leaf of xs needs a leading axis to scan over; got a scalar")
    if length is not None:
        lengths.add(_trip(length))
    if len(lengths) > 1:
        raise ValueError(f"scan: xs leaves and length disagree on the trip count: "
                         f"{sorted(lengths)} (xs shapes {[tuple(x.shape) for x in x_leaves]})")
    if not lengths:
        raise ValueError("scan: length must be given when xs is None or empty")
    n = lengths.pop()
    c_leaves = _stage_and_fix_weak(f, c_leaves, c_tree, c_paths, x_leaves, x_tree)
    body, consts, y_tree = _trace_body(f, c_leaves, c_tree, c_paths, x_leaves, x_tree)
    outs = scan_p.bind(*consts, *c_leaves, *x_leaves, body=body, length=n, reverse=bool(reverse),
                       num_consts=len(consts), num_carry=len(c_leaves), unroll=int(unroll))
    carry, ys = outs[:len(c_leaves)], outs[len(c_leaves):]
    return tree_util.unflatten(c_tree, carry), tree_util.unflatten(y_tree, ys)


def _trip(n):
    # A symbolic leading dim (dynamic shapes) stays symbolic: bind_shapes fixes it per call.
    return n if is_symbolic(n) else int(n)


def _slice_aval(x):
    a = x.aval
    return ShapedArray(a.shape[1:], a.dtype, a.weak_type)


def _trace_body(f, c_leaves, c_tree, c_paths, x_leaves, x_tree, check=True):
    nk = len(c_leaves)
    record = []

    def flat(*args):
        carry = tree_util.unflatten(c_tree, list(args[:nk]))
        x = tree_util.unflatten(x_tree, list(args[nk:]))
        res = f(carry, x)
        if not isinstance(res, (tuple, list)) or len(res) != 2:
            raise TypeError(f"scan: the body must return a pair (carry, y), got "
                            f"{type(res).__name__}")
        new_carry, y = res
        k_leaves, k_tree = tree_util.flatten(new_carry)
        if k_tree != c_tree:
            raise TypeError(f"scan: the body returns a carry with structure {k_tree}, but the "
                            f"initial carry has structure {c_tree}")
        y_leaves, y_tree = tree_util.flatten(y)
        record.append(y_tree)
        return [operand(v, "scan") for v in k_leaves] + [operand(v, "scan") for v in y_leaves]

    prog = trace_to_program(flat, [c.aval for c in c_leaves] + [_slice_aval(x) for x in x_leaves])
    if check:
        P.check_same_avals("scan", "carry", c_paths, [c.aval for c in c_leaves],
                           prog.out_avals[:nk])
    closed, consts = P.hoist_consts(prog)
    return closed, consts, record[0]


def _stage_and_fix_weak(f, c_leaves, c_tree, c_paths, x_leaves, x_tree):
    """A weakly typed initial carry (from Python scalars) takes the type the body produces, so
    the carry type is stable across iterations (``programs.adopt_body_types``)."""
    body, _, _ = _trace_body(f, c_leaves, c_tree, c_paths, x_leaves, x_tree, check=False)
    return P.adopt_body_types(c_leaves, body.out_avals[:len(c_leaves)])


def map(f, xs):  # noqa: A001  (JAX's name)
    """``stack([f(x) for x in xs])`` over the leading axis of the pytree ``xs``, as a scan."""
    _, ys = scan(lambda carry, x: ((), f(x)), (), xs)
    return ys
