"""User-defined differentiation rules: ``custom_jvp`` and ``custom_vjp``.

Each trace decides what a custom call means: eval and staging run the function itself; the JVP
trace applies the custom rule; the batch trace vectorises both the function and its rule and
hands them to its parent, so custom rules survive ``grad(vmap(f))`` and ``vmap(grad(f))``.
"""
from __future__ import annotations

import functools
import inspect

import numpy as np

from .. import tree as tree_util
from ..arrays.convert import operand
from ..arrays.ops import rules as R
from ..core import dtypes
from ..core.ad_util import Zero, tangent_aval
from ..core.avals import ShapedArray
from ..core.primitive import Primitive
from ..core.trace import current_trace


def custom_jvp_call(fun, jvp, args, symbolic_zeros=False):
    """Dispatches a flat custom-JVP call to the current trace (flat lists in and out)."""
    trace = current_trace()
    handler = getattr(trace, "process_custom_jvp_call", None)
    if handler is None:
        return fun(*args)
    return handler(fun, jvp, args, symbolic_zeros)


def custom_vjp_call(fun, fwd, bwd, args, out_avals_fn):
    """Dispatches a flat custom-VJP call to the current trace (flat lists in and out)."""
    trace = current_trace()
    handler = getattr(trace, "process_custom_vjp_call", None)
    if handler is None:
        return fun(*args)
    return handler(fun, fwd, bwd, args, out_avals_fn)


def _split_args(sig, fun_name, nondiff_argnums, args, kwargs):
    if kwargs:
        bound = sig.bind(*args, **kwargs)
        args = bound.args
        if bound.kwargs:
            raise TypeError(f"{fun_name}: keyword-only arguments are not supported by custom "
                            "derivative functions")
    nondiff = tuple(args[i] for i in nondiff_argnums)
    diff = tuple(a for i, a in enumerate(args) if i not in nondiff_argnums)
    return nondiff, diff


def _merge(nondiff_argnums, nondiff, diff):
    out, it_n, it_d = [], iter(nondiff), iter(diff)
    for i in range(len(nondiff) + len(diff)):
        out.append(next(it_n) if i in nondiff_argnums else next(it_d))
    return out


class _CustomBase:
    """What custom_jvp and custom_vjp share: argument splitting and the flattened function."""

    def __init__(self, fun, nondiff_argnums):
        functools.update_wrapper(self, fun)
        self.fun = fun
        self.nondiff_argnums = tuple(nondiff_argnums)
        self._sig = inspect.signature(fun)

    def _flatten_call(self, kind, args, kwargs):
        """(name, nondiff, diff, leaves, in_tree, out_tree list, flat_fun) for one call."""
        name = getattr(self.fun, "__name__", kind)
        nondiff, diff = _split_args(self._sig, name, self.nondiff_argnums, args, kwargs)
        leaves, in_tree = tree_util.flatten(diff)
        leaves = [operand(x, name) for x in leaves]
        out_tree = []

        def flat_fun(*flat):
            out = self.fun(*self._full_args(nondiff, in_tree, flat))
            o_leaves, ot = tree_util.flatten(out)
            out_tree.append(ot)
            return [operand(o, name) for o in o_leaves]

        return name, nondiff, diff, leaves, in_tree, out_tree, flat_fun

    def _full_args(self, nondiff, in_tree, flat):
        return _merge(self.nondiff_argnums, nondiff, tree_util.unflatten(in_tree, list(flat)))


class custom_jvp(_CustomBase):
    """Wraps ``fun`` so that forward (and hence reverse) mode use a rule you supply.

    Usage::

        @custom_jvp
        def f(x, y): ...

        @f.defjvp
        def f_jvp(primals, tangents):
            x, y = primals; tx, ty = tangents
            return f(x, y), <tangent of the output>

    ``nondiff_argnums``: positions of arguments that are not differentiated (Python values,
    functions, ...); they are passed first to the rule: ``f_jvp(*nondiff, primals, tangents)``.
    Raises TypeError when the rule's outputs do not match ``fun``'s structure/shapes/dtypes.
    """

    def __init__(self, fun, nondiff_argnums=()):
        super().__init__(fun, nondiff_argnums)
        self.jvp = None
        self.symbolic_zeros = False

    def defjvp(self, jvp, symbolic_zeros=False):
        self.jvp = jvp
        self.symbolic_zeros = symbolic_zeros
        return jvp

    def __call__(self, *args, **kwargs):
        if self.jvp is None:
            name = getattr(self.fun, "__name__", "custom_jvp")
            raise AttributeError(f"custom_jvp {name}: no JVP rule defined; use @{name}.defjvp")
        name, nondiff, diff, leaves, in_tree, out_tree, flat_fun = self._flatten_call(
            "custom_jvp", args, kwargs)

        def flat_jvp(primals, tangents):
            p = tree_util.unflatten(in_tree, list(primals))
            t = tree_util.unflatten(in_tree, list(tangents))
            res = self.jvp(*nondiff, tuple(p), tuple(t))
            if not isinstance(res, (tuple, list)) or len(res) != 2:
                raise TypeError(f"custom_jvp {name}: the JVP rule must return a pair "
                                f"(primal_out, tangent_out), got {type(res).__name__}")
            p_out, t_out = res
            pl, pt = tree_util.flatten(p_out)
            tl, tt = tree_util.flatten(t_out)
            if pt != tt:
                raise TypeError(f"custom_jvp {name}: primal and tangent outputs of the rule "
                                f"differ in structure: {pt} vs {tt}")
            out_tree.append(pt)
            pl = [operand(x, name) for x in pl]
            tl = [_fit_tangent(name, operand(x, name), pv) for x, pv in zip(tl, pl)]
            return pl, tl

        outs = custom_jvp_call(flat_fun, flat_jvp, leaves, self.symbolic_zeros)
        return tree_util.unflatten(out_tree[-1], outs)


