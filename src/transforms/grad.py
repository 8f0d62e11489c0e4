"""User-facing differentiation: jvp, linearize, vjp, grad, value_and_grad, jacfwd, jacrev, hessian.

Reverse mode is linearize (JVP under partial evaluation, which stages the linear tangent
computation into a Program) followed by transposition of that Program, so forward and reverse
mode share every rule and cannot disagree.

Conventions (as in JAX):
* Integer and bool inputs have ``float0`` tangents / cotangents; differentiating with respect to
  one directly (grad / jacrev / jacfwd argnums) raises TypeError unless ``allow_int=True``.
* Complex: ``grad`` of a real-valued function of complex input returns the conjugate of the
  Wirtinger derivative ``df/dz`` (equivalently ``df/dx - i df/dy``); pass ``holomorphic=True``
  for holomorphic functions with complex outputs.
"""
from __future__ import annotations

import functools

import numpy as np

from .. import tree as tree_util
from ..arrays.array import Array, wrap
from ..arrays.convert import operand
from ..arrays.ops import rules as R
from ..core import dtypes
from ..core.ad_util import Zero, tangent_aval, tangent_dtype
from ..core.ir import eval_program
from ..core.trace import Tracer, new_trace
from . import eager_cache as _eager
from .jvp import JVPTrace, JVPTracer
from .partial_eval import PartialEvalTrace
from .transpose import backward_pass


def _as_operands(leaves, op):
    return [operand(x, op) for x in leaves]


def _check_tangents(op, primals, tangents):
    for i, (p, t) in enumerate(zip(primals, tangents)):
        want = tangent_aval(p.aval)
        if tuple(t.shape) != tuple(want.shape):
            raise ValueError(f"{op}: tangent {i} has shape {tuple(t.shape)} but its primal has "
                             f"shape {tuple(want.shape)}")
        if t.dtype != want.dtype and not (want.dtype == dtypes.float0):
            raise TypeError(f"{op}: tangent {i} has dtype {t.dtype} but its primal (dtype "
                            f"{p.dtype}) needs tangent dtype {want.dtype}")


def jvp(fun, primals, tangents, has_aux=False):
    """Forward-mode Jacobian-vector product.

    Args:
        fun: function of ``len(primals)`` positional pytree arguments returning a pytree.
        primals, tangents: tuples/lists of the same pytree structure; each tangent leaf has its
            primal's shape and tangent dtype (the same inexact dtype; float0 for int/bool).
        has_aux: ``fun`` returns ``(out, aux)``; aux is returned without tangent.
    Returns:
        ``(primals_out, tangents_out)`` (and ``aux`` when has_aux).
    Raises:
        TypeError / ValueError: primals and tangents do not match in structure, shape or dtype.
    """
    if not isinstance(primals, (tuple, list)) or not isinstance(tangents, (tuple, list)):
        raise TypeError("jvp: primals and tangents must be tuples or lists of arguments, got "
                        f"{type(primals).__name__} and {type(tangents).__name__}")
    p_leaves, p_tree = tree_util.flatten(tuple(primals))
    t_leaves, t_tree = tree_util.flatten(tuple(tangents))
    if p_tree != t_tree:
        raise TypeError(f"jvp: primals and tangents have different tree structures: "
                        f"{p_tree} vs {t_tree}")
    p_leaves = _as_operands(p_leaves, "jvp")
    t_leaves = _as_operands(t_leaves, "jvp")
    _check_tangents("jvp", p_leaves, t_leaves)
    with new_trace(JVPTrace) as trace:
        tracers = [JVPTracer(trace, p, Zero(tangent_aval(p.aval))
                             if tangent_dtype(p.dtype) == dtypes.float0 else t)
                   for p, t in zip(p_leaves, t_leaves)]
        out = fun(*tree_util.unflatten(p_tree, tracers))
        aux = None
        if has_aux:
            out, aux = _split_aux("jvp", out)
            aux = _primal_aux(trace, aux)
        o_leaves, o_tree = tree_util.flatten(out)
        pairs = [trace.lift(operand(o, "jvp")) for o in o_leaves]
    p_out = tree_util.unflatten(o_tree, [p for p, _ in pairs])
    t_out = tree_util.unflatten(o_tree, [R.instantiate(t) for _, t in pairs])
    return (p_out, t_out, aux) if has_aux else (p_out, t_out)


