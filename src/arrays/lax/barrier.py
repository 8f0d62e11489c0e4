"""``starling.lax.optimization_barrier``: an identity that the compiler passes cannot see
through.

The ``optimization_barrier`` primitive returns its operands unchanged. Because no pass knows
its semantics, values computed before it are not fused, moved, rematerialised or
common-subexpression-merged with uses after it; e.g. it keeps a recomputation inside a
checkpointed region from being merged with the original. Derivatives: the primal outputs go
through a barrier, tangents pass through (it is the identity); batching keeps each batch axis.
"""
from __future__ import annotations

import numpy as np

from ... import tree
from ...core.primitive import Primitive
from ..convert import operand as _operand

__all__ = ["optimization_barrier"]

optimization_barrier_p = Primitive("optimization_barrier", multiple_results=True,
                                   family="autodiff")
optimization_barrier_p.impl = lambda *xs: [np.asarray(x) for x in xs]
optimization_barrier_p.abstract_eval = lambda *avals: list(avals)
optimization_barrier_p.weak_type = lambda *w: list(w)


def _jvp(primals, tangents):
    return optimization_barrier_p.bind(*primals), list(tangents)


def _batch(args, dims):
    return optimization_barrier_p.bind(*args), list(dims)


optimization_barrier_p.jvp = _jvp
optimization_barrier_p.batch = _batch


def optimization_barrier(operand):
    """Returns ``operand`` (any pytree of arrays) unchanged, as a barrier to optimisation.

    Args:
        operand: pytree of arrays (array-likes are converted).
    Returns:
        A pytree of the same structure, shapes, dtypes and values.
    """
    leaves, treedef = tree.flatten(operand)
    if not leaves:
        return operand
    leaves = [_operand(x, "lax.optimization_barrier") for x in leaves]
    return tree.unflatten(treedef, optimization_barrier_p.bind(*leaves))