def _fit_tangent(name, t, primal, kind="custom_jvp", what="tangent output"):
    want = tangent_aval(primal.aval)
    if type(t) is Zero:
        return t
    if tuple(t.shape) != tuple(want.shape):
        raise TypeError(f"{kind} {name}: {what} of shape {tuple(t.shape)} does not match its "
                        f"primal's shape {tuple(want.shape)}")
    # Another float precision (a NumPy float64 constant for a float32 primal) is cast; an
    # integer / bool value for a float primal, or a complex one for a real primal, is a bug in
    # the rule (a cast would silently truncate or drop the imaginary part), as in JAX.
    if dtypes.is_inexact(want.dtype) and (
            not dtypes.is_inexact(t.dtype)
            or (dtypes.is_complex(t.dtype) and not dtypes.is_complex(want.dtype))):
        raise TypeError(f"{kind} {name}: {what} has dtype {t.dtype}, but its primal "
                        f"{primal.aval.dtype}{list(primal.shape)} needs a {want.dtype} one "
                        f"(floating values of another precision are cast; integer, bool or "
                        f"complex-for-real ones are not)")
    return R.to_tangent_dtype(t, primal.aval)


class custom_vjp(_CustomBase):
    """Wraps ``fun`` so that reverse mode uses a forward/backward pair you supply.

    Usage::

        @custom_vjp
        def f(x): ...
        def f_fwd(x): return f(x), residuals
        def f_bwd(residuals, ct): return (ct_x,)        # one entry per differentiable argument
        f.defvjp(f_fwd, f_bwd)

    With ``nondiff_argnums`` the backward function receives them first: ``f_bwd(*nondiff, res,
    ct)``. ``None`` entries in the returned tuple mean zero cotangents. Forward mode (jvp) of a
    custom_vjp function raises TypeError, as there is no forward rule to apply.
    """

    def __init__(self, fun, nondiff_argnums=()):
        super().__init__(fun, nondiff_argnums)
        self.fwd = None
        self.bwd = None

    def defvjp(self, fwd, bwd):
        self.fwd = fwd
        self.bwd = bwd
        return self

    def __call__(self, *args, **kwargs):
        if self.fwd is None:
            name = getattr(self.fun, "__name__", "custom_vjp")
            raise AttributeError(f"custom_vjp {name}: no rule defined; use {name}.defvjp(fwd, bwd)")
        name, nondiff, diff, leaves, in_tree, out_tree, flat_fun = self._flatten_call(
            "custom_vjp", args, kwargs)

        def flat_fwd(*flat):
            res = self.fwd(*self._full_args(nondiff, in_tree, flat))
            if not isinstance(res, (tuple, list)) or len(res) != 2:
                raise TypeError(f"custom_vjp {name}: fwd must return (output, residuals)")
            out, residuals = res
            o_leaves, ot = tree_util.flatten(out)
            out_tree.append(ot)
            return [operand(o, name) for o in o_leaves], residuals

        def flat_bwd(residuals, cts):
            ct_tree = tree_util.unflatten(out_tree[-1], [R.instantiate(c) for c in cts])
            res = self.bwd(*nondiff, residuals, ct_tree)
            if not isinstance(res, (tuple, list)) or len(res) != len(diff):
                raise TypeError(f"custom_vjp {name}: bwd must return a tuple with one entry per "
                                f"differentiable argument ({len(diff)}), got {res!r:.80}")
            flat = []
            for arg, ct in zip(diff, res):
                arg_leaves = tree_util.leaves(arg)
                if ct is None:
                    flat.extend(Zero(tangent_aval(operand(a, name).aval)) for a in arg_leaves)
                    continue
                ct_leaves = tree_util.leaves(ct)
                if len(ct_leaves) != len(arg_leaves):
                    raise TypeError(f"custom_vjp {name}: bwd output {ct!r:.60} does not match "
                                    "the structure of its argument")
                flat.extend(_fit_tangent(name, operand(c, name), operand(a, name), "custom_vjp",
                                         "bwd cotangent")
                            for c, a in zip(ct_leaves, arg_leaves))
            return flat

        outs = custom_vjp_call(flat_fun, flat_fwd, flat_bwd, leaves, None)
        return tree_util.unflatten(out_tree[-1], outs)


# ---- custom_lin: the linear stand-in for a custom_vjp function's tangent ---------------------