def _primal_aux(trace, aux):
    """Auxiliary outputs carry no derivative: their JVP tracers are replaced by the primals."""
    if aux is None:
        return None
    return tree_util.map(
        lambda a: a.primal if isinstance(a, JVPTracer) and a._trace is trace else a, aux)


def _split_aux(op, out):
    if not isinstance(out, (tuple, list)) or len(out) != 2:
        raise TypeError(f"{op}: has_aux=True requires the function to return a pair "
                        f"(output, aux), got {type(out).__name__}")
    return out[0], out[1]


def _linearize_flat(flat_fun, primals):
    """(primal_outs, linear Program mapping input tangents to output tangents, aux)."""
    with new_trace(PartialEvalTrace) as pe:
        tan_in = [pe.new_arg(tangent_aval(p.aval)) for p in primals]
        with new_trace(JVPTrace) as jt:
            tracers = [JVPTracer(jt, p, Zero(t.aval) if t.aval.dtype == dtypes.float0 else t)
                       for p, t in zip(primals, tan_in)]
            outs, aux = flat_fun(*tracers)
            pairs = [jt.lift(operand(o, "linearize")) for o in outs]
            aux = _primal_aux(jt, aux)
        primal_out = [p for p, _ in pairs]
        tan_out = [R.instantiate(t) for _, t in pairs]
        prog = pe.to_program(tan_in, tan_out)
    return primal_out, prog, aux


def linearize(fun, *primals):
    """Returns ``(primals_out, f_jvp)`` where ``f_jvp(*tangents)`` is the JVP at ``primals``,
    evaluated from a staged linear Program (no re-tracing of ``fun``)."""
    p_leaves, p_tree = tree_util.flatten(primals)
    p_leaves = _as_operands(p_leaves, "linearize")
    out_tree = []

    def flat_fun(*tracers):
        out = fun(*tree_util.unflatten(p_tree, list(tracers)))
        leaves, t = tree_util.flatten(out)
        out_tree.append(t)
        return leaves, None

    primal_out, prog, _ = _linearize_flat(flat_fun, p_leaves)

    def f_jvp(*tangents):
        t_leaves, t_tree = tree_util.flatten(tangents)
        if t_tree != p_tree:
            raise TypeError(f"linearize: tangents structure {t_tree} does not match primals {p_tree}")
        t_leaves = _as_operands(t_leaves, "linearize")
        _check_tangents("linearize", p_leaves, t_leaves)
        outs = eval_program(prog, prog.consts, *t_leaves)
        return tree_util.unflatten(out_tree[0], outs)

    return tree_util.unflatten(out_tree[0], primal_out), f_jvp


def vjp(fun, *primals, has_aux=False):
    """Reverse-mode vector-Jacobian product.

    Returns ``(primals_out, vjp_fn)`` (plus ``aux`` when has_aux); ``vjp_fn(cotangents)`` takes a
    pytree shaped like ``primals_out`` and returns a tuple of cotangents shaped like ``primals``
    (float0 zeros for int/bool primals). Called eagerly, the forward and backward programs are
    reused across calls (src/transforms/eager_cache.py).
    Raises:
        TypeError / ValueError from vjp_fn: cotangent structure, shape or dtype mismatch.
    """
    p_leaves, p_tree = tree_util.flatten(primals)
    p_leaves = _as_operands(p_leaves, "vjp")
    if _eager.applies(fun, p_leaves):
        return _eager_vjp(fun, p_leaves, p_tree, has_aux)
    return _vjp(fun, p_leaves, p_tree, has_aux)


