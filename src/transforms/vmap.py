"""Vectorisation: the batching interpreter and ``vmap``.

A BatchTracer carries a value with one extra axis (``bdim``) holding the batch. Each primitive's
``batch`` rule maps batched operands to a batched result in one call (no per-example loop).
Values that do not depend on the batched inputs stay unbatched (``bdim is None``).
"""
from __future__ import annotations

import contextlib
import functools

from .. import tree as tree_util
from ..arrays.convert import operand
from ..arrays.ops import rules as R
from ..core.axis_env import batching_axis, bound_axes, uses_axis_name
from ..core.primitive import MissingRuleError
from ..core.trace import Trace, Tracer, new_trace, set_current_trace
from . import eager_cache as _eager


class BatchTracer(Tracer):
    """A batched value: ``val`` has the batch at axis ``bdim``; ``aval`` is per-example."""

    __slots__ = ("val", "bdim")

    def __init__(self, trace, val, bdim):
        self._trace = trace
        self.val = val
        self.bdim = bdim

    @property
    def aval(self):
        a = self.val.aval
        shape = a.shape[:self.bdim] + a.shape[self.bdim + 1:]
        return a.update(shape=shape)


class BatchTrace(Trace):
    """Interpreter for vmap. ``axis_name`` names the mapped axis for collectives."""

    def __init__(self, parent, axis_size, axis_name=None):
        super().__init__(parent)
        self.axis_size = axis_size
        self.axis_name = axis_name

    def lift(self, x):
        if isinstance(x, BatchTracer) and x._trace is self:
            return x.val, x.bdim
        if isinstance(x, Tracer):
            x._trace.check_valid(x)
        return x, None

    def process_primitive(self, prim, args, params):
        vals, dims = [], []
        for a in args:
            v, d = self.lift(a)
            vals.append(v)
            dims.append(d)
        named = prim.meta.get("named_axes")
        if named is not None and self.axis_name is not None and self.axis_name in named(params):
            # A collective over this vmap's axis (psum(x, name), axis_index(name), ...): its
            # batch rule reduces / gathers along the batch even when no operand is batched.
            with set_current_trace(self.parent):
                out, out_dim = prim.meta["batch_named"](vals, dims, self.axis_name,
                                                        self.axis_size, **params)
            if prim.multiple_results:
                return [self.wrap(o, d) for o, d in zip(out, out_dim)]
            return self.wrap(out, out_dim)
        if all(d is None for d in dims):
            if self.axis_name is None or not uses_axis_name(params, self.axis_name):
                with set_current_trace(self.parent):
                    return prim.bind(*vals, **params)
            # a body holds a collective over this axis: its result depends on the member, so
            # the primitive is batched even though no operand is (one operand is broadcast)
            vals, dims = self._broadcast_one(prim, vals, dims)
        rule = prim.batch
        if rule is None:
            raise MissingRuleError(prim, "batch")
        with set_current_trace(self.parent), batching_axis(self.axis_name):
            out, out_dim = rule(vals, dims, **params)
        if prim.multiple_results:
            return [self.wrap(o, d) for o, d in zip(out, out_dim)]
        return self.wrap(out, out_dim)

    def _broadcast_one(self, prim, vals, dims):
        if not vals:
            raise ValueError(f"vmap: {prim.name} has no operands to batch, but its body uses a "
                             f"collective over the vmap axis {self.axis_name!r}")
        with set_current_trace(self.parent):
            last = R.bdim_to_front(vals[-1], None, self.axis_size)
        return vals[:-1] + [last], dims[:-1] + [0]

    def wrap(self, val, bdim):
        return val if bdim is None else BatchTracer(self, val, bdim)

    def _unwrap_to_front(self, args):
        vals = []
        for a in args:
            v, d = self.lift(a)
            vals.append(v if d is None else R.move_axis(v, d, 0))
        dims = [None if self.lift(a)[1] is None else 0 for a in args]
        return vals, dims

    def process_custom_jvp_call(self, fun, jvp, args, symbolic_zeros=False):
        from .custom import custom_jvp_call
        vals, dims = self._unwrap_to_front(args)
        size, name = self.axis_size, self.axis_name
        fun_b = _batched_flat(fun, dims, size, name)

        def jvp_b(primals, tangents):
            n = len(primals)
            tangents = [R.instantiate(t) for t in tangents]
            flat = _batched_flat(lambda *xs: _concat_pair(jvp(list(xs[:n]), list(xs[n:]))),
                                 dims + dims, size, name)(*primals, *tangents)
            return flat[:len(flat) // 2], flat[len(flat) // 2:]

        with set_current_trace(self.parent):
            outs = custom_jvp_call(fun_b, jvp_b, vals, symbolic_zeros=False)
        return [BatchTracer(self, o, 0) for o in outs]

    def process_custom_vjp_call(self, fun, fwd, bwd, args, out_avals_fn):
        from .custom import custom_vjp_call
        vals, dims = self._unwrap_to_front(args)
        size, name = self.axis_size, self.axis_name
        fun_b = _batched_flat(fun, dims, size, name)
        n_out = []

        def fwd_b(*xs):
            def flat_fwd(*ys):
                outs, res = fwd(*ys)
                res_leaves, res_tree = tree_util.flatten(res)
                n_out.append((len(outs), res_tree))
                return list(outs) + list(res_leaves)
            flat = _batched_flat(flat_fwd, dims, size, name)(*xs)
            k, res_tree = n_out[-1]
            return flat[:k], tree_util.unflatten(res_tree, flat[k:])

        def bwd_b(res, cts):
            res_leaves, res_tree = tree_util.flatten(res)
            m = len(res_leaves)

            def flat_bwd(*ys):
                return list(bwd(tree_util.unflatten(res_tree, list(ys[:m])), list(ys[m:])))
            cts = [R.instantiate(c) for c in cts]
            return _batched_flat(flat_bwd, [0] * (m + len(cts)), size, name)(*res_leaves, *cts)

        with set_current_trace(self.parent):
            outs = custom_vjp_call(fun_b, fwd_b, bwd_b, vals, None)
        return [BatchTracer(self, o, 0) for o in outs]


    def process_checkpoint_call(self, fun, args, policy):
        from .checkpoint import checkpoint_call
        vals, dims = self._unwrap_to_front(args)
        fun_b = _batched_flat(fun, dims, self.axis_size, self.axis_name)
        with set_current_trace(self.parent):
            outs = checkpoint_call(fun_b, vals, policy)
        return [BatchTracer(self, o, 0) for o in outs]


def _bind_name(axis_name, size):
    return bound_axes({axis_name: size}) if axis_name is not None else contextlib.nullcontext()


def _concat_pair(pair):
    a, b = pair
    return list(a) + [R.instantiate(t) for t in b]


def _batched_flat(fun, in_dims, axis_size, axis_name, out_dim=0):
    """``fun`` (flat list in, flat list out) vectorised over ``in_dims``; outputs batched at
    ``out_dim`` (broadcast when they do not depend on the batch)."""
    def batched(*vals):
        with new_trace(BatchTrace, axis_size, axis_name) as trace, _bind_name(axis_name, axis_size):
            tracers = [v if d is None else BatchTracer(trace, v, d) for v, d in zip(vals, in_dims)]
            outs = fun(*tracers)
            result = []
            for o in outs:
                v, d = trace.lift(operand(o, "vmap"))
                result.append(_to_out_axis(v, d, out_dim, axis_size))
        return result
    return batched


def _to_out_axis(v, d, out_dim, size):
    if out_dim is None:
        if d is not None:
            raise ValueError("vmap: out_axes is None for an output that depends on the mapped "
                             "axis (it is batched); give an int out axis")
        return v
    if d is None:
        v = R.bdim_to_front(v, None, size)
        d = 0
    nd = v.ndim
    if not -nd <= out_dim < nd:
        raise ValueError(f"vmap: out_axes {out_dim} is out of range for an output of ndim "
                         f"{nd - 1} (valid: {-nd}..{nd - 1})")
    return R.move_axis(v, d, out_dim % nd)


def _describe(path):
    return tree_util.path_str(path)


def vmap(fun, in_axes=0, out_axes=0, axis_size=None, axis_name=None):
    """Vectorising map: ``vmap(f)(xs)`` computes ``stack([f(x) for x in xs])`` in one batched
    computation (every primitive's batch rule, no Python loop).

    Args:
        fun: function of positional pytree arguments.
        in_axes: int, None, or a pytree prefix of the positional arguments (a tuple with one
            entry per argument, entries int / None / nested prefixes). Negative axes count from
            the end. None means "not mapped" (broadcast to every example).
        out_axes: int, None, or a pytree prefix of the outputs: where the mapped axis goes.
        axis_size: the batch size; required when no input is mapped.
        axis_name: a name for the mapped axis: collectives over it (``psum(x, axis_name)``,
            ``all_gather``, ``axis_index``...) treat the batch as a group of members, anywhere
            inside ``fun`` (control-flow bodies and shard_map bodies included).
    Raises:
        ValueError: mapped inputs disagree on the axis size (the message lists each argument's
            path, shape, axis and size), an axis is out of range, or no size can be inferred.
        TypeError: in_axes does not match the arguments' structure.
    """
    if isinstance(in_axes, list):
        in_axes = tuple(in_axes)

    @functools.wraps(fun)
    def vmapped(*args, **kwargs):
        if kwargs:
            raise TypeError("vmap: keyword arguments are not mapped; bind them with "
                            "functools.partial or pass them positionally")
        axes = in_axes
        if isinstance(axes, tuple) and len(axes) != len(args):
            raise TypeError(f"vmap: in_axes has {len(axes)} entries but the function was called "
                            f"with {len(args)} positional arguments")
        if not isinstance(axes, tuple):
            axes = (axes,) * len(args)
        try:
            flat_axes = tree_util.broadcast_prefix(axes, args)
        except ValueError as e:
            raise TypeError(f"vmap: in_axes {in_axes!r} is not a prefix of the arguments' "
                            f"structure: {e}") from None
        paths, leaves, treedef = tree_util.paths_leaves_treedef(args)
        vals, dims = [], []
        sizes = []
        for path, leaf, ax in zip(paths, leaves, flat_axes):
            x = operand(leaf, "vmap")
            if ax is None:
                vals.append(x)
                dims.append(None)
                continue
            if not isinstance(ax, int):
                raise TypeError(f"vmap: in_axes entries must be int or None, got {ax!r}")
            if x.ndim == 0:
                raise ValueError(f"vmap: argument {_describe(path)} is a scalar (shape ()) but "
                                 f"in_axes maps axis {ax}; use None for unmapped arguments")
            if not -x.ndim <= ax < x.ndim:
                raise ValueError(f"vmap: in_axes {ax} is out of range for argument "
                                 f"{_describe(path)} of shape {tuple(x.shape)}")
            ax %= x.ndim
            vals.append(x)
            dims.append(ax)
            sizes.append((path, tuple(x.shape), ax, x.shape[ax]))
        size = axis_size
        distinct = {s[3] for s in sizes}
        if axis_size is not None:
            distinct.add(axis_size)
        if len(distinct) > 1:
            lines = "; ".join(f"argument {_describe(p)} of shape {sh} has size {n} along axis {a}"
                              for p, sh, a, n in sizes)
            extra = f" (axis_size={axis_size})" if axis_size is not None else ""
            raise ValueError(f"vmap got inconsistent sizes for the mapped axis{extra}: {lines}")
        if size is None:
            if not sizes:
                raise ValueError("vmap: no argument is mapped (all in_axes are None); pass "
                                 "axis_size= to set the batch size")
            size = sizes[0][3]
        if _eager.applies(fun, [v for v, d in zip(vals, dims) if d is not None]):
            done, result = _eager_vmap(fun, treedef, vals, dims, size, axis_name, out_axes)
            if done:
                return result
        with new_trace(BatchTrace, size, axis_name) as trace, _bind_name(axis_name, size):
            tracers = [v if d is None else BatchTracer(trace, v, d) for v, d in zip(vals, dims)]
            out = fun(*tree_util.unflatten(treedef, tracers))
            o_leaves, ot = tree_util.flatten(out)
            result = _batched_outputs(trace, o_leaves, _flat_out_axes(out_axes, out), size)
        return tree_util.unflatten(ot, result)

    return vmapped


def _flat_out_axes(out_axes, out):
    try:
        return tree_util.broadcast_prefix(out_axes, out)
    except ValueError as e:
        raise TypeError(f"vmap: out_axes {out_axes!r} is not a prefix of the output "
                        f"structure: {e}") from None


def _batched_outputs(trace, outs, flat_out_axes, size):
    """Each output of a batched function with its batch axis moved to its out axis."""
    result = []
    for o, oa in zip(outs, flat_out_axes):
        v, d = trace.lift(operand(o, "vmap"))
        result.append(_to_out_axis(v, d, oa, size))
    return result


def _eager_vmap(fun, treedef, vals, dims, size, axis_name, out_axes):
    """vmap that records ``fun`` on one example and reuses the batched program
    (src/transforms/eager_cache.py): (True, result), or (False, None) when the call must be
    re-traced."""
    mapped = [i for i, d in enumerate(dims) if d is not None]
    avals = [_example_aval(vals[i].aval, dims[i]) for i in mapped]

    def body(*tracers):
        full = list(vals)
        for i, t in zip(mapped, tracers):
            full[i] = t
        with _bind_name(axis_name, size):
            out = fun(*tree_util.unflatten(treedef, full))
        o_leaves, ot = tree_util.flatten(out)
        return ([operand(o, "vmap") for o in o_leaves],
                (ot, tuple(_flat_out_axes(out_axes, out))))

    rec = _eager.record_call(fun, body, avals, [None] * len(mapped))
    if rec is None:
        return False, None
    ot, flat_axes = rec.extra
    m_dims = [dims[i] for i in mapped]
    n = len(mapped)

    def batched(consts, live, xs):
        with new_trace(BatchTrace, size, axis_name) as trace, _bind_name(axis_name, size):
            tracers = [BatchTracer(trace, x, d) for x, d in zip(xs, m_dims)]
            outs = rec.function(consts, live)(*tracers)
            return _batched_outputs(trace, outs, flat_axes, size)

    def derive():
        avals_in = [vals[i].aval for i in mapped] + [c.aval for c in rec.prog.consts]
        prog = _eager.derive_program(lambda *xs: batched(list(xs[n:]), False, xs[:n]), avals_in)
        return _eager.Derived([prog], None)

    key = ("vmap", tuple(m_dims), size, axis_name, flat_axes, ot)
    entry = _eager.lookup(fun, key, rec, derive)
    xs = [vals[i] for i in mapped]
    if entry is None:
        result = batched(rec.prog.consts, True, xs)
    else:
        result = _eager.run(entry, 0, xs + list(rec.prog.consts))
    return True, tree_util.unflatten(ot, result)


def _example_aval(aval, d):
    return aval.update(shape=aval.shape[:d] + aval.shape[d + 1:])
