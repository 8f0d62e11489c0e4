"""Layout hints: the layouts that later code wants of a program's values.

Propagation (src/collectives/partition.py) walks the program forward and picks each equation's
strategy by what it costs to redistribute the operands; on its own it cannot see that a result
is about to be constrained. Hints tell it: a value consumed by ``with_sharding_constraint``, or
returned with an ``out_sharding``, is wanted in that layout, and the wish flows backwards through
the equations that produce it (per mesh axis, the first strategy of the producer whose results
have the wanted placements says what its operands should be). Propagation then counts, besides
the operands' redistribution, the cost of taking a result to its wanted layout, so a random
draw or an ``iota`` that ends in a split output is computed split (each device only its own
piece) instead of whole and sliced afterwards. Hints only break ties of cost; they never force
a layout.
"""
from __future__ import annotations

from ..core.ir import Literal
from ..core.placements import REPLICATE
from .sharding import from_placements


def layout_hints(prog, mesh, out_shardings=None) -> dict:
    """Var -> NamedSharding wanted for it by the constraints and ``out_shardings`` downstream."""
    from .constraint import sharding_constraint_p
    hints = {}
    for x, s in zip(prog.outvars, out_shardings or ()):
        if s is not None and not isinstance(x, Literal) and s.mesh == mesh:
            hints.setdefault(x, s)
    for eqn in reversed(prog.eqns):
        prim = eqn.primitive
        if prim is sharding_constraint_p:
            x, s = eqn.invars[0], eqn.params["sharding"]
            if not isinstance(x, Literal) and getattr(s, "mesh", None) == mesh:
                hints.setdefault(x, s)
        elif prim.sharding is not None and any(v in hints for v in eqn.outvars):
            _hint_operands(eqn, mesh, hints)
    return hints


def _hint_operands(eqn, mesh, hints):
    in_avals = [x.aval for x in eqn.invars]
    out_avals = [v.aval for v in eqn.outvars]
    cands = [(tuple(o), tuple(i)) for o, i in
             eqn.primitive.sharding(in_avals, out_avals, **eqn.params)]
    per_axis = []
    for a in range(mesh.ndim):
        want = [hints[v].placements[a] if v in hints else None for v in eqn.outvars]
        match = None
        if not all(w is None or w.is_replicate() for w in want):
            match = next((ins for outs, ins in cands
                          if all(w is None or w == o for w, o in zip(want, outs))), None)
        per_axis.append(match or (REPLICATE,) * len(in_avals))
    for i, x in enumerate(eqn.invars):
        if isinstance(x, Literal) or x in hints:
            continue
        pl = [p if p.is_shard() else REPLICATE for p in (ins[i] for ins in per_axis)]
        if all(p.is_replicate() for p in pl):
            continue
        try:
            hints[x] = from_placements(mesh, pl)
        except ValueError:   # one dim wanted split by two axes in an order it cannot be
            pass
