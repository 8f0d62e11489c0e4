"""``while_loop`` and ``fori_loop``.

Primitive ``while`` takes ``(*cond_consts, *body_consts, *init)`` and holds the Programs
``cond(cond_consts, carry) -> bool[]`` and ``body(body_consts, carry) -> carry``, plus
``max_iterations`` (None or an int cap on the trip count).

Differentiation:
* Forward mode: the loop carries (primal, tangent) pairs.
* Reverse mode (which JAX does not offer for while loops): partial evaluation runs the primal
  loop and records each iteration's residuals, then stages the tangent computation as a
  ``scan`` over them, which transposes like any scan. Eagerly the trip count ``n`` is known as
  the loop runs, so the record holds exactly ``n`` iterations (memory: n x the residuals of one
  iteration). Inside a staged computation the trip count is unknown: there ``max_iterations``
  is required and the record is a masked scan of ``max_iterations`` steps (bounded memory,
  exact gradients). Without it, reverse mode under staging raises TypeError rather than give a
  wrong gradient.
* vmap: a batched predicate runs the loop until every element is done; finished elements are
  frozen with a select.
"""
from __future__ import annotations

import numpy as np

from ... import tree as tree_util
from ...arrays.array import Array, wrap
from ...arrays.convert import operand
from ...arrays.ops import rules as R
from ...core import dtypes
from ...core.ad_util import Zero, tangent_aval
from ...core.avals import ShapedArray
from ...core.ir import Program, Var
from ...core.primitive import Primitive
from ...core.trace import ConcretizationError, set_current_trace
from ..stage import trace_to_program
from . import programs as P
from . import sharding as CS
from .programs import split_list as _split
from .scan import scan_p

while_p = Primitive("while", multiple_results=True, family="control")


def _run(cond, body, cond_consts, body_consts, carry, max_iterations, on_step=None):
    i = 0
    while max_iterations is None or i < max_iterations:
        if not bool(P.call(cond, cond_consts + carry)[0]):
            break
        outs = P.call(body, body_consts + carry)
        carry = outs[:len(carry)]
        if on_step is not None:
            on_step(outs[len(carry):])
        i += 1
    return carry


def _impl(*args, cond, body, n_cond, n_body, max_iterations):
    vals = [wrap(a, False) for a in args]
    cc, bc, carry = _split(vals, n_cond, n_body)
    out = _run(cond, body, cc, bc, carry, max_iterations)
    return [np.asarray(c._buf) for c in out]


def _abstract_eval(*avals, cond, body, n_cond, n_body, max_iterations):
    return list(avals[n_cond + n_body:])


def _weak(*w, cond, body, n_cond, n_body, max_iterations):
    return list(w[n_cond + n_body:])


def _with_extra_inputs(prog, n_extra):
    """``prog`` taking ``n_extra`` more (unused) trailing inputs."""
    extra = [Var(v.aval) for v in prog.invars[-n_extra:]] if n_extra else []
    return Program(prog.constvars, prog.consts, list(prog.invars) + extra, prog.eqns,
                   prog.outvars)


def _jvp(primals, tangents, *, cond, body, n_cond, n_body, max_iterations):
    cc, bc, carry = _split(primals, n_cond, n_body)
    _, t_bc, t_carry = _split(tangents, n_cond, n_body)
    nz_b = [type(t) is not Zero for t in t_bc]
    nz_k = [dtypes.is_inexact(c.dtype) for c in carry]
    jb = P.jvp_program(body, nz_b + nz_k)
    nb, nk = len(bc), len(carry)
    n_in = nb + nk
    # (bc, carry, t_bc, t_k) -> (carry, t_carry) ; reorder inputs to (bc, t_bc, carry, t_k)
    tb_idx = [n_in + i for i in range(sum(nz_b))]
    tk_idx = [n_in + sum(nz_b) + i for i in range(sum(nz_k))]
    in_order = list(range(nb)) + tb_idx + list(range(nb, n_in)) + tk_idx
    out_order = list(range(nk)) + [nk + i for i in range(nk) if nz_k[i]]
    body_j = P.permute(jb, in_order, out_order)
    n_tk = sum(nz_k)
    cond_j = _with_extra_inputs(cond, n_tk)
    t_bc_nz = [t for t, nz in zip(t_bc, nz_b) if nz]
    t_k_nz = [R.instantiate(t) for t, nz in zip(t_carry, nz_k) if nz]
    outs = while_p.bind(*cc, *bc, *t_bc_nz, *carry, *t_k_nz, cond=cond_j, body=body_j,
                        n_cond=n_cond, n_body=nb + len(t_bc_nz), max_iterations=max_iterations)
    k_out, tk_out = outs[:nk], outs[nk:]
    it = iter(tk_out)
    return k_out, [next(it) if nz else Zero(tangent_aval(c.aval)) for c, nz in zip(k_out, nz_k)]