def _vjp(fun, p_leaves, p_tree, has_aux):
    """vjp by re-tracing: linearize ``fun`` at these primals now, transpose when asked."""
    out_tree = []

    def flat_fun(*tracers):
        out = fun(*tree_util.unflatten(p_tree, list(tracers)))
        aux = None
        if has_aux:
            out, aux = _split_aux("vjp", out)
        leaves, t = tree_util.flatten(out)
        out_tree.append(t)
        return leaves, aux

    primal_out, prog, aux = _linearize_flat(flat_fun, p_leaves)
    o_tree = out_tree[0]

    def vjp_fn(cotangents):
        c_leaves = _cotangent_leaves(cotangents, o_tree, primal_out)
        cts_in = backward_pass(prog, prog.consts, c_leaves)
        cts_in = [_laid_out_like(R.instantiate(c), p) for c, p in zip(cts_in, p_leaves)]
        return tree_util.unflatten(p_tree, cts_in)

    out = tree_util.unflatten(o_tree, primal_out)
    return (out, vjp_fn, aux) if has_aux else (out, vjp_fn)


def _laid_out_like(ct, primal):
    """A concrete cotangent with its primal's sharding (as in JAX, the gradient of a sharded
    parameter is laid out like it, whatever layout the backward pass ended in)."""
    if type(ct) is Array and isinstance(primal, Array) and type(primal) is not Array:
        from ..arrays.device import device_put
        return device_put(ct, primal.sharding)
    return ct


def _cotangent_leaves(cotangents, o_tree, primal_out):
    """The checked cotangent leaves for outputs ``primal_out`` (Zero for int / bool ones)."""
    c_leaves, c_tree = tree_util.flatten(cotangents)
    if c_tree != o_tree:
        raise TypeError(f"vjp: cotangent structure {c_tree} does not match the output "
                        f"structure {o_tree}")
    c_leaves = _as_operands(c_leaves, "vjp")
    _check_tangents("vjp (cotangent vs output)", primal_out, c_leaves)
    return [Zero(tangent_aval(p.aval)) if tangent_dtype(p.dtype) == dtypes.float0 else c
            for p, c in zip(primal_out, c_leaves)]


# ---- eager calls that reuse derived programs (src/transforms/eager_cache.py) --------------------

def _recorded_output(op, out, has_aux):
    """Splits a recorded call's result: (arrays to record: the output leaves, then the traced
    aux leaves; (structure, the aux leaves passed through as they are))."""
    aux = None
    if has_aux:
        out, aux = _split_aux(op, out)
    o_leaves, o_tree = tree_util.flatten(out)
    a_leaves, a_tree = tree_util.flatten(aux)
    slots = tuple(isinstance(a, Tracer) for a in a_leaves)
    traced = [operand(o, "linearize") for o in o_leaves] + \
        [a for a, s in zip(a_leaves, slots) if s]
    return traced, ((o_tree, len(o_leaves), a_tree, slots), a_leaves)


def _rebuild(shape, passed, leaves, has_aux):
    """(out, aux) pytrees (out alone without has_aux) from recorded leaves and passed aux."""
    o_tree, n_out, a_tree, slots = shape
    out = tree_util.unflatten(o_tree, list(leaves[:n_out]))
    if not has_aux:
        return out
    it = iter(leaves[n_out:])
    aux = tree_util.unflatten(a_tree, [next(it) if s else a for a, s in zip(passed, slots)])
    return out, aux


def _replayed(rec, consts, live, n_in, has_aux):
    """The recorded function as ``f(*diff_pytrees)`` returning ``out`` / ``(out, aux)``."""
    fn = rec.function(consts, live)
    shape, passed = rec.extra

    def f(*args):
        leaves = tree_util.leaves(args)
        return _rebuild(shape, passed, fn(*leaves), has_aux)
    return f


