"""``shard_map``: explicit SPMD. ``f`` runs once per device on that device's blocks.

``shard_map(f, mesh, in_specs, out_specs)(*args)``: each argument is split by its PartitionSpec
(``in_specs``, a pytree prefix of the arguments), ``f`` sees the local blocks and may call
collectives over the mesh's axes (``psum``, ``all_gather``, ``ppermute``...), and each output's
blocks are put together by ``out_specs``. A mesh axis that an out_spec does not name claims the
output is the same on every device along it; with ``check_rep=True`` (default) that claim must
be provable (see src/collectives/vma.py).

The body is staged once per call into a Program held by the primitive ``shard_map`` (family
``collectives``), whose rules make it compose with every transformation: jvp (shard_map of the
JVP'd body), partial evaluation (known and unknown shard_maps with per-device residuals),
transpose (shard_map of the transposed body), vmap (shard_map of the batched body), compile
(the partitioner inlines the body into the per-device program). Eagerly the body runs on every
device of the mesh at once (src/collectives/runtime/).
"""
from __future__ import annotations

import functools
import math

import numpy as np

from .. import tree as tree_util
from ..arrays.array import wrap
from ..arrays.convert import operand
from ..arrays.ops import rules as R
from ..core import dtypes
from ..core.ad_util import Zero, is_undefined, tangent_aval
from ..core.avals import ShapedArray
from ..core.axis_env import axis_names_in_scope, bound_axes
from ..core.ir import eval_program
from ..core.primitive import Primitive
from ..core.trace import EVAL_TRACE, set_current_trace
from ..transforms.control import programs as P
from . import vma as _vma
from .mesh import Mesh, current_mesh
from .sharding import NamedSharding, PartitionSpec

shard_map_p = Primitive("shard_map", multiple_results=True, family="collectives")


# ---- shapes ------------------------------------------------------------------------------------

def local_aval(aval, sharding, op="shard_map", what="argument"):
    """The per-device block aval of a global ``aval`` split by ``sharding`` (evenly).

    Raises:
        ValueError: a split dim is not divisible by its mesh axes' sizes.
    """
    shape = list(aval.shape)
    sharding.check_shape(shape, op)
    for d, axes in sharding.sharded_dims().items():
        k = math.prod(sharding.mesh.shape[a] for a in axes)
        if shape[d] % k:
            raise ValueError(f"{op}: {what} of shape {tuple(aval.shape)} has dim {d} of size "
                             f"{shape[d]}, not divisible by the {k} devices of mesh axes {axes} "
                             f"(spec {sharding.spec}); shard_map needs even blocks")
        shape[d] //= k
    return ShapedArray(tuple(shape), aval.dtype, aval.weak_type)


def global_aval(aval, sharding):
    """The global aval of a per-device block ``aval`` laid out by ``sharding``: each sharded dim
    multiplied by the number of devices on its mesh axes (the inverse of ``local_aval``)."""
    shape = list(aval.shape)
    for d, axes in sharding.sharded_dims().items():
        shape[d] *= math.prod(sharding.mesh.shape[a] for a in axes)
    return ShapedArray(tuple(shape), aval.dtype, aval.weak_type)


# ---- execution ---------------------------------------------------------------------------------