def _partial_eval(trace, args, params):
    cond, body = params["cond"], params["body"]
    n_cond, n_body, cap = params["n_cond"], params["n_body"], params["max_iterations"]
    cc, bc, carry = _split(list(args), n_cond, n_body)
    if any(trace.is_unknown(a) for a in cc):
        raise TypeError("while_loop: the loop predicate depends on a differentiated value "
                        "through its constants; reverse mode needs a predicate on primal values")
    u_b = [trace.is_unknown(a) for a in bc]
    u_k = [trace.is_unknown(a) for a in carry]
    while True:
        out_u = P.partial_eval_program(body, u_b + u_k)[2]
        new = [a or b for a, b in zip(u_k, out_u)]
        if new == u_k:
            break
        u_k = new
    if P.partial_eval_program(cond, [False] * n_cond + u_k)[2][0]:
        raise TypeError("while_loop: the loop predicate depends on a differentiated carry; "
                        "reverse mode needs a predicate on primal values")
    known, unknown, _, nres = P.partial_eval_program(body, u_b + u_k, instantiate=u_k)
    k_bc = [a for a, u in zip(bc, u_b) if not u]
    k_carry = [a for a, u in zip(carry, u_k) if not u]
    u_bc = [a for a, u in zip(bc, u_b) if u]
    u_carry = [a for a, u in zip(carry, u_k) if u]
    k_idx = [i for i, u in enumerate(u_k) if not u]
    cond_k = P.permute(cond, list(range(n_cond)) + [n_cond + i for i in k_idx])
    res_avals = [v.aval for v in known.outvars[len(k_carry):]]
    with set_current_trace(trace.parent):
        concrete = all(P.is_concrete(a) for a in cc + k_bc + k_carry)
        if concrete:
            k_final, stacked, n = _record_eager(cond_k, known, cc, k_bc, k_carry, res_avals, cap)
            masks = None
        else:
            n = _static_trip_bound(cond_k, known, cc, k_bc, k_carry, cap)
            if n is None and cap is None:
                raise TypeError(
                    "while_loop: reverse-mode differentiation inside a staged computation "
                    "(compile, make_ir, or a traced control-flow body) needs max_iterations=..., "
                    "because the trip count is unknown while tracing; eager grad (also under "
                    "vmap) works without it")
            n = cap if n is None else n
            k_final, stacked, masks = _record_masked(cond_k, known, cc, k_bc, k_carry, n)
    u_final = _stage_tangent_scan(trace, unknown, nres, u_bc, u_carry, stacked, masks, n)
    ki, ui = iter(k_final), iter(u_final)
    return [next(ui) if u else next(ki) for u in u_k]


def _static_trip_bound(cond_k, known, cc, k_bc, k_carry, cap):
    """The largest trip count of the known loop when it can be read off concretely (e.g. under
    vmap of eager values, where each element has its own count), else None. Costs one extra run
    of the primal loop."""
    from ..jvp import JVPTracer
    from ..vmap import BatchTracer
    nk = len(k_carry)
    count = while_loop(lambda c: P.call(cond_k, cc + list(c[0]))[0],
                       lambda c: (tuple(P.call(known, k_bc + list(c[0]))[:nk]), c[1] + 1),
                       (tuple(k_carry), wrap(np.int64(0), False)), max_iterations=cap)[1]
    while True:
        if type(count) is Array:
            return int(np.max(count._buf)) if count._buf.size else 0
        if isinstance(count, BatchTracer):
            count = count.val
        elif isinstance(count, JVPTracer):
            count = count.primal
        else:
            try:   # the recording of an eager cached transformation computes it on demand
                count = count.to_concrete()
            except ConcretizationError:
                return None


def _record_eager(cond_k, known, cc, k_bc, k_carry, res_avals, cap):
    steps = []
    final = _run(cond_k, known, cc, k_bc, k_carry, cap, on_step=steps.append)
    snp = R.snp()
    stacked = [snp.stack([s[j] for s in steps]) if steps else
               wrap(np.zeros((0,) + tuple(a.shape), a.dtype), False)
               for j, a in enumerate(res_avals)]
    return final, stacked, len(steps)


