"""``dim_value``: the value of a symbolic dimension as a 0-d array (dynamic shapes).

When a function is staged for many sizes at once (``compile(..., dynamic_shapes=...)``,
``export``), ``x.shape[0]`` is a symbolic dim (core/symbolic.py). Using it as a *value*
(``s / x.shape[0]`` in ``mean``, ``x * n``) stages one ``dim_value`` equation whose ``dim``
param is the expression; ``bind_shapes`` substitutes the concrete size at run time, so the same
Program serves every size. Like a Python int, the result is a weak-typed int64.

Not part of the user namespace: ``convert.operand`` and the ops that need a count call it.
"""
from __future__ import annotations

import numpy as np

from ...core import dtypes
from ...core.avals import ShapedArray, is_symbolic
from ...core.primitive import Primitive
from . import rules as R
from . import rules_sharding as RS

__all__: list = []

dim_value_p = Primitive("dim_value", family="shape")


def _abstract(*, dim):
    return ShapedArray((), dtypes.DEFAULT_INT, True)


def _impl(*, dim):
    if is_symbolic(dim):
        raise TypeError(f"dim_value: the symbolic dimension {dim} has no value outside a "
                        "function compiled or exported with dynamic shapes")
    return np.int64(dim)


def _batch(args, dims, **params):
    raise TypeError("dim_value: has no operands, so there is nothing to batch (internal error)")


dim_value_p.impl = _impl
dim_value_p.abstract_eval = _abstract
dim_value_p.weak_type = lambda **params: True
dim_value_p.batch = _batch
dim_value_p.sharding = RS.replicated_only   # nullary: a scalar every device computes alike
R.defjvp_zero(dim_value_p)


def dim_value(dim):
    """A weak int64 0-d array holding the (run-time) value of the symbolic dim ``dim``."""
    return dim_value_p.bind(dim=dim)
