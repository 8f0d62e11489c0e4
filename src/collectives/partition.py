"""Partitioning: a global Program and the layouts of its inputs -> per-device Programs.

``partition(prog, in_shardings, out_shardings=None)``:

1. *Propagation.* Walking the equations in order, each primitive's single-mesh-axis strategies
   (its ``sharding`` rule, src/arrays/ops/rules_sharding.py) are expanded to the n-d mesh: for
   every mesh axis the strategy is chosen whose redistribution of the current operand layouts
   moves the fewest bytes (src/collectives/redistribute.py's cost model); running replicated is
   always a candidate. A choice must fit every device's local shapes (checked by abstract
   evaluation of the localized equation), else the equation runs replicated. A primitive with no
   strategy runs replicated (logged once naming it). ``with_sharding_constraint`` pins a layout;
   a ``shard_map`` equation takes its in / out specs and is inlined.
2. *Localization.* For each class of devices with the same local shapes (one class when every
   split is even), the equations are re-staged on local avals: redistribution steps (collectives,
   local slices) before operands whose layout changes, then the equation with params for local
   shapes (``prim.meta["shard_params"]``). Outputs end in ``out_shardings`` (default: the
   propagated layout with pending Partial reductions applied).

The result runs on every device of the mesh at once (``Partitioned.run``); the per-device
Programs are ordinary Programs, so any backend compiles them (collectives are unfused equations
that call the runtime). ``STARLING_LOG_SHARDING=1`` logs every choice and its cost.
"""
from __future__ import annotations


import numpy as np

from . import log as sharding_log
from .log import logger
from ..arrays.array import wrap
from ..core.avals import ShapedArray
from ..core.ir import Literal, Program, eval_program, inline_custom_calls
from ..core.placements import REPLICATE
from ..core.trace import EVAL_TRACE, new_trace, set_current_trace
from ..transforms.stage import StagingTrace
from . import redistribute as RD
from .hints import layout_hints
from .sharding import NamedSharding, PartitionSpec, from_placements

_LOGGED_NO_RULE = set()
_CHANGE_PENALTY = 1e-3   # prefer keeping layouts among equally cheap strategies
# Each collective also costs a fixed latency, counted as this many bytes: one all_reduce beats a
# reduce_scatter followed by an all_gather of the same bytes.
_LATENCY_BYTES = 16384
# Work done on every device of an axis (an equation run replicated there) counts as bytes too:
# moving one byte (in-process copy ~10 GB/s, MPI less) costs about what this many flops do on a
# core, so gathering a product's operands to compute it whole on each device loses to computing
# it split and reducing the result (data-parallel weight gradients).
_FLOPS_PER_BYTE = 8.0


def replicated(mesh):
    """The fully replicated ``NamedSharding`` on ``mesh`` (an empty ``PartitionSpec``)."""
    return NamedSharding(mesh, PartitionSpec())


class _Choice:
    __slots__ = ("eqn", "ins", "outs", "note")

    def __init__(self, eqn, ins, outs, note=""):
        self.eqn, self.ins, self.outs, self.note = eqn, ins, outs, note


# ---- phase 1: propagation ----------------------------------------------------------------------

def _placement_on(sharding, axis, ndim):
    return sharding.placements[sharding.mesh.axis_index_of(axis)]


def _transition_cost(p_from, p_to, nbytes, k):
    if p_from == p_to:
        return 0.0
    lat = _LATENCY_BYTES
    if p_to.is_replicate():
        if p_from.is_shard():
            return (k - 1) * nbytes + lat
        return 2.0 * nbytes * (k - 1) / k + lat              # Partial -> Replicate
    if p_to.is_shard():
        if p_from.is_replicate():
            return _CHANGE_PENALTY
        return nbytes * (k - 1) / k + lat                    # Shard(i)->Shard(j), Partial->Shard
    if p_from.is_replicate():                                 # -> Partial
        return _CHANGE_PENALTY
    return (k - 1) * nbytes + 2.0 * nbytes + 2 * lat          # Shard/other Partial -> Partial


def _local_bytes(aval, sharding, device):
    return int(np.prod(sharding.local_shape(aval.shape, device), dtype=np.int64)) * \
        aval.dtype.itemsize