def _record(fun, call, leaves, has_aux, op):
    return _eager.record_call(fun, lambda *t: _recorded_output(op, call(*t), has_aux),
                              [x.aval for x in leaves], leaves)


def _eager_value_and_grad(fun, f_partial, d_leaves, d_tree, has_aux, holomorphic, config):
    rec = _record(fun, lambda *t: f_partial(*tree_util.unflatten(d_tree, list(t))), d_leaves,
                  has_aux, "vjp")
    if rec is None:
        return _value_and_grad_core(f_partial, d_leaves, d_tree, has_aux, holomorphic)
    shape = rec.extra[0]
    n, n_val = len(d_leaves), shape[1] + sum(shape[3])

    def derive():
        def flat(*xs):
            f = _replayed(rec, list(xs[n:]), False, n, has_aux)
            value, grads = _value_and_grad_core(f, list(xs[:n]), d_tree, has_aux, holomorphic)
            return _value_leaves(value, shape, has_aux) + tree_util.leaves(grads)
        avals = [x.aval for x in d_leaves] + [c.aval for c in rec.prog.consts]
        return _eager.Derived([_eager.derive_program(flat, avals)], None)

    entry = _eager.lookup(fun, ("value_and_grad", config, shape), rec, derive)
    if entry is None:
        f = _replayed(rec, rec.prog.consts, True, n, has_aux)
        return _value_and_grad_core(f, d_leaves, d_tree, has_aux, holomorphic)
    outs = _eager.run(entry, 0, list(d_leaves) + list(rec.prog.consts))
    value = _rebuild(shape, rec.extra[1], outs[:n_val], has_aux)
    return value, tree_util.unflatten(d_tree, outs[n_val:])


def _value_leaves(value, shape, has_aux):
    """The recorded leaves of a value_and_grad value (out, then traced aux leaves)."""
    if not has_aux:
        return tree_util.leaves(value)
    out, aux = value
    return tree_util.leaves(out) + [a for a, s in zip(tree_util.leaves(aux), shape[3]) if s]


def _eager_vjp(fun, p_leaves, p_tree, has_aux):
    rec = _record(fun, lambda *t: fun(*tree_util.unflatten(p_tree, list(t))), p_leaves,
                  has_aux, "vjp")
    if rec is None:
        return _vjp(fun, p_leaves, p_tree, has_aux)
    shape = rec.extra[0]
    n, n_out, n_val = len(p_leaves), shape[1], shape[1] + sum(shape[3])

    def derive():
        lin = []

        def forward(*xs):
            f = _replayed(rec, list(xs[n:]), False, n, has_aux)

            def flat_fun(*tracers):
                res = f(*tracers)
                out, aux = res if has_aux else (res, None)
                return tree_util.leaves(out), aux
            primal_out, prog, aux = _linearize_flat(flat_fun, list(xs[:n]))
            lin.append(prog)
            value = (primal_out, aux) if has_aux else primal_out
            return _value_leaves(value, shape, has_aux) + list(prog.consts)
        avals = [x.aval for x in p_leaves] + [c.aval for c in rec.prog.consts]
        fwd = _eager.derive_program(forward, avals)
        prog = lin[0]
        n_res = len(prog.consts)
        o_avals = [v.aval for v in fwd.outvars[:n_out]]
        live = [tangent_dtype(a.dtype) != dtypes.float0 for a in o_avals]

        def backward(*xs):
            it = iter(xs[n_res:])
            cts = [next(it) if keep else Zero(tangent_aval(a)) for a, keep in zip(o_avals, live)]
            return [R.instantiate(c) for c in backward_pass(prog, list(xs[:n_res]), cts)]
        bwd = _eager.derive_program(backward, [c.aval for c in prog.consts] +
                                    [tangent_aval(a) for a, k in zip(o_avals, live) if k])
        return _eager.Derived([fwd, bwd], n_res)

    entry = _eager.lookup(fun, ("vjp", has_aux, shape), rec, derive)
    if entry is None:
        return _vjp(_replayed(rec, rec.prog.consts, True, n, has_aux), p_leaves, p_tree, has_aux)
    outs = _eager.run(entry, 0, list(p_leaves) + list(rec.prog.consts))
    primal_out, residuals = outs[:n_out], outs[n_val:]
    value = _rebuild(shape, rec.extra[1], outs[:n_val], has_aux)
    o_tree = shape[0]

    def vjp_fn(cotangents):
        c_leaves = _cotangent_leaves(cotangents, o_tree, primal_out)
        cts = [c for c in c_leaves if type(c) is not Zero]
        return tree_util.unflatten(p_tree, _eager.run(entry, 1, residuals + cts))

    return (value[0], vjp_fn, value[1]) if has_aux else (value, vjp_fn)