def _record_masked(cond_k, known, cc, k_bc, k_carry, cap):
    """Known side as a scan of ``cap`` steps that records residuals and an 'active' mask."""
    nk = len(k_carry)
    snp = R.snp()

    def step(carry, _):
        vals, done = list(carry[:nk]), carry[nk]
        active = snp.logical_and(P.call(cond_k, cc + vals)[0], snp.logical_not(done))
        outs = P.call(known, k_bc + vals)
        new = [snp.where(active, o, v) for o, v in zip(outs[:nk], vals)]
        return tuple(new) + (snp.logical_not(active),), (tuple(outs[nk:]), active)

    from .scan import scan
    init = tuple(k_carry) + (wrap(np.bool_(False), False),)
    final, (res, masks) = scan(step, init, None, length=cap)
    return list(final[:nk]), list(res), masks


def _stage_tangent_scan(trace, unknown, nres, u_bc, u_carry, stacked, masks, n):
    """Stages the tangent loop as a scan over the recorded residuals (masked when capped)."""
    nb, nk = len(u_bc), len(u_carry)
    # unknown invars: (res, u_bc, u_carry) -> u_carry'
    if masks is None:
        order = list(range(nres, nres + nb + nk)) + list(range(nres))
        body = P.permute(unknown, order)
        xs = stacked
    else:
        snp = R.snp()

        def masked(*a):
            bcs, carry, res, active = _split(list(a), nb, nk, nres)
            outs = P.call(unknown, res + bcs + carry)
            return [snp.where(active[0], o, c) for o, c in zip(outs, carry)]

        avals = [v.aval for v in unknown.invars[nres:]] + \
            [v.aval for v in unknown.invars[:nres]] + [ShapedArray((), dtypes.bool_)]
        body, consts = P.stage(masked, avals)
        if consts:
            body = P._bind_consts(body, consts)
        xs = list(stacked) + [masks]
    return trace.stage(scan_p, [*u_bc, *u_carry, *xs],
                       dict(body=body, length=n, reverse=False, num_consts=nb, num_carry=nk,
                            unroll=1))


def _batch(args, dims, *, cond, body, n_cond, n_body, max_iterations):
    size = R.batch_size(args, dims)
    cc, bc, carry = _split(list(args), n_cond, n_body)
    c_dims, b_dims, k_dims = _split(list(dims), n_cond, n_body)
    cc = [c if d is None else R.move_axis(c, d, 0) for c, d in zip(cc, c_dims)]
    bc = [c if d is None else R.move_axis(c, d, 0) for c, d in zip(bc, b_dims)]
    carry = [R.bdim_to_front(c, d, size) for c, d in zip(carry, k_dims)]
    cd = [None if d is None else 0 for d in c_dims]
    bd = [None if d is None else 0 for d in b_dims]
    cond_b = P.batch_program(cond, cd + [0] * len(carry), size)
    body_b = P.batch_program(body, bd + [0] * len(carry), size)
    snp = R.snp()
    nc, nb = len(cc), len(bc)

    def any_active(*a):
        return [snp.any(P.call(cond_b, list(a))[0])]

    def frozen_body(*a):
        ccs, bcs, vals = _split(list(a), nc, nb)
        pred = P.call(cond_b, ccs + vals)[0]
        outs = P.call(body_b, bcs + vals)
        return [snp.where(snp.reshape(pred, (size,) + (1,) * (o.ndim - 1)), o, v)
                for o, v in zip(outs, vals)]

    c_avals = [x.aval for x in cc] + [x.aval for x in carry]
    new_cond, cconsts = P.stage(any_active, c_avals)
    if cconsts:
        new_cond = P._bind_consts(new_cond, cconsts)
    new_body, bconsts = P.stage(frozen_body, [x.aval for x in cc + bc + carry])
    if bconsts:
        new_body = P._bind_consts(new_body, bconsts)
    outs = while_p.bind(*cc, *cc, *bc, *carry, cond=new_cond, body=new_body, n_cond=nc,
                        n_body=nc + nb, max_iterations=max_iterations)
    return outs, [0] * len(outs)


while_p.impl = _impl
while_p.abstract_eval = _abstract_eval
while_p.weak_type = _weak
while_p.jvp = _jvp
while_p.batch = _batch
while_p.meta["partial_eval"] = _partial_eval
CS.install(while_p, CS.while_sharding, CS.while_local_params)