def execute(args, body, in_shardings, out_shardings, consts=(), run=None,
            out_avals=None):
    """Runs the per-device Program ``body`` on every device of the mesh (global Arrays or sharded
    arrays in, sharded arrays out). ``run(ctx, pieces) -> out pieces`` overrides how a device
    runs the body (compiled executables); default: interpret it. ``out_avals``: the outputs'
    global avals when pieces are uneven (partitioned programs)."""
    from .redistribute import as_layout
    from .runtime.inprocess import run_spmd
    from .sharded_array import make_sharded
    mesh = in_shardings[0].mesh if in_shardings else out_shardings[0].mesh
    laid = [as_layout(x, s) for x, s in zip(args, in_shardings)]
    pos = {d: i for i, d in enumerate(mesh.flat_devices)}
    weak = [x.weak_type for x in laid]

    def device(ctx):
        i = pos[ctx.device]
        pieces = [x._shards[i] for x in laid]
        if run is not None:
            return run(ctx, pieces)
        ins = [wrap(p, w) for p, w in zip(pieces, weak)]
        with set_current_trace(EVAL_TRACE):
            outs = eval_program(body, list(consts) or body.consts, *ins)
        return [np.asarray(o._buf) for o in outs]

    per_device = run_spmd(mesh, device)
    local = mesh.local_devices
    results = []
    for k, sh in enumerate(out_shardings):
        pieces = [None] * mesh.size
        for dev, outs in zip(local, per_device):
            pieces[pos[dev]] = outs[k]
        aval = out_avals[k] if out_avals is not None else global_aval(body.outvars[k].aval, sh)
        results.append(make_sharded(aval, sh, pieces))
    return results


def _impl(*bufs, body, mesh, in_shardings, out_shardings, check_rep, out_unproven):
    args = [wrap(b, False) for b in bufs]
    return execute(args, body, in_shardings, out_shardings)


def _abstract_eval(*avals, body, mesh, in_shardings, out_shardings, check_rep, out_unproven):
    return [global_aval(v.aval, s) for v, s in zip(body.outvars, out_shardings)]


def _weak(*w, body, **params):
    return [v.aval.weak_type for v in body.outvars]


def _bind(args, body, mesh, in_shardings, out_shardings, check_rep=False, out_unproven=None):
    if out_unproven is None:
        out_unproven = (frozenset(),) * len(out_shardings)
    return shard_map_p.bind(*args, body=body, mesh=mesh, in_shardings=tuple(in_shardings),
                            out_shardings=tuple(out_shardings), check_rep=check_rep,
                            out_unproven=tuple(out_unproven))


# ---- jvp ---------------------------------------------------------------------------------------

def _jvp(primals, tangents, *, body, mesh, in_shardings, out_shardings, check_rep,
         out_unproven):
    nonzero = [type(t) is not Zero for t in tangents]
    with bound_axes(mesh.shape):   # collectives' rules may ask the axes' sizes
        jb = P.jvp_program(body, nonzero)
    t_in = [t for t in tangents if type(t) is not Zero]
    t_sh = [s for s, nz in zip(in_shardings, nonzero) if nz]
    outs = _bind(list(primals) + t_in, jb, mesh, list(in_shardings) + t_sh,
                 list(out_shardings) * 2, check_rep, tuple(out_unproven) * 2)
    n = len(body.outvars)
    return outs[:n], outs[n:]


# ---- partial evaluation (linearize): known and unknown shard_maps ------------------------------

def _residual_sharding(mesh):
    return NamedSharding(mesh, PartitionSpec(tuple(mesh.axis_names)))