def _normalize_argnums(op, argnums, nargs):
    single = isinstance(argnums, int) and not isinstance(argnums, bool)
    if not single and not isinstance(argnums, (tuple, list)):
        raise TypeError(f"{op}: argnums must be an int or a tuple of ints, got {argnums!r}")
    nums = (argnums,) if single else tuple(argnums)
    if not nums:
        raise ValueError(f"{op}: argnums must not be empty")
    out = []
    for n in nums:
        if not isinstance(n, int):
            raise TypeError(f"{op}: argnums must be ints, got {n!r}")
        if not -nargs <= n < nargs:
            raise ValueError(f"{op}: argnums {n} is out of range for a call with {nargs} "
                             f"positional arguments")
        out.append(n % nargs)
    if len(set(out)) != len(out):
        raise ValueError(f"{op}: argnums {nums} names an argument more than once")
    return single, tuple(out)


def _check_diff_inputs(op, leaves, allow_int, holomorphic):
    for x in leaves:
        dt = x.dtype
        if holomorphic and not dtypes.is_complex(dt):
            raise TypeError(f"{op} with holomorphic=True requires complex inputs, got {dt}")
        if not dtypes.is_inexact(dt) and not allow_int:
            raise TypeError(
                f"{op} requires real- or complex-valued (floating) inputs, got an input of dtype "
                f"{dt}. Differentiate with respect to float arguments only, use vjp (which "
                "gives float0 cotangents for integer inputs), or pass allow_int=True.")


def _diff_args(op, fun, args, kwargs, argnums, allow_int, holomorphic):
    """Selects the differentiated arguments: returns (single, leaves, treedef, f_partial) where
    ``f_partial(*diff_args)`` calls ``fun`` with the other arguments held fixed."""
    single, nums = _normalize_argnums(op, argnums, len(args))
    leaves, treedef = tree_util.flatten(tuple(args[n] for n in nums))
    leaves = _as_operands(leaves, op)
    _check_diff_inputs(op, leaves, allow_int, holomorphic)

    def f_partial(*dargs):
        full = list(args)
        for n, a in zip(nums, dargs):
            full[n] = a
        return fun(*full, **kwargs)

    return single, leaves, treedef, f_partial


def value_and_grad(fun, argnums=0, has_aux=False, holomorphic=False, allow_int=False):
    """``value_and_grad(f)(*args)`` returns ``(f(*args), grad(f)(*args))`` in one pass.

    Args:
        argnums: int or tuple of ints: which positional arguments to differentiate.
        has_aux: ``f`` returns ``(scalar, aux)``; returns ``((scalar, aux), grads)``.
        holomorphic: ``f`` is holomorphic with complex inputs and output.
        allow_int: allow int/bool arguments (their gradient is float0 zeros).
    Raises:
        TypeError: the output is not a scalar real (or complex when holomorphic) array, or an
            argument is integer-valued without allow_int.
    """
    @functools.wraps(fun)
    def value_and_grad_f(*args, **kwargs):
        single, d_leaves, d_tree, f_partial = _diff_args("grad", fun, args, kwargs, argnums,
                                                         allow_int, holomorphic)
        if _eager.applies(fun, d_leaves):
            config = (argnums if single else tuple(argnums), has_aux, holomorphic, allow_int)
            value, grads = _eager_value_and_grad(fun, f_partial, d_leaves, d_tree, has_aux,
                                                 holomorphic, config)
        else:
            value, grads = _value_and_grad_core(f_partial, d_leaves, d_tree, has_aux,
                                                holomorphic)
        return value, (grads[0] if single else tuple(grads))

    return value_and_grad_f