custom_lin_p = Primitive("custom_lin", multiple_results=True, family="autodiff")


def _custom_lin_impl(*args, num_res, bwd, res_tree, out_avals):
    raise TypeError("forward-mode differentiation (jvp / jacfwd) of a custom_vjp function is not "
                    "supported: it defines only a backward rule. Use grad / vjp / jacrev, or "
                    "define a custom_jvp instead.")


def _custom_lin_transpose(cts, *args, num_res, bwd, res_tree, out_avals):
    res = tree_util.unflatten(res_tree, list(args[:num_res]))
    cts = [R.instantiate(c) if type(c) is Zero else c for c in cts]
    cts_in = bwd(res, cts)
    return [None] * num_res + [None if type(c) is Zero else c for c in cts_in]


custom_lin_p.impl = _custom_lin_impl
custom_lin_p.abstract_eval = lambda *avals, out_avals, **_: list(out_avals)
custom_lin_p.transpose = _custom_lin_transpose
custom_lin_p.batch = lambda args, dims, **p: _custom_lin_impl(**p)
custom_lin_p.is_linear = True


def custom_lin(residuals, tangents, bwd, out_avals):
    """Binds custom_lin: tangent outputs whose transpose is ``bwd(residuals, cts)``."""
    res_leaves, res_tree = tree_util.flatten(residuals)
    res_leaves = [operand(r, "custom_vjp") for r in res_leaves]
    tangents = [R.instantiate(t) for t in tangents]
    outs = custom_lin_p.bind(*res_leaves, *tangents, num_res=len(res_leaves), bwd=bwd,
                             res_tree=res_tree,
                             out_avals=tuple(tangent_aval(ShapedArray(a.shape, a.dtype))
                                             for a in out_avals))
    return outs


# ---- custom calls inside staged Programs -----------------------------------------------------

class StagedCustomCall(Primitive):
    """A custom_jvp / custom_vjp call recorded in a Program (a cond / switch / scan / while /
    shard_map body, a checkpointed or compiled function), as JAX's ``custom_jvp_call``.

    Params: ``call``, the staged function (a closed Program whose leading ``num_consts`` invars
    are the values it closed over, passed as the first operands), and the rules (``jvp`` and
    ``symbolic_zeros``, or ``fwd``, ``bwd`` and ``out_avals_fn``). Binding it re-enters the
    custom call under the current trace, so a transformation applied to the Program later (the
    jvp of a cond body under grad, vmap of a scan body) applies the user's rule, as it does
    outside staging; evaluating it runs ``call``. Backends, the partitioner and export inline
    ``call`` (``core.ir.inline_custom_calls``): by then no derivative is taken any more.
    """

    def __init__(self, name, enter):
        super().__init__(name, multiple_results=True, family="autodiff")
        self.meta["custom_call"] = True
        self._enter = enter
        self.impl = _staged_impl
        self.abstract_eval = lambda *avals, call, **_: [v.aval for v in call.outvars]
        self.weak_type = lambda *weak, call, **_: [v.aval.weak_type for v in call.outvars]
        self.jvp = self._jvp
        self.batch = self._batch

    def bind(self, *args, **params):
        consts, xs = list(args[:params["num_consts"]]), list(args[params["num_consts"]:])
        call = params["call"]

        def fun(*ys):
            from .control import programs as P
            return P.call(call, consts + list(ys))
        fun.staged = (call, consts)
        return self._enter(fun, xs, params)

    def stage(self, trace, fun, args, **rules):
        """Records the call of ``fun`` on ``args`` with ``rules`` in the staging ``trace``."""
        call, consts = getattr(fun, "staged", (None, None))
        if call is None:
            from .control import programs as P
            call, consts = P.stage(fun, [operand(a, self.name).aval for a in args])
        params = dict(rules, call=call, num_consts=len(consts))
        return trace.process_primitive(self, list(consts) + list(args), params)

    # Direct uses of the rule slots (binding re-enters the custom call, so the traces do not
    # need them) get the same answers through the traces' own handling.
    def _jvp(self, primals, tangents, **params):
        from .jvp import jvp_flat
        return jvp_flat(lambda *a: self.bind(*a, **params), primals, tangents)

    def _batch(self, vals, dims, **params):
        from ..core.axis_env import current_batching_axis
        from .vmap import _batched_flat
        size = next(v.shape[d] for v, d in zip(vals, dims) if d is not None)
        outs = _batched_flat(lambda *a: self.bind(*a, **params), dims, size,
                             current_batching_axis())(*vals)
        return outs, [0] * len(outs)


def _staged_impl(*bufs, call, **_):
    from ..arrays.array import wrap
    from .control import programs as P
    return [np.asarray(o._buf) for o in P.call(call, [wrap(b, False) for b in bufs])]


custom_jvp_call_p = StagedCustomCall(
    "custom_jvp_call",
    lambda fun, xs, p: custom_jvp_call(fun, p["jvp"], xs, p["symbolic_zeros"]))
custom_vjp_call_p = StagedCustomCall(
    "custom_vjp_call",
    lambda fun, xs, p: custom_vjp_call(fun, p["fwd"], p["bwd"], xs, p["out_avals_fn"]))