def _work_bytes(eqn, in_avals, out_avals):
    """The equation's arithmetic, in byte-equivalents (``_FLOPS_PER_BYTE``): a contraction's
    2 * outputs * contracted size, else one operation per output element."""
    out = sum(int(np.prod(a.shape, dtype=np.int64)) for a in out_avals)
    if eqn.primitive.name == "dot_general" and len(in_avals) == 2:
        (lc, _), _ = eqn.params["dimension_numbers"]
        out *= 2 * int(np.prod([in_avals[0].shape[d] for d in lc], dtype=np.int64))
    return out / _FLOPS_PER_BYTE


def _candidates(eqn, in_avals, out_avals):
    prim = eqn.primitive
    rule = prim.sharding
    reps = ((REPLICATE,) * len(out_avals), (REPLICATE,) * len(in_avals))
    if rule is None:
        if prim.name not in _LOGGED_NO_RULE:
            _LOGGED_NO_RULE.add(prim.name)
            sharding_log.enabled()
            logger.info("primitive %s has no sharding strategy; its operands are replicated",
                        prim.name)
        return [reps]
    combos = [tuple(map(tuple, c)) for c in rule(in_avals, out_avals, **eqn.params)]
    return combos + [reps]


def _choose(eqn, cur, mesh, hints=()):
    """(input layouts, output layouts) for ``eqn``; ``cur[i]`` lists the layouts operand ``i``
    already exists in (its own, and those earlier consumers redistributed it to); ``hints[j]``
    is the layout result ``j`` will be wanted in (or None): a strategy producing another one pays
    for that redistribution too."""
    in_avals = [x.aval for x in eqn.invars]
    out_avals = [v.aval for v in eqn.outvars]
    cands = _candidates(eqn, in_avals, out_avals)
    dev0 = mesh.flat_devices[0]

    def cost_on(axis, k, i, want):
        a = in_avals[i]
        return min(_transition_cost(_placement_on(s, axis, len(a.shape)), want,
                                    _local_bytes(a, s, dev0), k) for s in cur[i])

    def later(axis, k, j, have):
        h = hints[j] if j < len(hints) else None
        if h is None:
            return 0.0
        a = out_avals[j]
        return _transition_cost(have, _placement_on(h, axis, len(a.shape)),
                                _local_bytes(a, h, dev0), k)

    work = _work_bytes(eqn, in_avals, out_avals)

    def repeated_work(axis, k, c):
        # a candidate replicated on this axis (no operand or result split or pending there)
        # while an operand is split there does the whole work on each of its k devices
        outs, ins = cands[c]
        if all(p.is_replicate() for p in outs + ins) and any(
                not _placement_on(cur[i][0], axis, len(a.shape)).is_replicate()
                for i, a in enumerate(in_avals)):
            return work * (k - 1) / k
        return 0.0

    def new_split(axis, outs):
        # results split (or pending) on an axis where no operand is: only when wanted
        if all(p.is_replicate() for p in outs) or any(
                not _placement_on(cur[i][0], axis, len(a.shape)).is_replicate()
                for i, a in enumerate(in_avals)):
            return 0.0
        return _CHANGE_PENALTY / 2

    per_axis = []
    for axis in mesh.axis_names:
        k = mesh.shape[axis]
        ranked = sorted(range(len(cands)), key=lambda c: (
            sum(cost_on(axis, k, i, w) for i, w in enumerate(cands[c][1]))
            + sum(later(axis, k, j, o) for j, o in enumerate(cands[c][0]))
            + new_split(axis, cands[c][0]) + repeated_work(axis, k, c), c))
        per_axis.append([cands[c] for c in ranked])
    # the best per axis; if it does not fit the local shapes, the next best axis by axis, then
    # everything replicated
    pick = [ranked[0] for ranked in per_axis]
    for attempt in range(3):
        ins, outs = _assemble(mesh, pick, in_avals, out_avals)
        if ins is not None and _fits(eqn, ins, outs, mesh):
            return ins, outs
        if attempt == 0:
            pick = [next((c for c in ranked if _simple(c)), ranked[-1]) for ranked in per_axis]
        else:
            pick = [cands[-1]] * len(per_axis)
    reps = [replicated(mesh)] * len(in_avals), [replicated(mesh)] * len(out_avals)
    return reps


def _simple(c):
    return all(not p.is_partial() for p in c[0] + c[1])