def _partial_eval(trace, args, params):
    body, mesh = params["body"], params["mesh"]
    in_sh, out_sh = params["in_shardings"], params["out_shardings"]
    unknowns = [trace.is_unknown(a) for a in args]
    with bound_axes(mesh.shape):
        known, unknown, out_u, nres = P.partial_eval_program(body, unknowns)
        # residuals are per-device values: each becomes a global array whose dim 0 is split
        # over every mesh axis (0-d residuals get a dim of size 1 first)
        n_known_out = len(known.outvars) - nres
        res_avals = [v.aval for v in known.outvars[n_known_out:]]
        known = _promote_residuals(known, n_known_out)
        unknown = _demote_residuals(unknown, res_avals)
    k_args = [a for a, u in zip(args, unknowns) if not u]
    k_in_sh = [s for s, u in zip(in_sh, unknowns) if not u]
    k_out_sh = [s for s, u in zip(out_sh, out_u) if not u] + [_residual_sharding(mesh)] * nres
    k_unproven = [m for m, u in zip(params["out_unproven"], out_u) if not u] + \
        [frozenset()] * nres
    with set_current_trace(trace.parent):
        k_outs = _bind(k_args, known, mesh, k_in_sh, k_out_sh, False, k_unproven)
    residuals = k_outs[n_known_out:]
    u_args = [a for a, u in zip(args, unknowns) if u]
    u_in_sh = [_residual_sharding(mesh)] * nres + [s for s, u in zip(in_sh, unknowns) if u]
    u_out_sh = [s for s, u in zip(out_sh, out_u) if u]
    u_unproven = [m for m, u in zip(params["out_unproven"], out_u) if u]
    u_outs = trace.stage(shard_map_p, list(residuals) + u_args,
                         dict(body=unknown, mesh=mesh, in_shardings=tuple(u_in_sh),
                              out_shardings=tuple(u_out_sh), check_rep=False,
                              out_unproven=tuple(u_unproven)))
    ki, ui = iter(k_outs[:n_known_out]), iter(u_outs)
    return [next(ui) if u else next(ki) for u in out_u]


def _promote_residuals(prog, n_out):
    avals = [v.aval for v in prog.invars]

    def fun(*xs):
        outs = P.call(prog, list(xs))
        snp = R.snp()
        return list(outs[:n_out]) + [snp.reshape(r, (1,) + tuple(r.shape)) for r in outs[n_out:]]
    closed, consts = P.stage(fun, avals)
    return P._bind_consts(closed, consts) if consts else closed


def _demote_residuals(prog, res_avals):
    n = len(res_avals)
    avals = [ShapedArray((1,) + tuple(a.shape), a.dtype, a.weak_type) for a in res_avals] + \
        [v.aval for v in prog.invars[n:]]

    def fun(*xs):
        snp = R.snp()
        res = [snp.reshape(r, a.shape) for r, a in zip(xs[:n], res_avals)]
        return P.call(prog, res + list(xs[n:]))
    closed, consts = P.stage(fun, avals)
    return P._bind_consts(closed, consts) if consts else closed


# ---- transpose ---------------------------------------------------------------------------------

def _transpose(cts, *args, body, mesh, in_shardings, out_shardings, check_rep, out_unproven):
    lin = [is_undefined(a) for a in args]
    known_idx = [i for i, u in enumerate(lin) if not u]
    lin_idx = [i for i, u in enumerate(lin) if u]
    view = P.permute(body, known_idx + lin_idx)
    with bound_axes(mesh.shape):
        t_prog = P.transpose_program(view, len(known_idx))
    snp = R.snp()
    ct_vals = []
    for ct, v, unproven in zip(cts, body.outvars, out_unproven):
        ct = R.instantiate(ct) if type(ct) is not Zero else R.zeros_like_aval(
            tangent_aval(global_aval(v.aval, out_shardings[len(ct_vals)])))
        if unproven and dtypes.is_inexact(ct.dtype):
            # an output claimed replicated without proof: each device's copy takes an equal
            # share of the cotangent (the output is the mean of identical copies)
            ct = ct / snp.asarray(math.prod(mesh.shape[a] for a in unproven), dtype=ct.dtype)
        ct_vals.append(ct)
    known = [args[i] for i in known_idx]
    outs = _bind(known + ct_vals, t_prog, mesh,
                 [in_shardings[i] for i in known_idx] + list(out_shardings),
                 [in_shardings[i] for i in lin_idx], False, None)
    it = iter(outs)
    return [next(it) if u else None for u in lin]


# ---- vmap --------------------------------------------------------------------------------------

def _shift_spec(sharding, d):
    """``sharding`` with an unsplit dim inserted at position ``d``."""
    spec = list(sharding.spec) + [None] * max(0, d - len(sharding.spec))
    spec.insert(d, None)
    return sharding.replace(spec=PartitionSpec(*spec))


