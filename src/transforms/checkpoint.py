"""Rematerialisation (``checkpoint`` / remat): trade compute for memory in reverse mode.

Without checkpointing, reverse mode keeps every intermediate (residual) of the forward pass
until the backward pass. ``checkpoint(f)`` keeps only ``f``'s inputs (plus what the policy saves)
and recomputes the rest of ``f``'s forward pass when its cotangent is needed.

How: under differentiation the JVP trace evaluates ``f``'s staged Program once for the primal
outputs, saving only the policy's residuals, and emits one ``checkpoint_lin`` equation for the
tangent. Transposing that equation runs ``vjp`` of ``f`` at the saved inputs, which recomputes
the forward pass then. Saved dot products enter the recomputation through ``use_saved``, whose
value is the saved array and whose JVP is the dot's (bilinear) tangent, so nothing is lost and
the dots are not recomputed. Values are never changed, only what is stored.
"""
from __future__ import annotations

import functools

from .. import tree as tree_util
from ..arrays.array import wrap
from ..arrays.convert import operand
from ..arrays.ops import rules as R
from ..core.ad_util import Zero, tangent_aval
from ..core.ir import Literal
from ..core.primitive import Primitive
from ..core.trace import current_trace, set_current_trace
from .stage import trace_to_program

POLICIES = {
    None: "nothing", "nothing": "nothing", "save_nothing": "nothing",
    "nothing_saveable": "nothing", "dots": "dots", "save_dots": "dots", "dots_saveable": "dots",
}
_SAVEABLE_DOTS = ("dot_general",)


def _policy_name(policy):
    if callable(policy):
        return policy
    try:
        return POLICIES[policy]
    except (KeyError, TypeError):
        raise ValueError(f"checkpoint: unknown policy {policy!r}; use 'save_nothing', "
                         "'save_dots', or a callable (primitive, params) -> bool") from None


def _saves(policy, eqn):
    if policy == "nothing":
        return False
    if policy == "dots":
        return eqn.primitive.name in _SAVEABLE_DOTS
    return bool(policy(eqn.primitive, eqn.params))


def checkpoint(fun=None, *, policy=None):
    """Marks ``fun`` for rematerialisation in reverse mode.

    Usable as ``@checkpoint``, ``checkpoint(f)`` and ``checkpoint(policy="save_dots")(f)``.

    Args:
        fun: a function of positional pytree arguments; it is staged (traced abstractly) when
            differentiated, so Python control flow on array values is not allowed inside it.
        policy: what the forward pass stores for the backward pass besides ``fun``'s inputs:
            "save_nothing" (default; everything is recomputed), "save_dots" (outputs of matrix
            products are stored, elementwise work is recomputed), or a callable
            ``(primitive, params) -> bool`` choosing per equation.
    Returns:
        A function with the same values as ``fun`` (in every mode); only memory use changes.
    Raises:
        ValueError: unknown policy.
    """
    if fun is None:
        return functools.partial(checkpoint, policy=policy)
    pol = _policy_name(policy)

    @functools.wraps(fun)
    def remat_fun(*args):
        leaves, in_tree = tree_util.flatten(args)
        leaves = [operand(x, "checkpoint") for x in leaves]
        out_tree = []

        def flat_fun(*xs):
            out = fun(*tree_util.unflatten(in_tree, list(xs)))
            o_leaves, ot = tree_util.flatten(out)
            out_tree.append(ot)
            return [operand(o, "checkpoint") for o in o_leaves]

        outs = checkpoint_call(flat_fun, leaves, pol)
        return tree_util.unflatten(out_tree[-1], outs)

    return remat_fun


remat = checkpoint


def checkpoint_call(fun, args, policy):
    """Dispatches a flat checkpointed call to the current trace (flat lists in and out)."""
    handler = getattr(current_trace(), "process_checkpoint_call", None)
    if handler is None:
        return fun(*args)
    return handler(fun, args, policy)


# ---- evaluation with saved residuals -----------------------------------------------------------

def _eval(prog, args, saved=None, record=None, policy="nothing"):
    """Evaluates ``prog``; ``record`` collects policy-saved outputs (eqn index -> value);
    ``saved`` replaces those equations by ``use_saved`` of the stored value."""
    env = dict(zip(prog.constvars, prog.consts))
    env.update(zip(prog.invars, args))

    def read(v):
        return wrap(v.val, v.aval.weak_type) if isinstance(v, Literal) else env[v]

    for i, eqn in enumerate(prog.eqns):
        ins = [read(v) for v in eqn.invars]
        if saved is not None and i in saved:
            out = use_saved_p.bind(saved[i], *ins, name=eqn.primitive.name,
                                   params=tuple(sorted(eqn.params.items())))
            outs = [out]
        else:
            outs = eqn.primitive.bind(*ins, **eqn.params)
            outs = outs if eqn.primitive.multiple_results else [outs]
            if record is not None and _saves(policy, eqn):
                record[i] = outs[0]
        env.update(zip(eqn.outvars, outs))
    return [read(v) for v in prog.outvars]