def _assemble(mesh, picks, in_avals, out_avals):
    try:
        ins = [from_placements(mesh, [p[1][i] for p in picks]) for i in range(len(in_avals))]
        outs = [from_placements(mesh, [p[0][j] for p in picks]) for j in range(len(out_avals))]
    except ValueError:   # one dim split twice by strategies of different axes in a bad way
        return None, None
    for s, a in zip(ins + outs, in_avals + out_avals):
        if len(s.spec) > len(a.shape):
            return None, None
    return ins, outs


def _device_classes(mesh, shardings_and_avals):
    """One representative device per distinct tuple of local shapes."""
    seen = {}
    for dev in mesh.flat_devices:
        key = tuple(s.local_shape(a.shape, dev) for s, a in shardings_and_avals)
        seen.setdefault(key, dev)
    return list(seen.values())


def _fits(eqn, ins, outs, mesh):
    prim = eqn.primitive
    avals = [x.aval for x in eqn.invars]
    oavals = [v.aval for v in eqn.outvars]
    if all(s.is_fully_replicated for s in ins + outs):
        return True
    for dev in _device_classes(mesh, list(zip(ins, avals)) + list(zip(outs, oavals))):
        local_in = [ShapedArray(s.local_shape(a.shape, dev), a.dtype, a.weak_type)
                    for s, a in zip(ins, avals)]
        want = [s.local_shape(a.shape, dev) for s, a in zip(outs, oavals)]
        try:
            params = _local_params(prim, eqn.params, local_in, want)
            got = prim.abstract_eval(*local_in, **params)
        except (ValueError, TypeError, IndexError):
            return False
        got = got if prim.multiple_results else [got]
        if [tuple(g.shape) for g in got] != [tuple(w) for w in want]:
            return False
    return True


def _local_params(prim, params, local_in, out_shapes):
    fn = prim.meta.get("shard_params")
    return fn(params, local_in, out_shapes) if fn is not None else params


def _hints(prog, out_shardings):
    """Var -> the layout it will be wanted in: the requested output layouts, carried backwards
    through same-shape elementwise chains (an optimizer update ends in the parameters'
    layout, so its operands should be computed there)."""
    hints = {}
    for x, s in zip(prog.outvars, out_shardings or ()):
        if s is not None and not isinstance(x, Literal):
            hints.setdefault(x, s)
    for eqn in reversed(prog.eqns):
        if eqn.primitive.family not in _HINT_FAMILIES or len(eqn.outvars) != 1:
            continue
        h = hints.get(eqn.outvars[0])
        if h is None:
            continue
        shape = eqn.outvars[0].aval.shape
        for x in eqn.invars:
            if not isinstance(x, Literal) and x.aval.shape == shape:
                hints.setdefault(x, h)
    return hints


_HINT_FAMILIES = frozenset(("elementwise", "convert", "autodiff"))


def _resolved(s):
    """``s`` with pending Partial reductions applied (the default layout of a result)."""
    return s.replace(partial={}) if s.partial else s


def propagate(prog, in_shardings, out_shardings=None, keep_partial=False):
    """Phase 1: the layout of every Var and each equation's required operand layouts.

    Returns ``(layout: dict Var -> NamedSharding, choices: list of _Choice, outs: list)``.
    """
    from .shard_map import shard_map_p
    from .constraint import sharding_constraint_p
    mesh = in_shardings[0].mesh if in_shardings else out_shardings[0].mesh
    rep = replicated(mesh)
    layout = {}
    for v in prog.constvars:
        layout[v] = rep
    for v, s in zip(prog.invars, in_shardings):
        layout[v] = s

    def of(x):
        return rep if isinstance(x, Literal) else layout[x]

    avail = {}   # Var -> layouts it exists in (its own first), reused by later consumers
    hints = _hints(prog, out_shardings)
    for v, s in layout_hints(prog, mesh, out_shardings).items():
        hints.setdefault(v, s)   # constraints, and through every primitive's strategies

    def available(x):
        return [rep] if isinstance(x, Literal) else avail.setdefault(x, [layout[x]])

    choices = []
    for eqn in prog.eqns:
        cur = [of(x) for x in eqn.invars]
        prim = eqn.primitive
        if prim is shard_map_p:
            ins, outs, note = list(eqn.params["in_shardings"]), \
                list(eqn.params["out_shardings"]), "shard_map"
        elif prim is sharding_constraint_p:
            s = eqn.params["sharding"]
            ins, outs, note = [s], [s], "constraint"
        elif prim.meta.get("collective"):
            raise ValueError(f"{prim.name}: a collective outside shard_map in a program being "
                             "partitioned; collectives belong inside shard_map bodies")
        else:
            ins, outs = _choose(eqn, [available(x) for x in eqn.invars], mesh,
                                [hints.get(v) for v in eqn.outvars])
            note = ""
        if sharding_log.enabled():   # before the chosen layouts join what is available
            cost = sum(min(RD.cost(x.aval, c, w) for c in available(x))
                       for x, w in zip(eqn.invars, ins))
            logger.info("sharding %s: %s -> %s (moves %.0f bytes/device)%s", prim.name,
                        [list(s.placements) for s in cur], [list(s.placements) for s in outs],
                        cost, f" [{note}]" if note else "")
        for x, s in zip(eqn.invars, ins):
            if not isinstance(x, Literal) and s not in available(x):
                available(x).append(s)
        choices.append(_Choice(eqn, ins, outs, note))
        for v, s in zip(eqn.outvars, outs):
            layout[v] = s
    final = []
    for i, x in enumerate(prog.outvars):
        want = out_shardings[i] if out_shardings and out_shardings[i] is not None else None
        if want is None:
            want = of(x) if keep_partial else _resolved(of(x))
        final.append(want)
    return layout, choices, final