def _batch(args, dims, *, body, mesh, in_shardings, out_shardings, check_rep, out_unproven):
    size = R.batch_size(args, dims)
    moved = [a if d is None else R.move_axis(a, d, 0) for a, d in zip(args, dims)]
    in_dims = [None if d is None else 0 for d in dims]
    with bound_axes(mesh.shape):
        bb = P.batch_program(body, in_dims, size)
    in_sh = [s if d is None else _shift_spec(s, 0) for s, d in zip(in_shardings, dims)]
    out_sh = [_shift_spec(s, 0) for s in out_shardings]
    outs = _bind(moved, bb, mesh, in_sh, out_sh, check_rep, out_unproven)
    return outs, [0] * len(outs)


shard_map_p.impl = _impl
shard_map_p.abstract_eval = _abstract_eval
shard_map_p.weak_type = _weak
shard_map_p.jvp = _jvp
shard_map_p.transpose = _transpose
shard_map_p.batch = _batch
shard_map_p.is_linear = True
shard_map_p.meta["partial_eval"] = _partial_eval
shard_map_p.eager = lambda args, params: execute(
    list(args), params["body"], params["in_shardings"], params["out_shardings"])


# ---- the public function -------------------------------------------------------------------------

def _spec_for(spec, mesh, op, what):
    if spec is None:
        spec = PartitionSpec()
    if isinstance(spec, NamedSharding):
        return spec
    if not isinstance(spec, PartitionSpec):
        if isinstance(spec, tuple) and all(e is None or isinstance(e, (str, tuple)) for e in spec):
            spec = PartitionSpec(*spec)
        else:
            raise TypeError(f"{op}: {what} must be PartitionSpecs, got {spec!r}")
    try:
        return NamedSharding(mesh, spec)
    except ValueError as e:   # unknown / repeated mesh axes: say which argument
        raise ValueError(f"{op}: {what}: {e}") from None


def _prefix(specs, tree, op, what):
    # a PartitionSpec (a tuple subclass) is a pytree leaf, so one spec applies to a subtree
    try:
        return tree_util.broadcast_prefix(specs, tree)
    except (ValueError, TypeError) as e:
        raise ValueError(f"{op}: {what} {specs!r} is not a pytree prefix of the "
                         f"{'arguments' if what == 'in_specs' else 'outputs'}: {e}") from None