# use_saved(saved, *inputs): value = saved; JVP = the saved primitive's tangent, which for the
# bilinear dot products does not need the primal product itself.
use_saved_p = Primitive("use_saved", family="autodiff")
use_saved_p.impl = lambda saved, *ins, name, params: saved
use_saved_p.abstract_eval = lambda saved, *ins, name, params: saved
use_saved_p.weak_type = lambda w, *rest, name, params: w


def _use_saved_jvp(primals, tangents, *, name, params):
    saved, lhs, rhs = primals
    _, t_lhs, t_rhs = tangents
    prim = Primitive.registry[name]
    kw = dict(params)
    out = Zero(tangent_aval(saved.aval))
    if type(t_lhs) is not Zero:
        out = R.add_tangents(out, prim.bind(t_lhs, rhs, **kw))
    if type(t_rhs) is not Zero:
        out = R.add_tangents(out, prim.bind(lhs, t_rhs, **kw))
    return saved, out


def _use_saved_batch(args, dims, *, name, params):
    return args[0], dims[0]


use_saved_p.jvp = _use_saved_jvp
use_saved_p.batch = _use_saved_batch


# ---- checkpoint_lin: the tangent of a checkpointed call ----------------------------------------

checkpoint_lin_p = Primitive("checkpoint_lin", multiple_results=True, family="autodiff")


def _split(args, n_primals, saved_ids):
    primals = list(args[:n_primals])
    saved = dict(zip(saved_ids, args[n_primals:n_primals + len(saved_ids)]))
    tangents = list(args[n_primals + len(saved_ids):])
    return primals, saved, tangents


def _tangent_fn(prog, n_primals, saved_ids):
    from .grad import jvp

    def fn(*args):
        primals, saved, tangents = _split(args, n_primals, saved_ids)
        f = lambda *p: _eval(prog, p, saved=saved)  # noqa: E731
        return list(jvp(f, tuple(primals), tuple(tangents))[1])
    return fn


def _lin_impl(*bufs, prog, n_primals, saved_ids):
    # Reached under the eval trace (plain jvp of a checkpointed function): compute directly.
    outs = _tangent_fn(prog, n_primals, saved_ids)(*[wrap(b, False) for b in bufs])
    return [o._buf for o in outs]


def _lin_abstract_eval(*avals, prog, n_primals, saved_ids):
    return [tangent_aval(v.aval) for v in prog.outvars]


def _lin_jvp(primals, tangents, *, prog, n_primals, saved_ids):
    from .grad import jvp
    fn = _tangent_fn(prog, n_primals, saved_ids)
    tangents = [R.instantiate(t) for t in tangents]
    out, t_out = jvp(lambda *a: fn(*a), tuple(primals), tuple(tangents))
    return list(out), list(t_out)


def _lin_transpose(cts, *args, prog, n_primals, saved_ids):
    from .grad import vjp
    from ..arrays.lax.barrier import optimization_barrier
    primals, saved, _ = _split(args, n_primals, saved_ids)
    # The recomputation goes through a barrier: staged (under compile), it would otherwise be
    # the forward pass's equations on the same inputs again, and CSE would merge it back into
    # the forward pass, keeping every intermediate alive as a residual (no rematerialisation).
    _, f_vjp = vjp(lambda *p: _eval(prog, optimization_barrier(list(p)), saved=saved),
                   *primals)
    cts = [R.instantiate(c) for c in cts]
    cts_in = f_vjp(list(cts))
    return [None] * (n_primals + len(saved_ids)) + list(cts_in)


def _lin_batch(args, dims, *, prog, n_primals, saved_ids):
    from .vmap import vmap
    fn = _tangent_fn(prog, n_primals, saved_ids)
    outs = vmap(lambda *a: fn(*a), in_axes=tuple(dims))(*args)
    return list(outs), [0] * len(outs)


checkpoint_lin_p.impl = _lin_impl
checkpoint_lin_p.abstract_eval = _lin_abstract_eval
checkpoint_lin_p.jvp = _lin_jvp
checkpoint_lin_p.transpose = _lin_transpose
checkpoint_lin_p.batch = _lin_batch
checkpoint_lin_p.is_linear = True


def jvp_checkpoint_call(trace, fun, args, policy):
    """The JVP trace's handling of a checkpointed call (see module docstring)."""
    primals, tangents = [], []
    for a in args:
        p, t = trace.lift(a)
        primals.append(p)
        tangents.append(t)
    with set_current_trace(trace.parent):
        if all(type(t) is Zero for t in tangents):
            return None, checkpoint_call(fun, primals, policy)
        prog = trace_to_program(fun, [p.aval for p in primals])
        record = {}
        outs = _eval(prog, primals, record=record, policy=policy)
        saved_ids = tuple(sorted(record))
        tangents = [R.instantiate(t) for t in tangents]
        t_outs = checkpoint_lin_p.bind(*primals, *[record[i] for i in saved_ids], *tangents,
                                       prog=prog, n_primals=len(primals), saved_ids=saved_ids)
    return list(zip(outs, t_outs)), None