def while_loop(cond_fun, body_fun, init_val, *, max_iterations=None):
    """Repeats ``val = body_fun(val)`` while ``cond_fun(val)`` is true; returns ``val``.

    Args:
        cond_fun: carry -> scalar bool (0-d bool array or Python bool).
        body_fun: carry -> carry with the same structure, shapes and dtypes.
        init_val: the initial carry, a pytree of arrays.
        max_iterations: None, or an int >= 0 capping the trip count (the loop stops after that
            many iterations even if ``cond_fun`` is still true). Needed for reverse mode inside
            staged computations; eager reverse mode records every iteration (memory grows with
            the trip count: one set of residuals per iteration).
    Raises:
        TypeError: ``cond_fun`` does not return a scalar bool; the body changes a carry's
            structure, shape or dtype (names the leaf).
        ValueError: negative ``max_iterations``.
    """
    if max_iterations is not None:
        if not isinstance(max_iterations, (int, np.integer)) or max_iterations < 0:
            raise ValueError(f"while_loop: max_iterations must be None or an int >= 0, got "
                             f"{max_iterations!r}")
        max_iterations = int(max_iterations)
    leaves, tree = tree_util.flatten(init_val)
    paths = tree_util.paths_leaves_treedef(init_val)[0]
    leaves = [operand(x, "while_loop") for x in leaves]
    leaves = _adopt_body_types(body_fun, leaves, tree)
    avals = [x.aval for x in leaves]

    def flat_cond(*xs):
        pred = operand(cond_fun(tree_util.unflatten(tree, list(xs))), "while_loop")
        if tuple(pred.shape) != () or not dtypes.is_bool(pred.dtype):
            raise TypeError(f"while_loop: cond_fun must return a scalar bool, got "
                            f"{pred.aval.str_short()}")
        return [pred]

    def flat_body(*xs):
        out = body_fun(tree_util.unflatten(tree, list(xs)))
        o_leaves, o_tree = tree_util.flatten(out)
        if o_tree != tree:
            raise TypeError(f"while_loop: body_fun returns structure {o_tree} but the carry has "
                            f"structure {tree}")
        return [operand(o, "while_loop") for o in o_leaves]

    cond_prog, c_consts = P.hoist_consts(trace_to_program(flat_cond, avals))
    body_prog, b_consts = P.hoist_consts(trace_to_program(flat_body, avals))
    P.check_same_avals("while_loop", "carry", paths, avals, body_prog.out_avals)
    outs = while_p.bind(*c_consts, *b_consts, *leaves, cond=cond_prog, body=body_prog,
                        n_cond=len(c_consts), n_body=len(b_consts), max_iterations=max_iterations)
    return tree_util.unflatten(tree, outs)


def _adopt_body_types(body_fun, leaves, tree):
    prog = trace_to_program(
        lambda *xs: [operand(o, "while_loop") for o in
                     tree_util.leaves(body_fun(tree_util.unflatten(tree, list(xs))))],
        [x.aval for x in leaves])
    if len(prog.outvars) != len(leaves):
        return leaves     # a structure change: flat_body below names it
    return P.adopt_body_types(leaves, prog.out_avals)


def fori_loop(lower, upper, body_fun, init_val):
    """``val = body_fun(i, val)`` for ``i`` in ``range(lower, upper)``; returns ``val``.

    With Python-int bounds the trip count is static and the loop is a ``scan`` (reverse-mode
    differentiable anywhere); with traced bounds it is a ``while_loop``.
    """
    if isinstance(lower, (int, np.integer)) and isinstance(upper, (int, np.integer)):
        from .scan import scan
        n = max(int(upper) - int(lower), 0)
        lo = int(lower)

        def step(carry, i):
            return body_fun(i, carry), ()

        idx = R.snp().arange(lo, lo + n, dtype=dtypes.int64) if n else \
            wrap(np.zeros((0,), np.int64), False)
        out, _ = scan(step, init_val, idx, length=n)
        return out
    lo = operand(lower, "fori_loop")
    hi = operand(upper, "fori_loop")
    for name, b in (("lower", lo), ("upper", hi)):
        if tuple(b.shape) != () or not dtypes.is_integer(b.dtype):
            raise TypeError(f"fori_loop: {name} must be a scalar integer, got {b.aval.str_short()}")
    dt, _ = dtypes.result_type((lo.dtype, lo.weak_type), (hi.dtype, hi.weak_type))
    snp = R.snp()
    lo, hi = snp.astype(lo, dt), snp.astype(hi, dt)
    _, _, out = while_loop(lambda c: c[0] < c[1],
                           lambda c: (c[0] + 1, c[1], body_fun(c[0], c[2])),
                           (lo, hi, init_val))
    return out
