"""Eager operations on sharded arrays: each runs piece by piece on the devices of its mesh.

When an operand of a primitive is a sharded array, the eval trace hands the call here
(``EvalTrace.register_dispatch``). The one-equation Program ``prim(*operands)`` is partitioned
exactly as compiled programs are (src/collectives/partition.py: propagation by the primitive's
strategies, redistribution by the cost model) and the per-device Programs run on their devices
concurrently; the result is a sharded array. Partitionings are cached per (primitive, params,
operand avals, layouts). Ordinary Arrays among the operands count as replicated; sharded arrays
on different meshes are an error.

A result keeps a pending reduction as DTensor does (``sum`` over a split dim is
``Partial("sum")``); reading it (``np.asarray``, ``full_array()``, ``item()``) applies it.
"""
from __future__ import annotations

from .mesh import different_meshes_error
from ..core.ir import Equation, Program, Var
from ..core.trace import EvalTrace
from .partition import partition, replicated
from .sharded_array import ShardedArray

_CACHE: dict = {}
_CACHE_MAX = 4096


def _hashable_params(params):
    try:
        key = tuple(sorted(params.items()))
        hash(key)
        return key
    except TypeError:
        return None


def dispatch(prim, args, params):
    """Runs ``prim`` on concrete operands at least one of which is sharded."""
    meshes = {a.mesh for a in args if isinstance(a, ShardedArray)}
    if len(meshes) > 1:
        raise different_meshes_error(
            prim.name, [(f"operand {i} {a.aval.str_short()}", a.mesh)
                        for i, a in enumerate(args) if isinstance(a, ShardedArray)],
            "redistribute them onto one mesh first")
    mesh = meshes.pop()
    shardings = tuple(a.sharding if isinstance(a, ShardedArray) else replicated(mesh)
                      for a in args)
    avals = tuple(a.aval for a in args)
    pkey = _hashable_params(params)
    key = (prim, pkey, avals, shardings) if pkey is not None else None
    part = _CACHE.get(key) if key is not None else None
    if part is None:
        invars = [Var(a) for a in avals]
        out = prim.rule("abstract_eval")(*avals, **params)
        outs = out if prim.multiple_results else [out]
        outvars = [Var(a) for a in outs]
        prog = Program([], [], invars, [Equation(prim, invars, outvars, params)], outvars)
        part = partition(prog, shardings, keep_partial=True)
        if key is not None:
            if len(_CACHE) >= _CACHE_MAX:
                _CACHE.clear()
            _CACHE[key] = part
    results = part.run(list(args))
    return results if prim.multiple_results else results[0]


EvalTrace.register_dispatch(ShardedArray, dispatch)