def _value_and_grad_core(f_partial, d_leaves, d_tree, has_aux, holomorphic):
    """(value, grads) by re-tracing ``f_partial`` (a function of the differentiated pytrees);
    value is ``out`` or ``(out, aux)``, grads a tuple with one pytree per argnum."""
    out, vjp_fn, *aux = _vjp(f_partial, d_leaves, d_tree, has_aux)
    out_leaves = tree_util.leaves(out)
    if len(out_leaves) != 1 or not hasattr(out_leaves[0], "shape"):
        raise TypeError(f"grad: the function must return a single scalar array, got "
                        f"{tree_util.structure(out)}")
    y = out_leaves[0]
    if tuple(y.shape) != ():
        raise TypeError(f"grad: the function must return a scalar (shape ()), got shape "
                        f"{tuple(y.shape)}; use jacrev / vjp for non-scalar outputs")
    if dtypes.is_complex(y.dtype) and not holomorphic:
        raise TypeError("grad: the function returned a complex scalar; use "
                        "holomorphic=True for holomorphic functions, or return a real value")
    if not dtypes.is_inexact(y.dtype):
        raise TypeError(f"grad: the function output has dtype {y.dtype}; it must be a "
                        "floating scalar")
    ct = wrap(np.ones((), dtype=y.dtype), False)
    grads = vjp_fn(tree_util.unflatten(tree_util.structure(out), [ct]))
    return ((out, aux[0]) if has_aux else out), grads


def grad(fun, argnums=0, has_aux=False, holomorphic=False, allow_int=False):
    """Gradient of a scalar-valued function (reverse mode; see value_and_grad for arguments).

    ``grad(f)(x)`` has the pytree structure, shapes and dtypes of ``x``; with ``has_aux`` it
    returns ``(grads, aux)``.
    """
    vg = value_and_grad(fun, argnums, has_aux, holomorphic, allow_int)

    @functools.wraps(fun)
    def grad_f(*args, **kwargs):
        value, g = vg(*args, **kwargs)
        return (g, value[1]) if has_aux else g

    return grad_f


def _std_basis(leaves):
    """Rows of the identity over the flattened inputs: one (n_total, *shape) array per leaf."""
    sizes = [int(np.prod(x.shape)) for x in leaves]
    total = sum(sizes)
    out, start = [], 0
    for x, n in zip(leaves, sizes):
        basis = np.zeros((total, n), dtype=x.dtype)
        basis[start:start + n, :] = np.eye(n, dtype=x.dtype)
        out.append(wrap(basis.reshape((total,) + tuple(x.shape)), False))
        start += n
    return out, total