# ---- phase 2: per-device programs ----------------------------------------------------------------

def _localize(prog, layout, choices, in_shardings, final, device):
    """The Program device ``device`` (and every device with its local shapes) runs."""
    from .shard_map import shard_map_p
    from .constraint import sharding_constraint_p
    mesh = in_shardings[0].mesh if in_shardings else final[0].mesh
    rep = replicated(mesh)

    def local(aval, s):
        return ShapedArray(s.local_shape(aval.shape, device), aval.dtype, aval.weak_type)

    with new_trace(StagingTrace) as trace:
        c_tr = [trace.new_arg(v.aval) for v in prog.constvars]
        a_tr = [trace.new_arg(local(v.aval, s)) for v, s in zip(prog.invars, in_shardings)]
        env = dict(zip(prog.constvars, c_tr))
        env.update(zip(prog.invars, a_tr))

        copies = {}   # Var -> {layout: local value}: each redistribution is done once

        def read(x):
            if isinstance(x, Literal):
                return wrap(x.val, x.aval.weak_type), rep
            return env[x], layout[x]

        def laid_out(x, want):
            val, have = read(x)
            if isinstance(x, Literal):
                return RD.apply_local(val, x.aval.shape, have, want, device)
            known = copies.setdefault(x, {have: val})
            if want not in known:
                src = min(known, key=lambda s: RD.cost(x.aval, s, want))
                known[want] = RD.apply_local(known[src], x.aval.shape, src, want, device)
            return known[want]

        for ch in choices:
            eqn = ch.eqn
            xs = [laid_out(x, want) for x, want in zip(eqn.invars, ch.ins)]
            prim = eqn.primitive
            if prim is shard_map_p:
                outs = eval_program(eqn.params["body"], eqn.params["body"].consts, *xs)
            elif prim is sharding_constraint_p:
                outs = xs
            else:
                local_in = [x.aval for x in xs]
                want = [s.local_shape(v.aval.shape, device) for s, v in zip(ch.outs,
                                                                              eqn.outvars)]
                params = _local_params(prim, eqn.params, local_in, want)
                hook = prim.meta.get("shard_local")
                if hook is not None and not all(s.is_fully_replicated for s in ch.outs):
                    # the piece depends on where it lies: the hook gets its global start
                    starts = [RD.local_starts(v.aval.shape, s)
                              for s, v in zip(ch.outs, eqn.outvars)]
                    outs = hook(xs, starts, eqn.params, params)
                else:
                    outs = prim.bind(*xs, **params)
                outs = outs if prim.multiple_results else [outs]
            for v, o in zip(eqn.outvars, outs):
                env[v] = o
        results = [laid_out(x, want) for x, want in zip(prog.outvars, final)]
        from ..arrays.convert import operand
        results = [operand(r, "partition") for r in results]
        local_prog = trace.to_program(c_tr + a_tr, results)
    return local_prog