def shard_map(f=None, mesh: Mesh | None = None, in_specs=None, out_specs=None, check_rep=True,
              check_vma=None):
    """Maps ``f`` over the blocks of its arguments, one block per device of ``mesh`` (SPMD).

    Args:
        f: a function of local blocks; may call collectives over ``mesh``'s axis names. Left
            out (``shard_map(mesh=..., in_specs=..., out_specs=...)``), the result is a
            decorator taking ``f``, as ``jax.shard_map``.
        mesh: the Mesh (default: the current mesh of ``with mesh:``).
        in_specs: a PartitionSpec per argument (a pytree prefix of the positional arguments);
            ``P()`` replicates. Split dims must divide evenly.
        out_specs: a PartitionSpec per output (a pytree prefix of the outputs). A mesh axis not
            named claims the output is the same on every device along it.
        check_rep: prove those claims (vma typing); ``check_vma`` is JAX's newer name.
    Returns:
        A function of global arrays returning sharded arrays (shapes: each block's shape with
        split dims multiplied by their mesh axes' sizes).
    Raises:
        ValueError: no mesh, specs that do not fit the arguments / outputs (the message names the
            argument path, its shape and the mesh axes), uneven blocks, unknown mesh axes, or an
            out_spec claiming replication that check_rep disproves.
        NameError: a collective over an axis name the mesh does not have.
    """
    if f is None:
        return functools.partial(shard_map, mesh=mesh, in_specs=in_specs, out_specs=out_specs,
                                 check_rep=check_rep, check_vma=check_vma)
    if not callable(f):
        raise TypeError(f"shard_map: f must be a function, got {type(f).__name__}")
    if check_vma is not None:
        check_rep = bool(check_vma)
    op = f"shard_map({getattr(f, '__name__', 'f')})"

    @functools.wraps(f)
    def mapped(*args, **kwargs):
        if kwargs:
            raise TypeError(f"{op}: keyword arguments {sorted(kwargs)} are not supported: "
                            "in_specs describe the positional arguments; pass them "
                            "positionally (or bind them with functools.partial)")
        m = mesh or current_mesh()
        if m is None:
            raise ValueError(f"{op}: no mesh given and no current mesh (use `with mesh:`)")
        if not isinstance(m, Mesh):
            raise TypeError(f"{op}: mesh must be a starling Mesh, got {m!r}")
        if in_specs is None or out_specs is None:
            raise TypeError(f"{op}: in_specs and out_specs are required")
        nested = [a for a in m.axis_names if a in axis_names_in_scope()]
        if nested:
            raise ValueError(f"{op}: called inside a shard_map (or vmap) that already maps the "
                             f"mesh axes {nested}; a shard_map cannot map an axis again: call "
                             "the inner function on the block directly")
        paths, leaves, treedef = tree_util.paths_leaves_treedef(args)
        flat_specs = _prefix(in_specs, args, op, "in_specs")
        ops = [operand(x, op) for x in leaves]
        in_sh = [_spec_for(s, m, op, f"in_specs of argument {tree_util.path_str(p)} "
                           f"(shape {tuple(x.shape)})") for p, x, s in zip(paths, ops, flat_specs)]
        local = []
        for path, x, s in zip(paths, ops, in_sh):
            if s.mesh != m:
                raise ValueError(f"{op}: in_specs of argument {tree_util.path_str(path)} use "
                                 f"another mesh")
            local.append(local_aval(x.aval, s, op, f"argument {tree_util.path_str(path)}"))
        out_tree = []

        def flat_fun(*blocks):
            out = f(*tree_util.unflatten(treedef, list(blocks)))
            o_leaves, ot = tree_util.flatten(out)
            out_tree.append((ot, out))
            return [operand(o, op) for o in o_leaves]

        with bound_axes(m.shape):
            body, consts = P.stage(flat_fun, local)
        ot, out_struct = out_tree[0]
        flat_out = _prefix(out_specs, out_struct, op, "out_specs")
        o_paths = [tree_util.path_str(p) for p in tree_util.paths_leaves_treedef(out_struct)[0]]
        out_sh = [_spec_for(s, m, op, f"out_specs of output {p}")
                  for p, s in zip(o_paths, flat_out)]
        const_sh = [NamedSharding(m, PartitionSpec())] * len(consts)
        in_vmas = [frozenset()] * len(consts) + [
            frozenset(a for d in s.sharded_dims().values() for a in d) for s in in_sh]
        body, out_vmas = _vma.rewrite(body, in_vmas, m.axis_names)
        unproven = []
        for path, v, s, vm in zip(o_paths, body.outvars, out_sh, out_vmas):
            s.check_shape(v.aval.shape, f"{op}: out_specs of output {path}")
            named = frozenset(a for d in s.sharded_dims().values() for a in d)
            missing = vm - named
            if missing and check_rep:
                raise ValueError(
                    f"{op}: out_specs {s.spec} of output {path} (block {v.aval.str_short()}) "
                    f"claims it is the same on every device along mesh axes "
                    f"{sorted(missing)}, but it varies along them. Reduce over them first "
                    f"(psum / all_gather), name them in out_specs, or pass check_rep=False.")
            unproven.append(frozenset(missing))
        outs = _bind(list(consts) + ops, body, m, const_sh + in_sh, out_sh, check_rep, unproven)
        return tree_util.unflatten(ot, outs)

    return mapped