def jacfwd(fun, argnums=0, has_aux=False, holomorphic=False):
    """Jacobian by forward mode: ``vmap`` of ``jvp`` over the standard basis of the inputs.

    For ``f: (*in_shape) -> (*out_shape)`` the result has shape ``(*out_shape, *in_shape)``
    (pytrees: nested as out-structure of in-structure). Efficient when inputs are small.
    """
    from .vmap import vmap

    @functools.wraps(fun)
    def jac_f(*args, **kwargs):
        single, leaves, tree, f_partial = _diff_args("jacfwd", fun, args, kwargs, argnums,
                                                     False, holomorphic)

        def f_flat(*flat):
            return f_partial(*tree_util.unflatten(tree, list(flat)))

        basis, total = _std_basis(leaves)

        def push(*tangents):
            res = jvp(f_flat, tuple(leaves), tuple(tangents), has_aux=has_aux)
            return res[1]

        aux = None
        if has_aux:
            _, aux = _split_aux("jacfwd", f_flat(*leaves))
        jac_t = vmap(push, in_axes=0, out_axes=-1)(*basis)  # (*out_shape, total)
        o_leaves, o_tree = tree_util.flatten(jac_t)
        result = []
        for o in o_leaves:
            start, per_arg = 0, []
            for x in leaves:
                n = int(np.prod(x.shape))
                piece = o[..., start:start + n] if n else _empty_piece(o, n)
                per_arg.append(_reshape_tail(piece, tuple(x.shape)))
                start += n
            pieces = tree_util.unflatten(tree, per_arg)
            result.append(pieces[0] if single else tuple(pieces))
        jac = tree_util.unflatten(o_tree, result)
        return (jac, aux) if has_aux else jac

    return jac_f


def _empty_piece(o, n):
    from ..arrays import numpy as snp
    return snp.zeros(tuple(o.shape[:-1]) + (0,), dtype=o.dtype)


def _reshape_tail(piece, shape):
    from ..arrays import numpy as snp
    return snp.reshape(piece, tuple(piece.shape[:-1]) + shape)


def jacrev(fun, argnums=0, has_aux=False, holomorphic=False, allow_int=False):
    """Jacobian by reverse mode: ``vmap`` of the VJP over the standard basis of the outputs.

    Same output layout as ``jacfwd``: ``(*out_shape, *in_shape)``. Efficient when outputs are small.
    """
    from .vmap import vmap

    @functools.wraps(fun)
    def jac_f(*args, **kwargs):
        single, d_leaves, d_tree, f_partial = _diff_args("jacrev", fun, args, kwargs, argnums,
                                                         allow_int, holomorphic)
        res = vjp(f_partial, *tree_util.unflatten(d_tree, d_leaves), has_aux=has_aux)
        out, vjp_fn = res[0], res[1]
        o_leaves, o_tree = tree_util.flatten(out)
        o_leaves = _as_operands(o_leaves, "jacrev")
        for o in o_leaves:
            if dtypes.is_complex(o.dtype) and not holomorphic:
                raise TypeError(
                    f"jacrev: the function has a complex output ({o.dtype}); reverse mode "
                    "gives only one real Jacobian per real output. Pass holomorphic=True for "
                    "holomorphic functions of complex inputs, use jacfwd, or use vjp directly.")
        basis, total = _std_basis(o_leaves)

        def pull(*cts):
            return vjp_fn(tree_util.unflatten(o_tree, list(cts)))

        rows = vmap(pull)(*basis)  # per diff arg: (total, *in_shape)
        row_leaves, row_tree = tree_util.flatten(rows)
        per_out = []
        start = 0
        for o in o_leaves:
            n = int(np.prod(o.shape))
            per_in = [_reshape_head(r[start:start + n], tuple(o.shape)) for r in row_leaves]
            r_tree = tree_util.unflatten(row_tree, per_in)
            per_out.append(r_tree[0] if single else tuple(r_tree))
            start += n
        jac = tree_util.unflatten(o_tree, per_out)
        return (jac, res[2]) if has_aux else jac

    return jac_f


def _reshape_head(piece, shape):
    from ..arrays import numpy as snp
    return snp.reshape(piece, shape + tuple(piece.shape[1:]))


def hessian(fun, argnums=0, has_aux=False, holomorphic=False):
    """Hessian as ``jacfwd(jacrev(f))``: shape ``(*in_shape, *in_shape)`` for scalar ``f``."""
    return jacfwd(jacrev(fun, argnums, has_aux=has_aux, holomorphic=holomorphic), argnums,
                  has_aux=has_aux, holomorphic=holomorphic)