class Partitioned:
    """A partitioned program: ``programs`` maps each device to its per-device Program (devices
    with the same local shapes share one), ``in_shardings`` / ``out_shardings`` the layouts of
    the inputs and outputs, ``out_avals`` the outputs' global avals, ``consts`` the global
    constants (replicated on every device)."""

    def __init__(self, mesh, programs, in_shardings, out_shardings, out_avals, consts):
        self.mesh = mesh
        self.programs = programs
        self.in_shardings = list(in_shardings)
        self.out_shardings = list(out_shardings)
        self.out_avals = list(out_avals)
        self.consts = list(consts)

    @property
    def distinct_programs(self) -> list:
        seen, out = set(), []
        for p in self.programs.values():
            if id(p) not in seen:
                seen.add(id(p))
                out.append(p)
        return out

    def run(self, args, executables=None):
        """Runs on global arrays / sharded arrays; returns sharded arrays. ``executables`` maps
        id(per-device Program) -> callable(consts, args) -> outputs (default: interpret)."""
        from .shard_map import execute
        consts = [np.asarray(c._buf) for c in self.consts]
        progs = self.programs
        weak = [getattr(a, "weak_type", False) for a in args]

        def run_device(ctx, pieces):
            prog = progs[ctx.device]
            ins = [wrap(c) for c in consts] + [wrap(p, w) for p, w in zip(pieces, weak)]
            if executables is not None:
                outs = executables[id(prog)](prog.consts, ins)
            else:
                with set_current_trace(EVAL_TRACE):
                    outs = eval_program(prog, prog.consts, *ins)
            return [np.asarray(o._buf) for o in outs]

        any_prog = next(iter(progs.values()))
        return execute(args, any_prog, self.in_shardings, self.out_shardings, run=run_device,
                       out_avals=self.out_avals)


def partition(prog: Program, in_shardings, out_shardings=None, keep_partial=False) -> Partitioned:
    """Partitions ``prog`` for inputs laid out by ``in_shardings`` (one NamedSharding per invar;
    constvars are replicated). ``out_shardings``: optional NamedSharding (or None) per output;
    outputs without one keep their propagated layout, with pending Partial reductions applied
    unless ``keep_partial`` (eager operations keep them, as DTensor does).

    Raises:
        ValueError: shardings on different meshes, or that do not fit the inputs' shapes.
    """
    in_shardings = list(in_shardings)
    # no derivative is taken after partitioning: staged custom calls run their function, whose
    # primitives have strategies
    prog = inline_custom_calls(prog)
    meshes = {s.mesh for s in in_shardings} | {s.mesh for s in (out_shardings or ()) if s}
    if len(meshes) != 1:
        raise ValueError(f"partition: the shardings use {len(meshes)} different meshes; every "
                         "sharded argument and out_sharding must be on one mesh")
    mesh = meshes.pop()
    for v, s in zip(prog.invars, in_shardings):
        s.check_shape(v.aval.shape, "compile (in_shardings / sharded argument)")
    for i, (v, s) in enumerate(zip(prog.outvars, out_shardings or ())):
        if s is not None:
            s.check_shape(v.aval.shape, f"compile (out_shardings of output {i})")
    layout, choices, final = propagate(prog, in_shardings, out_shardings, keep_partial)
    tracked = [(layout[v], v.aval) for v in layout] + \
        [(s, x.aval) for s, x in zip(final, prog.outvars)]
    # and every layout a redistribution passes through: devices with equal local shapes of the
    # values can differ in between (a dim split by two axes is gathered minor axis first)
    rep = replicated(mesh)
    moves = [(x, w) for ch in choices for x, w in zip(ch.eqn.invars, ch.ins)]
    moves += list(zip(prog.outvars, final))
    # a redistribution may start from any layout the value reaches (its own, or one an earlier
    # consumer asked for: _localize reuses the cheapest), so every such path counts
    reached = {}
    for x, want in moves:
        if not isinstance(x, Literal):
            reached.setdefault(x, {layout[x]}).add(want)
    for x, want in moves:
        sources = [rep] if isinstance(x, Literal) else reached[x]
        for have in sources:
            tracked += [(st.after, x.aval) for st in RD.plan(len(x.aval.shape), have, want)]
    programs, built = {}, {}
    for dev in mesh.flat_devices:
        key = tuple(s.local_shape(a.shape, dev) for s, a in tracked)
        if key not in built:
            built[key] = _localize(prog, layout, choices, in_shardings, final, dev)
        programs[dev] = built[key]
    out_avals = [x.aval for x in prog.outvars]
    return Partitioned(mesh, programs, in_shardings, final, out_avals, prog.consts)

